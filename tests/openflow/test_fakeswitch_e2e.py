"""End-to-end decisions on the FakeSwitch: the flows of node A (and node B) forward as Contiv would."""

from __future__ import annotations

import dataclasses
from typing import Any

from openflow.desired import desired
from openflow.flow import ETH_IPV4, IP_TCP
from openflow.inputs import TunnelPort, ipv4, vip_mac
from openflow.pipeline import TABLES
from tests.openflow.scenario import (
    BLUE,
    DB1,
    IP,
    KUBE_WEB,
    MAC,
    VTEP_A,
    WEB1,
    WEB2,
    WEB_EPG,
    kube_service_of,
    local_of,
    node_a,
    remote_of,
    with_backends,
)
from tests.support.fakeswitch import FakeSwitch, arp_request

VIP = ipv4("198.19.10.250", "vip")


def tcp(src: str, dst_ip: int, dst_mac: int, dport: int, sport: int = 40000, flags: int = 0x02) -> dict[str, int]:
    return {
        "eth_src": MAC[src], "eth_dst": dst_mac, "eth_type": ETH_IPV4, "ipv4_src": IP[src], "ipv4_dst": dst_ip,
        "ip_proto": IP_TCP, "tp_src": sport, "tp_dst": dport, "tcp_flags": flags,
    }  # fmt: skip


def switch_a(**changes: Any) -> FakeSwitch:
    return FakeSwitch.with_state(desired(node_a(**changes)))


def test_same_epg_traffic_is_allowed_across_nodes_through_the_tunnel() -> None:
    result = switch_a().send(3, **tcp("web1", IP["web2"], MAC["web2"], 80))
    [(port, packet)] = result.outputs
    assert port == 7 and packet["tun_id"] == 100


def test_deny_rule_blocks_only_its_port_and_dscp_marks_what_passes() -> None:
    switch = switch_a()
    assert switch.send(3, **tcp("web1", IP["db1"], MAC["db1"], 5432)).ports == []
    assert switch.send(3, **tcp("web1", IP["db1"], MAC["db1"], 80)).ports == [4]
    [(port, reply)] = switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 40000, sport=80, flags=0x12)).outputs
    assert port == 3 and reply["ip_dscp"] == 46


def test_spoofed_source_is_dropped() -> None:
    packet = tcp("web1", IP["db1"], MAC["db1"], 80) | {"ipv4_src": IP["web2"]}
    assert switch_a().send(3, **packet).ports == []


def test_arp_for_a_known_ip_is_answered_on_the_input_port() -> None:
    [(port, reply)] = switch_a().send(3, **arp_request(MAC["web1"], IP["web1"], IP["web2"])).outputs
    assert port == 3
    assert (reply["arp_op"], reply["arp_sha"], reply["arp_spa"], reply["arp_tha"], reply["arp_tpa"]) == (
        2, MAC["web2"], IP["web2"], MAC["web1"], IP["web1"],
    )  # fmt: skip
    assert (reply["eth_src"], reply["eth_dst"]) == (MAC["web2"], MAC["web1"])


def test_arp_for_an_unknown_ip_floods_locally_and_to_the_tunnel() -> None:
    result = switch_a().send(3, **arp_request(MAC["web1"], IP["web1"], ipv4("198.19.10.77", "x")))
    assert result.ports == [4, 7]


def test_traffic_from_the_tunnel_skips_policy_and_reaches_the_local_port() -> None:
    packet = tcp("web2", IP["db1"], MAC["db1"], 5432) | {"tun_id": 100}
    assert switch_a().send(7, **packet).ports == [4]  # denied at the source node, not here
    assert switch_a().send(7, **packet | {"tun_id": 101}).ports == []  # unknown VNI


def test_vip_is_load_balanced_with_dnat_and_reverse_nat() -> None:
    switch = switch_a(services=(with_backends(node_a().services[0], IP["web1"]),))
    [(port, request)] = switch.send(4, **tcp("db1", VIP, vip_mac(VIP), 80)).outputs
    assert (port, request["ipv4_dst"], request["tp_dst"], request["eth_dst"]) == (3, IP["web1"], 8080, MAC["web1"])
    reply = tcp("web1", IP["db1"], MAC["db1"], 40000, sport=8080, flags=0x12)
    [(port, back)] = switch.send(3, **reply).outputs
    assert (port, back["ipv4_src"], back["tp_src"]) == (4, VIP, 80)


def test_vip_to_a_remote_provider_unnats_the_reply_from_the_tunnel() -> None:
    switch = switch_a(services=(with_backends(node_a().services[0], IP["web2"]),))
    [(port, request)] = switch.send(4, **tcp("db1", VIP, vip_mac(VIP), 80)).outputs
    assert (port, request["ipv4_dst"], request["tun_id"]) == (7, IP["web2"], 100)
    reply = tcp("web2", IP["db1"], MAC["db1"], 40000, sport=8080, flags=0x12) | {"tun_id": 100}
    [(port, back)] = switch.send(7, **reply).outputs
    assert (port, back["ipv4_src"], back["tp_src"]) == (4, VIP, 80)


def test_node_b_delivers_what_node_a_tunnels() -> None:
    node_b = node_a(
        local_ports=(local_of(WEB2, BLUE, WEB_EPG, 5),),
        remote_endpoints=(remote_of(WEB1, BLUE, VTEP_A), remote_of(DB1, BLUE, VTEP_A)),
        tunnels=(TunnelPort(9, ipv4(VTEP_A, "vtep")),),
    )
    a, b = switch_a(), FakeSwitch.with_state(desired(node_b))
    [(port, on_wire)] = a.send(3, **tcp("web1", IP["web2"], MAC["web2"], 22)).outputs
    assert port == 7
    assert b.send(9, **on_wire).ports == [5]


CLUSTER_IP = ipv4("198.19.112.10", "cluster ip")
GATEWAY_MAC = vip_mac(ipv4("198.19.10.254", "gateway"))


def test_kube_service_ports_reach_each_backend_on_its_own_target_port() -> None:
    switch = switch_a(services=(kube_service_of(KUBE_WEB),))
    reached = set()
    for sport in range(40000, 40040):  # the select group hashes the 5-tuple: many connections reach both
        [(port, request)] = switch.send(4, **tcp("db1", CLUSTER_IP, GATEWAY_MAC, 80, sport=sport)).outputs
        reached.add((port, request["ipv4_dst"], request["tp_dst"]))
    assert reached == {(3, IP["web1"], 8080), (7, IP["web2"], 8081)}
    dns = tcp("db1", CLUSTER_IP, GATEWAY_MAC, 53) | {"ip_proto": 17}
    del dns["tcp_flags"]
    [(port, request)] = switch.send(4, **dns).outputs
    assert (port, request["ipv4_dst"], request["tp_dst"]) == (7, IP["web2"], 5353)


def test_session_affinity_keeps_a_client_on_its_backend_until_the_backend_goes() -> None:
    affine = dataclasses.replace(kube_service_of(KUBE_WEB), affinity_timeout=600)
    switch = switch_a(services=(affine,))
    first = switch.send(4, **tcp("db1", CLUSTER_IP, GATEWAY_MAC, 80, sport=40000)).outputs[0][1]["ipv4_dst"]
    for sport in range(40001, 40030):  # new connections (new source ports) of the same client
        [(_, request)] = switch.send(4, **tcp("db1", CLUSTER_IP, GATEWAY_MAC, 80, sport=sport)).outputs
        assert request["ipv4_dst"] == first
    others = [ip for ip in (IP["web1"], IP["web2"]) if ip != first]
    moved = switch_a(services=(with_backends(affine, *others),))
    moved.flows.update({k: f for k, f in switch.flows.items() if f.table == TABLES["session_affinity"].id})  # what the switch learned stays
    [(_, request)] = moved.send(4, **tcp("db1", CLUSTER_IP, GATEWAY_MAC, 80, sport=41000)).outputs
    assert request["ipv4_dst"] == others[0], "a learned backend that left the service is not used"

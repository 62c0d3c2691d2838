"""End-to-end decisions on the FakeSwitch: the flows of node A (and node B) forward as Contiv would."""

from __future__ import annotations

import dataclasses
from typing import Any

from openflow.desired import desired
from openflow.flow import ETH_IPV4, IP_TCP
from openflow.inputs import TunnelPort, ipv4, vip_mac
from tests.openflow.fakeswitch import FakeSwitch, arp_request
from tests.openflow.scenario import (
    BLUE,
    DB1,
    IP,
    MAC,
    VTEP_A,
    WEB1,
    WEB2,
    WEB_EPG,
    local_of,
    node_a,
    remote_of,
)

VIP = ipv4("10.1.0.250", "vip")


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
    result = switch_a().send(3, **arp_request(MAC["web1"], IP["web1"], ipv4("10.1.0.77", "x")))
    assert result.ports == [4, 7]


def test_traffic_from_the_tunnel_skips_policy_and_reaches_the_local_port() -> None:
    packet = tcp("web2", IP["db1"], MAC["db1"], 5432) | {"tun_id": 100}
    assert switch_a().send(7, **packet).ports == [4]  # denied at the source node, not here
    assert switch_a().send(7, **packet | {"tun_id": 101}).ports == []  # unknown VNI


def test_vip_is_load_balanced_with_dnat_and_reverse_nat() -> None:
    switch = switch_a(services=(dataclasses.replace(node_a().services[0], providers=(IP["web1"],)),))
    [(port, request)] = switch.send(4, **tcp("db1", VIP, vip_mac(VIP), 80)).outputs
    assert (port, request["ipv4_dst"], request["tp_dst"], request["eth_dst"]) == (3, IP["web1"], 8080, MAC["web1"])
    reply = tcp("web1", IP["db1"], MAC["db1"], 40000, sport=8080, flags=0x12)
    [(port, back)] = switch.send(3, **reply).outputs
    assert (port, back["ipv4_src"], back["tp_src"]) == (4, VIP, 80)


def test_vip_to_a_remote_provider_unnats_the_reply_from_the_tunnel() -> None:
    switch = switch_a(services=(dataclasses.replace(node_a().services[0], providers=(IP["web2"],)),))
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

"""Ingress from outside the cluster on the FakeSwitch (docs/policy.md): a VLAN node whose pod is
isolated for ingress with an ipBlock allow. A host on the VLAN is judged by the pod's ingress
here (the allow, the except, the isolation), a pod of another node is not (its own node judged
it), replies to what the pod opened come back, and the pod reaches the host through the uplink.
Plus the service_lb flow that sends such packets to np_ingress and the VLAN unknown-unicast flows."""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

from openflow.desired import desired
from openflow.fields import Category, cookie
from openflow.flow import ETH_IPV4
from openflow.flows import forward, netpol
from openflow.inputs import HostPort, NetpolPod, NetpolRule, NodeInputs, ipv4, vip_mac
from openflow.pipeline import TABLES
from tests.openflow.scenario import KUBE_WEB, RED_VLAN, ep, kube_service_of, local_of, remote_of, texts
from tests.support.fakeswitch import FakeSwitch

POD, OTHER_NODES_POD = ep("a", "198.19.20.2", 0, RED_VLAN), ep("b", "198.19.20.3", 0, RED_VLAN)
POD_IP, POD_MAC = ipv4(POD["ipAddress"], "pod"), int(POD["macAddress"].replace(":", ""), 16)
UPLINK, POD_PORT, HOST_PORT = 8, 3, 9
TAGGED = 200  # the network's VLAN (the FakeSwitch keeps the 12-bit VID)
ALLOWED_HOST, EXCEPTED_HOST, OTHER_HOST = (int(ipaddress.IPv4Address(a)) for a in ("198.18.30.5", "198.18.30.200", "198.18.31.5"))
RULES = (
    NetpolRule("ingress", 100, POD_IP, None, 0, None, "drop", "prod/a/ingress/isolation"),
    NetpolRule("ingress", 200, POD_IP, (ipv4("198.18.30.0", "block"), 25), 6, (80, 80), "allow", "prod/a-from-block/ingress/0"),
)
NODE_ADDRESS = int(ipaddress.IPv4Address("198.18.255.254"))


def vlan_node(**changes: Any) -> NodeInputs:
    fields: dict[str, Any] = {
        "local_ports": (local_of(POD, RED_VLAN, None, POD_PORT),),
        "remote_endpoints": (remote_of(OTHER_NODES_POD, RED_VLAN),),
        "uplinks": (UPLINK,),
        "netpol": (NetpolPod("prod/a", RULES),),
        "round": 1,
    }
    return NodeInputs("vlan", **(fields | changes))


def packet(src: int, dst: int, dport: int, sport: int = 40000, flags: int = 0x02) -> dict[str, int]:
    return {
        "eth_src": vip_mac(src), "eth_dst": POD_MAC if dst == POD_IP else vip_mac(dst), "eth_type": ETH_IPV4,
        "ipv4_src": src, "ipv4_dst": dst, "ip_proto": 6, "tp_src": sport, "tp_dst": dport, "tcp_flags": flags,
    }  # fmt: skip


def from_uplink(switch: FakeSwitch, src: int, dport: int, **more: int) -> tuple[list[int], list[str]]:
    result = switch.send(UPLINK, vlan_vid=TAGGED, **packet(src, POD_IP, dport, **more))
    return result.ports, result.hits


def test_a_host_on_the_vlan_is_judged_by_the_pods_ingress_rules() -> None:
    switch = FakeSwitch.with_state(desired(vlan_node()))
    ports, hits = from_uplink(switch, ALLOWED_HOST, 80)
    assert ports == [POD_PORT] and any(h.startswith("table=12, priority=200,tcp,nw_src=198.18.30.0/25") for h in hits), hits
    for src, dport in ((EXCEPTED_HOST, 80), (OTHER_HOST, 80), (ALLOWED_HOST, 81)):
        ports, hits = from_uplink(switch, src, dport)
        assert ports == [] and hits[-1] == "table=12, priority=100,ip,nw_dst=198.19.20.2 actions=drop", (src, dport, hits)


def test_a_pod_of_another_node_is_not_judged_again() -> None:
    switch = FakeSwitch.with_state(desired(vlan_node()))
    ports, hits = from_uplink(switch, ipv4(OTHER_NODES_POD["ipAddress"], "b"), 81)
    assert ports == [POD_PORT] and not any(h.startswith("table=12, ") for h in hits), hits


def test_replies_to_what_the_pod_opened_come_back_and_it_reaches_the_host_through_the_uplink() -> None:
    switch = FakeSwitch.with_state(desired(vlan_node()))
    out = switch.send(POD_PORT, **{**packet(POD_IP, OTHER_HOST, 443), "eth_src": POD_MAC})
    assert [(port, sent.get("vlan_vid")) for port, sent in out.outputs] == [(UPLINK, TAGGED)], out.hits
    ports, hits = from_uplink(switch, OTHER_HOST, 40000, sport=443, flags=0x12)
    assert ports == [POD_PORT] and not any(h.startswith("table=12, ") for h in hits), hits


def test_the_node_itself_is_trusted_on_the_host_port_anyone_it_forwards_is_not() -> None:
    host = HostPort(HOST_PORT, 0x02AA00000001, NODE_ADDRESS)
    switch = FakeSwitch.with_state(desired(vlan_node(host_port=host)))
    assert switch.send(HOST_PORT, **packet(NODE_ADDRESS, POD_IP, 81)).ports == [POD_PORT]
    assert switch.send(HOST_PORT, **packet(OTHER_HOST, POD_IP, 81)).ports == []
    assert switch.send(HOST_PORT, **packet(ALLOWED_HOST, POD_IP, 80)).ports == [POD_PORT]


def test_what_comes_from_outside_to_a_local_pod_goes_to_np_ingress_unless_a_reply() -> None:
    port = local_of(POD, RED_VLAN, None, POD_PORT)
    flows = netpol.port_flows(TABLES, port, 1)
    assert texts(flows) == [
        "table=4, priority=330,ct_state=-rel-rpl+trk,ip,metadata=0x300000000000000/0x300000000000000,nw_dst=198.19.20.2 actions=goto_table:12"
    ]
    assert flows[0].cookie == cookie(Category.NETPOL, port.endpoint_id, 1)


def test_a_frame_flooded_to_a_node_without_the_destination_is_not_judged_there() -> None:
    switch = FakeSwitch.with_state(desired(vlan_node()))
    other = ipv4(OTHER_NODES_POD["ipAddress"], "b")
    result = switch.send(UPLINK, vlan_vid=TAGGED, **{**packet(ALLOWED_HOST, other, 80), "eth_dst": 0x0202C6131403})
    assert result.ports == [] and not any(h.startswith("table=12, ") for h in result.hits), result.hits


def test_unknown_unicast_leaves_a_vlan_bridge_through_the_uplink_but_not_to_the_gateway() -> None:
    with_gateway = {**RED_VLAN, "gateway": "198.19.20.254"}
    inputs = vlan_node(local_ports=(local_of(POD, with_gateway, None, POD_PORT),), netpol=())
    unknown = [t for t in texts(forward.flows(TABLES, inputs)) if "priority=5," in t or "priority=6," in t]
    assert unknown == [
        "table=8, priority=5,metadata=0xc800000000/0x1ffffff00000000 actions=push_vlan:0x8100,set_field:4296->vlan_vid,output:8",
        "table=8, priority=6,metadata=0xc800000000/0x1ffffff00000000,dl_dst=02:02:c6:13:14:fe actions=drop",
    ]
    assert not [t for t in texts(forward.flows(TABLES, dataclasses.replace(inputs, uplinks=()))) if "priority=5," in t]


def test_a_vip_on_a_port_it_does_not_serve_is_dropped_not_sent_out_of_the_uplink() -> None:
    """Unknown unicast leaves by the uplink here, and the VIP's MAC is no endpoint's: without the
    VIP's own drop, a packet to a port the Service does not serve would go out to the VLAN."""
    web = kube_service_of(KUBE_WEB)  # tcp/80 and udp/53 have backends
    switch = FakeSwitch.with_state(desired(vlan_node(services=(web,), netpol=())))
    to_vip = {**packet(POD_IP, web.vip, 8443), "eth_src": POD_MAC, "eth_dst": vip_mac(web.vip)}
    result = switch.send(POD_PORT, **to_vip)
    assert result.ports == [], result.hits
    assert any("priority=150,ip,nw_dst=198.19.112.10 actions=drop" in h for h in result.hits), result.hits
    elsewhere = {**to_vip, "ipv4_dst": OTHER_HOST, "eth_dst": vip_mac(OTHER_HOST)}
    assert switch.send(POD_PORT, **elsewhere).ports == [UPLINK], "a host on the VLAN is still reached through the uplink"

"""Routing mode (vlrouter) golden flows, and packets through them on the FakeSwitch: a pod's
gateway ARP answered with the anycast MAC, a pod's packet for a learned route out of the uplink
to the next hop's MAC, routed traffic from the uplink delivered to a local pod, the node's own
ARP/BGP between the uplink and the router port; nothing bridged to the uplink."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest

from openflow import desired
from openflow.flow import ETH_ARP, ETH_IPV4, PipelineError
from openflow.flows import arp, classifier, forward, routing
from openflow.inputs import ANYCAST_MAC, NetpolPod, NetpolRule, NodeInputs, Route, Router, ipv4
from openflow.pipeline import TABLES
from tests.openflow.scenario import RED_VLAN, WEB_EPG, ep, local_of, remote_of, texts
from tests.support.fakeswitch import FakeSwitch, arp_request

UPLINK, ROUTER_PORT = 8, 9
ROUTER_MAC, TOR_MAC = 0x02AA00000001, 0x02BB00000001
ROUTER_IP = ipv4("198.19.1.2", "router")
RED_GW = {**RED_VLAN, "gateway": "198.19.10.254"}
POD = ep("pod1", "198.19.10.2", 5, RED_GW)
OTHER_NODE_POD = ep("pod9", "198.19.10.9", 5, RED_GW)
LEARNED = (Route(ipv4("198.19.20.7", "r"), 32, TOR_MAC), Route(ipv4("198.18.0.0", "r"), 16, TOR_MAC + 1))


def routed_node(routes: tuple[Route, ...] = LEARNED) -> NodeInputs:
    return NodeInputs(
        encap="vlan",
        local_ports=(local_of(POD, RED_GW, WEB_EPG, 3),),
        remote_endpoints=(remote_of(OTHER_NODE_POD, RED_GW),),
        uplinks=(UPLINK,),
        round=1,
        router=Router(ROUTER_PORT, ROUTER_MAC, ROUTER_IP, UPLINK),
        routes=routes,
    )


def test_router_flows_golden() -> None:
    assert texts(routing.flows(TABLES, routed_node())) == [
        "priority=100,in_port=8 actions=write_metadata:0x300000000000000/0x3ffffffffff0000,goto_table:3",
        "priority=200,ip,in_port=8,nw_dst=198.19.1.2 actions=output:9",
        "priority=200,arp,in_port=8 actions=output:9",
        "priority=200,in_port=9 actions=output:8",
        "table=8, priority=36,ip,dl_dst=00:00:11:11:11:11,nw_dst=198.18.0.0/16 actions=set_field:02:aa:00:00:00:01->eth_src,set_field:02:bb:00:00:00:02->eth_dst,output:8",
        "table=8, priority=52,ip,dl_dst=00:00:11:11:11:11,nw_dst=198.19.20.7 actions=set_field:02:aa:00:00:00:01->eth_src,set_field:02:bb:00:00:00:01->eth_dst,output:8",
        "table=8, priority=101,ip,nw_dst=198.19.10.2 actions=set_field:00:00:11:11:11:11->eth_src,set_field:02:02:c6:13:0a:02->eth_dst,output:3",
    ]


def test_gateway_and_other_nodes_endpoints_answered_with_the_anycast_mac() -> None:
    inputs = routed_node()
    replies = [t for t in texts(arp.flows(TABLES, inputs)) if "set_field:00:00:11:11:11:11->eth_src" in t]
    assert sorted(t.split(",arp_tpa=")[1].split(",")[0] for t in replies) == ["198.19.10.254", "198.19.10.9"]
    bridged = dataclasses.replace(inputs, router=None)
    assert not [t for t in texts(arp.flows(TABLES, bridged)) if "00:00:11:11:11:11" in t]


def test_nothing_is_bridged_to_the_uplink() -> None:
    inputs = routed_node()
    assert not [t for t in texts(forward.flows(TABLES, inputs)) if "push_vlan" in t]
    assert not [t for t in texts(classifier.flows(TABLES, inputs)) if "dl_vlan" in t]
    assert [t for t in texts(classifier.flows(TABLES, dataclasses.replace(inputs, router=None))) if "dl_vlan=200" in t], "bridge mode does"
    assert not routing.flows(TABLES, dataclasses.replace(inputs, router=None))


def test_a_prefix_listed_twice_is_refused_naming_it() -> None:
    twice = (*LEARNED, dataclasses.replace(LEARNED[0], next_hop_mac=TOR_MAC + 5))
    with pytest.raises(PipelineError, match="route 198.19.20.7/32 is listed twice"):
        desired(routed_node(twice))


def _switch(inputs: NodeInputs) -> FakeSwitch:
    return FakeSwitch.with_state(desired(inputs))


def test_pod_reaches_a_learned_route_through_the_uplink() -> None:
    switch = _switch(routed_node())
    gateway = switch.send(3, **arp_request(0x0202_C613_0A02, ipv4("198.19.10.2", "p"), ipv4("198.19.10.254", "gw")))
    assert gateway.ports == [3] and gateway.outputs[0][1]["arp_sha"] == ANYCAST_MAC
    for dst, next_hop in (("198.19.20.7", TOR_MAC), ("198.18.9.9", TOR_MAC + 1)):
        out = switch.send(
            3,
            eth_src=0x0202_C613_0A02,
            eth_dst=ANYCAST_MAC,
            eth_type=ETH_IPV4,
            ipv4_src=ipv4("198.19.10.2", "p"),
            ipv4_dst=ipv4(dst, "d"),
            ip_proto=1,
        )
        assert out.ports == [UPLINK], dst
        sent = out.outputs[0][1]
        assert (sent["eth_src"], sent["eth_dst"], "vlan_vid" in sent) == (ROUTER_MAC, next_hop, False)
    unknown = switch.send(
        3, eth_src=0x0202_C613_0A02, eth_dst=ANYCAST_MAC, eth_type=ETH_IPV4, ipv4_src=ipv4("198.19.10.2", "p"), ipv4_dst=ipv4("198.19.90.1", "d")
    )
    assert unknown.ports == [], "no route, dropped"
    withdrawn = _switch(routed_node(LEARNED[1:]))
    gone = withdrawn.send(
        3, eth_src=0x0202_C613_0A02, eth_dst=ANYCAST_MAC, eth_type=ETH_IPV4, ipv4_src=ipv4("198.19.10.2", "p"), ipv4_dst=ipv4("198.19.20.7", "d")
    )
    assert gone.ports == []


def test_routed_traffic_from_the_uplink_reaches_the_local_pod_from_the_anycast_mac() -> None:
    switch = _switch(routed_node())
    routed_in = dict(eth_src=TOR_MAC, eth_dst=ROUTER_MAC, eth_type=ETH_IPV4, ipv4_src=ipv4("198.19.20.7", "s"), ip_proto=1)
    out = switch.send(UPLINK, **routed_in, ipv4_dst=ipv4("198.19.10.2", "d"))
    assert out.ports == [3]
    assert (out.outputs[0][1]["eth_src"], out.outputs[0][1]["eth_dst"]) == (ANYCAST_MAC, 0x0202_C613_0A02)
    assert switch.send(UPLINK, **routed_in, ipv4_dst=ipv4("198.19.10.77", "d")).ports == [], "not a local pod: dropped (no hairpin)"


def test_the_nodes_own_arp_and_bgp_pass_between_uplink_and_router_port() -> None:
    switch = _switch(routed_node())
    tor_ip = int(ipaddress.IPv4Address("198.19.1.1"))
    assert switch.send(UPLINK, **arp_request(TOR_MAC, tor_ip, ROUTER_IP)).ports == [ROUTER_PORT]
    bgp = dict(eth_src=TOR_MAC, eth_dst=ROUTER_MAC, eth_type=ETH_IPV4, ipv4_src=tor_ip, ipv4_dst=ROUTER_IP, ip_proto=6, tp_src=40000, tp_dst=179)
    assert switch.send(UPLINK, **bgp).ports == [ROUTER_PORT]
    assert switch.send(ROUTER_PORT, eth_src=ROUTER_MAC, eth_dst=TOR_MAC, eth_type=ETH_ARP).ports == [UPLINK]


def test_incremental_updates_in_routing_mode_match_a_full_build() -> None:
    from openflow.incremental import FlowState

    state = FlowState()
    inputs = routed_node()
    state.update(inputs)
    steps = [
        dataclasses.replace(inputs, local_ports=()),  # the pod leaves: its /32 flow goes
        inputs,
        dataclasses.replace(inputs, routes=LEARNED[1:]),  # a route withdrawn
        dataclasses.replace(inputs, router=None),  # back to bridging
    ]
    for step in steps:
        state.update(step)
        assert state.audit(step).clean
    state.update(inputs)
    plan = state.update(steps[2])
    assert not state.last_update_full and len(plan.delete_flows) == 1 and not plan.add_flows, "a withdrawn route costs its one flow"
    withdrawn = steps[2]
    assert len(desired(withdrawn).flows) == len(desired(inputs).flows) - 1


def test_routed_in_from_outside_is_judged_by_the_pods_ingress_from_another_nodes_pod_not() -> None:
    pod_ip = ipv4("198.19.10.2", "d")
    isolated = NetpolPod("red/pod1", (NetpolRule("ingress", 100, pod_ip, None, 0, None, "drop", "red/pod1/ingress/isolation"),))
    switch = _switch(dataclasses.replace(routed_node(), netpol=(isolated,)))
    routed_in = dict(eth_src=TOR_MAC, eth_dst=ROUTER_MAC, eth_type=ETH_IPV4, ipv4_dst=pod_ip, ip_proto=1)
    outside = switch.send(UPLINK, **routed_in, ipv4_src=ipv4("198.19.20.7", "s"))
    assert outside.ports == [] and outside.hits[-1] == "table=12, priority=100,ip,nw_dst=198.19.10.2 actions=drop", outside.hits
    assert switch.send(UPLINK, **routed_in, ipv4_src=ipv4(OTHER_NODE_POD["ipAddress"], "s")).ports == [3], "judged at its own node"
    assert texts(classifier.remote_flows(TABLES, remote_of(OTHER_NODE_POD, RED_GW), routed_node().fabric)) == [
        "priority=110,ip,in_port=8,nw_src=198.19.10.9 actions=write_metadata:0x100000000000000/0x1ffffffffff0000,goto_table:3"
    ]

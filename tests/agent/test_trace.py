"""The pure halves of the OVS trace: the flow text of a pod's first packet, of the same packet
arriving at the destination's node, and the verdict read from ofproto/trace's answer."""

from __future__ import annotations

import pytest

from contivd.agent.trace import (
    TraceError,
    arrival_flow,
    arrival_trace,
    datapath_verdict,
    destination_mac,
    external_arrival_flow,
    handed_to_node,
    ovs_trace,
    trace_flow,
)
from openflow.inputs import ANYCAST_MAC, HostPort, LocalPort, NetworkRef, NodeInputs, RemoteEndpoint, Route, Router, TunnelPort, ipv4

NET = NetworkRef("pods.default", "vxlan", 1, 100, ipv4("198.18.10.254", "gw"))
PORT = LocalPort(3, "a", ipv4("198.18.10.1", "a"), 0x0202C6120A01, NET)
PEER = RemoteEndpoint("b", ipv4("198.18.10.2", "b"), 0x0202C6120A02, NET, vtep=ipv4("198.19.0.2", "vtep"))


def test_trace_flow_per_protocol() -> None:
    b = ipv4("198.18.10.2", "b")
    assert trace_flow(PORT, PEER.mac, b, 6, 5432) == (
        "tcp,in_port=3,dl_src=02:02:c6:12:0a:01,dl_dst=02:02:c6:12:0a:02,nw_src=198.18.10.1,nw_dst=198.18.10.2,tcp_src=40000,tcp_dst=5432,tcp_flags=0x002"
    )
    assert trace_flow(PORT, PEER.mac, b, 1, 0).startswith("icmp,in_port=3,") and trace_flow(PORT, PEER.mac, b, 1, 0).endswith(
        ",icmp_type=8,icmp_code=0"
    )
    assert trace_flow(PORT, PEER.mac, b, 17, 53).endswith(",udp_src=40000,udp_dst=53")
    assert trace_flow(PORT, PEER.mac, b, 0, 0).startswith("ip,in_port=3,")


def test_destination_mac_is_the_endpoints_or_the_gateways() -> None:
    inputs = NodeInputs("vxlan", (PORT,), (PEER,))
    assert destination_mac(inputs, PORT, PEER.ip) == PEER.mac
    assert destination_mac(inputs, PORT, ipv4("198.19.9.9", "x")) == 0x0202_C6120AFE  # 02:02:<gateway ip>


def test_on_a_vlan_network_an_outside_address_is_a_host_on_the_vlan_the_node_and_vips_the_gateways() -> None:
    net = NetworkRef("vpods.default", "vlan", 100, 0, ipv4("198.18.10.254", "gw"))
    port = LocalPort(3, "a", ipv4("198.18.10.1", "a"), 0x0202C6120A01, net)
    node = ipv4("172.19.255.254", "node")
    inputs = NodeInputs("vlan", (port,), uplinks=(8,), host_port=HostPort(9, 0x02AA00000001, node))
    assert destination_mac(inputs, port, ipv4("198.19.9.9", "x")) == 0x0202_C6130909  # 02:02:<its ip>, on-link
    assert destination_mac(inputs, port, node) == 0x0202_C6120AFE, "the node itself: through the gateway to the host port"
    assert destination_mac(NodeInputs("vlan", (port,)), port, ipv4("198.19.9.9", "x")) == 0x0202_C6120AFE, "no uplink: no host on the VLAN"


@pytest.mark.parametrize(
    ("output", "verdict"),
    [
        ("Datapath actions: ct(zone=65520,nat),recirc(0x1)\n...\nDatapath actions: 3\n", "allow"),
        (
            "Datapath actions: ct(zone=65520,nat),recirc(0x1)\n...\nDatapath actions: set(tunnel(tun_id=0x64,dst=198.19.0.2,ttl=64,tp_dst=4789,flags(df|key))),4\n",
            "allow",
        ),
        ("Datapath actions: ct(zone=65520,nat),recirc(0x1)\n...\nDatapath actions: drop\n", "drop"),
        ("Datapath actions: ct(zone=65520,nat),recirc(0x2)\n", "drop"),
        ("Datapath actions: ct(zone=65520,nat),recirc(0x1)\n...\nDatapath actions: hash(sym_l4(0)),recirc(0x2)\n", "load-balanced"),
        ("no answer", "drop"),
    ],
)
def test_the_last_datapath_actions_decide(output: str, verdict: str) -> None:
    assert datapath_verdict(output)[0] == verdict


def test_a_packet_whose_only_output_is_the_host_port_is_handed_to_the_node() -> None:
    to_node = (
        "20. ip,metadata=0x100000000/0xff00000000,dl_dst=02:02:c6:12:0a:fe, priority 7\n    set_field:02:aa:00:00:00:01->eth_dst\n    output:7\n"
    )
    assert handed_to_node(to_node, 7)
    assert not handed_to_node(to_node.replace("output:7", "output:3"), 7), "a pod's port"
    assert not handed_to_node(to_node + "    output:3\n", 7), "more than the node"
    assert not handed_to_node("Datapath actions: drop\n", 7)


def test_the_destination_half_arrives_through_the_tunnel_or_tagged_on_the_uplink() -> None:
    here = LocalPort(5, "b", PEER.ip, PEER.mac, NET)
    source = RemoteEndpoint("a", PORT.ip, PORT.mac, NET, vtep=ipv4("198.19.0.1", "vtep"))
    vxlan = NodeInputs("vxlan", (here,), (source,), tunnels=(TunnelPort(9, source.vtep),))
    assert arrival_flow(vxlan, source, here, 6, 5432) == (
        "tcp,in_port=9,tun_id=0x64,tun_src=198.19.0.1,dl_src=02:02:c6:12:0a:01,dl_dst=02:02:c6:12:0a:02,"
        "nw_src=198.18.10.1,nw_dst=198.18.10.2,tcp_src=40000,tcp_dst=5432,tcp_flags=0x002"
    )
    assert arrival_flow(NodeInputs("vxlan", (here,), (source,)), source, here, 6, 5432) is None, "no tunnel to its VTEP yet"
    vlan_net = NetworkRef("pods.default", "vlan", 100, 0, 0)
    tagged = LocalPort(5, "b", PEER.ip, PEER.mac, vlan_net)
    sender = RemoteEndpoint("a", PORT.ip, PORT.mac, vlan_net)
    vlan = NodeInputs("vlan", (tagged,), (sender,), uplinks=(7, 6))
    assert arrival_flow(vlan, sender, tagged, 1, 0) == (
        "icmp,in_port=6,dl_vlan=100,dl_src=02:02:c6:12:0a:01,dl_dst=02:02:c6:12:0a:02,nw_src=198.18.10.1,nw_dst=198.18.10.2,icmp_type=8,icmp_code=0"
    )


async def test_an_ovs_that_cannot_be_asked_is_a_trace_error_naming_it() -> None:
    inputs = NodeInputs("vxlan", (PORT,), (PEER,))
    with pytest.raises(TraceError, match="ofproto/trace br0 tcp,in_port=3"):
        await ovs_trace("n1", "br0", ["/nonexistent/ovs-appctl"], inputs, PORT.ip, PEER.ip, 6, 80)
    assert await ovs_trace("n1", "br0", ["/nonexistent/ovs-appctl"], inputs, PEER.ip, PORT.ip, 6, 80) is None, "the source is not local"


def test_routing_mode_sends_to_the_anycast_mac_and_arrives_untagged_from_the_tor() -> None:
    vlan_net = NetworkRef("pods.default", "vlan", 100, 0, ipv4("198.18.10.254", "gw"))
    here = LocalPort(5, "b", PEER.ip, PEER.mac, vlan_net)
    source = RemoteEndpoint("a", PORT.ip, PORT.mac, vlan_net)
    router = Router(ofport=2, mac=0x0A0000000002, address=ipv4("198.18.1.2", "router"), uplink=1)
    tor = Route(ipv4("198.18.10.0", "net"), 24, 0x0A00000000FE)
    inputs = NodeInputs("vlan", (here,), (source,), router=router, routes=(tor,))
    assert destination_mac(inputs, here, source.ip) == ANYCAST_MAC, "another node's endpoint is routed"
    assert arrival_flow(inputs, source, here, 1, 0) == (
        "icmp,in_port=1,dl_src=0a:00:00:00:00:fe,dl_dst=0a:00:00:00:00:02,nw_src=198.18.10.1,nw_dst=198.18.10.2,icmp_type=8,icmp_code=0"
    )


def test_an_external_source_enters_through_the_host_port_the_uplink_or_the_tor() -> None:
    host = HostPort(ofport=4, mac=0x0A00000000AA, address=ipv4("198.18.255.254", "node"))
    outside = ipv4("198.19.7.7", "outside")
    vxlan = NodeInputs("vxlan", (PORT,), host_port=host)
    assert external_arrival_flow(vxlan, host.address, PORT, 6, 80) == (
        "tcp,in_port=4,dl_src=0a:00:00:00:00:aa,dl_dst=02:02:c6:12:0a:01,nw_src=198.18.255.254,nw_dst=198.18.10.1,tcp_src=40000,tcp_dst=80,tcp_flags=0x002"
    )
    assert external_arrival_flow(vxlan, outside, PORT, 1, 0) is not None and "in_port=4," in str(external_arrival_flow(vxlan, outside, PORT, 1, 0))
    assert external_arrival_flow(NodeInputs("vxlan", (PORT,)), outside, PORT, 1, 0) is None, "no host port: no way in"
    vlan_net = NetworkRef("pods.default", "vlan", 100, 0, 0)
    tagged = LocalPort(5, "b", PEER.ip, PEER.mac, vlan_net)
    vlan = NodeInputs("vlan", (tagged,), uplinks=(7, 6), host_port=host)
    assert external_arrival_flow(vlan, outside, tagged, 1, 0) == (
        "icmp,in_port=6,dl_vlan=100,dl_src=02:02:c6:13:07:07,dl_dst=02:02:c6:12:0a:02,nw_src=198.19.7.7,nw_dst=198.18.10.2,icmp_type=8,icmp_code=0"
    )
    assert "in_port=4," in str(external_arrival_flow(vlan, host.address, tagged, 1, 0)), "the node itself: its host port"
    router = Router(ofport=2, mac=0x0A0000000002, address=ipv4("198.18.1.2", "router"), uplink=1)
    routed = NodeInputs("vlan", (tagged,), router=router)
    assert str(external_arrival_flow(routed, outside, tagged, 1, 0)).startswith("icmp,in_port=1,dl_src=02:02:c6:13:07:07,dl_dst=0a:00:00:00:00:02,")


async def test_the_arrival_half_is_for_a_local_destination_from_elsewhere() -> None:
    inputs = NodeInputs("vxlan", (PORT,), (PEER,))
    for src, dst in ((PEER.ip, PEER.ip), (PORT.ip, PORT.ip), (ipv4("198.19.7.7", "x"), PORT.ip)):  # not local; from itself; no way in
        assert await arrival_trace("n1", "br0", ["/nonexistent/ovs-appctl"], inputs, src, dst, 1, 0) is None

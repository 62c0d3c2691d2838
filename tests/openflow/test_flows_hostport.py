"""Golden flows of the host port: node → local pod (policy skipped as REMOTE), pod → the node's
private address through the gateway; none without a host port or on a network without a gateway."""

from __future__ import annotations

import dataclasses
import ipaddress

from openflow import HostPort, desired
from openflow.flows import classifier, forward
from openflow.inputs import Router
from openflow.pipeline import TABLES
from tests.openflow.scenario import node_a, texts

HOST = HostPort(ofport=9, mac=0x02AA00000001, address=int(ipaddress.IPv4Address("198.18.255.254")))


def test_without_a_host_port_nothing_changes() -> None:
    inputs = node_a()
    assert inputs.host_port is None
    assert dataclasses.replace(inputs, host_port=HOST) != inputs
    assert not [t for t in texts(classifier.flows(TABLES, inputs)) if "in_port=9" in t]


def test_host_port_reaches_each_local_pod_marked_remote_and_only_the_node_itself_not_outside() -> None:
    inputs = dataclasses.replace(node_a(), host_port=dataclasses.replace(HOST, nodeport_source=int(ipaddress.IPv4Address("198.18.100.1"))))
    host = [t for t in texts(classifier.flows(TABLES, inputs)) if "in_port=9" in t]
    pods = sorted(str(ipaddress.IPv4Address(p.ip)) for p in inputs.ports())
    assert sorted(host) == sorted(
        [
            *(f"priority=100,ip,in_port=9,nw_dst={ip} actions=write_metadata:0x300006400000000/0x3ffffffffff0000,goto_table:3" for ip in pods),
            *(
                f"priority=110,ip,in_port=9,nw_src={node},nw_dst={ip} actions=write_metadata:0x100006400000000/0x1ffffffffff0000,goto_table:3"
                for ip in pods
                for node in ("198.18.100.1", "198.18.255.254")
            ),
        ]
    )


def test_pods_reach_the_nodes_private_address_through_their_gateway() -> None:
    base = node_a()
    with_gateway = tuple(
        dataclasses.replace(p, network=dataclasses.replace(p.network, gateway=int(ipaddress.IPv4Address("198.19.10.254")))) for p in base.local_ports
    )
    inputs = dataclasses.replace(base, local_ports=with_gateway, host_port=HOST)
    to_node = [t for t in texts(forward.flows(TABLES, inputs)) if "output:9" in t]
    assert to_node == [
        "table=8, priority=7,ip,metadata=0x6400000000/0x1ffffff00000000,dl_dst=02:02:c6:13:0a:fe actions=set_field:02:aa:00:00:00:01->eth_dst,output:9",
        "table=8, priority=100,ip,metadata=0x6400000000/0xffffff00000000,dl_dst=02:02:c6:13:0a:fe,nw_dst=198.18.255.254 actions=set_field:02:aa:00:00:00:01->eth_dst,output:9",
    ], "the node's private address, and the node as next hop of the pods' other routed packets"
    routed = dataclasses.replace(inputs, encap="vlan", router=Router(12, 0x02AA00000002, int(ipaddress.IPv4Address("198.19.99.1")), 3))
    assert not [t for t in texts(forward.flows(TABLES, routed)) if "priority=7," in t], "routing mode routes them itself"
    assert not [t for t in texts(forward.flows(TABLES, dataclasses.replace(base, host_port=HOST))) if "output:9" in t], "no gateway, no flow"
    assert desired(inputs).flows, "the whole bridge builds with the host port (no two owners claim one match)"


def test_the_node_enters_a_node_port_service_into_its_backends_network_unmarked() -> None:
    base = node_a()
    network = base.ports()[0].network
    entered = dataclasses.replace(base.services[0], entry_network=network)
    vip = ipaddress.IPv4Address(entered.vip)
    inputs = dataclasses.replace(base, services=(entered,), host_port=HOST)
    to_vip = [t for t in texts(classifier.flows(TABLES, inputs)) if f"nw_dst={vip}" in t]
    assert to_vip == [f"priority=100,ip,in_port=9,nw_dst={vip} actions=write_metadata:0x6400000000/0x1ffffffffff0000,goto_table:3"]
    assert len(desired(inputs).flows) == len(desired(dataclasses.replace(inputs, services=base.services)).flows) + 1
    assert not [t for t in texts(classifier.flows(TABLES, dataclasses.replace(inputs, host_port=None))) if f"nw_dst={vip}" in t]


def test_with_a_nodeport_source_replies_reach_this_node_and_those_for_peers_their_tunnel() -> None:
    base = node_a()
    gateway = int(ipaddress.IPv4Address("198.19.10.254"))
    with_gateway = tuple(dataclasses.replace(p, network=dataclasses.replace(p.network, gateway=gateway)) for p in base.local_ports)
    source = dataclasses.replace(HOST, nodeport_source=int(ipaddress.IPv4Address("198.18.100.1")))
    inputs = dataclasses.replace(base, local_ports=with_gateway, host_port=source)
    peers = {str(ipaddress.IPv4Address(t.remote_ip)): t.ofport for t in inputs.tunnels}
    routed = [t for t in texts(forward.flows(TABLES, inputs)) if "dl_dst=02:02:c6:13:0a:fe" in t and "priority=7," not in t]
    assert sorted(routed) == sorted(
        [
            "table=8, priority=100,ip,metadata=0x6400000000/0xffffff00000000,dl_dst=02:02:c6:13:0a:fe,nw_dst=198.18.255.254 actions=set_field:02:aa:00:00:00:01->eth_dst,output:9",
            "table=8, priority=100,ip,metadata=0x6400000000/0xffffff00000000,dl_dst=02:02:c6:13:0a:fe,nw_dst=198.18.100.1 actions=set_field:02:aa:00:00:00:01->eth_dst,output:9",
            *(
                f"table=8, priority=100,ip,metadata=0x6400000000/0x1ffffff00000000,dl_dst=02:02:c6:13:0a:fe,nw_dst={peer} actions=set_field:0x64->tun_id,output:{ofport}"
                for peer, ofport in peers.items()
            ),
        ]
    ), routed
    assert peers and desired(inputs).flows

"""Golden flows: classifier, spoof guard and proxy ARP."""

from __future__ import annotations

from openflow.fields import Category, cookie
from openflow.flows import arp, classifier, spoofguard
from openflow.inputs import NodeInputs
from openflow.pipeline import TABLES
from tests.openflow.scenario import BLUE, RED_VLAN, WEB1, WEB_EPG, ep, local_of, node_a, remote_of, texts

ARP_REPLY = (
    "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:{mac}->eth_src,set_field:2->arp_op,"
    "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:{mac}->arp_sha,"
    "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:{ip}->arp_spa,IN_PORT"
)


def test_classifier_vxlan() -> None:
    assert texts(classifier.flows(TABLES, node_a())) == [
        "priority=100,in_port=3 actions=write_metadata:0x6400050000/0x1ffffffffff0000,goto_table:1",
        "priority=100,in_port=4 actions=write_metadata:0x6400060000/0x1ffffffffff0000,goto_table:1",
        "priority=100,tun_id=0x64,in_port=7 actions=write_metadata:0x100006400000000/0x1ffffffffff0000,goto_table:3",
    ]


def test_classifier_vlan_pops_the_uplink_tag_and_marks_it_outside() -> None:
    inputs = NodeInputs("vlan", (local_of(ep("a", "198.19.20.2", 0, RED_VLAN), RED_VLAN, None, 3),), uplinks=(9, 8))
    assert texts(classifier.flows(TABLES, inputs)) == [
        "priority=100,in_port=3 actions=write_metadata:0xc800000000/0x1ffffffffff0000,goto_table:1",
        "priority=100,in_port=8,dl_vlan=200 actions=pop_vlan,write_metadata:0x30000c800000000/0x3ffffffffff0000,goto_table:3",
        "priority=100,in_port=9,dl_vlan=200 actions=pop_vlan,write_metadata:0x30000c800000000/0x3ffffffffff0000,goto_table:3",
    ]


def test_a_remote_endpoints_packets_from_the_vlan_uplink_are_not_outside() -> None:
    remote = remote_of(ep("b", "198.19.20.3", 0, RED_VLAN), RED_VLAN)
    inputs = NodeInputs("vlan", (local_of(ep("a", "198.19.20.2", 0, RED_VLAN), RED_VLAN, None, 3),), (remote,), uplinks=(9, 8))
    flows = classifier.remote_flows(TABLES, remote, inputs.fabric)
    assert sorted(texts(flows)) == [
        f"priority=110,ip,in_port={u},dl_vlan=200,nw_src=198.19.20.3 actions=pop_vlan,write_metadata:0x10000c800000000/0x1ffffffffff0000,goto_table:3"
        for u in (8, 9)
    ]
    assert all(f.cookie == cookie(Category.CLASSIFIER, remote.endpoint_id, 0) for f in flows)
    assert classifier.remote_flows(TABLES, remote, node_a().fabric) == [], "a tunnel carries only the cluster's pods: nothing to tell apart"


def test_bridge_ignores_ports_of_the_other_encap() -> None:
    vlan_port = local_of(ep("a", "198.19.20.2", 0, RED_VLAN), RED_VLAN, None, 5)
    assert classifier.flows(TABLES, node_a(local_ports=(vlan_port,))) == []


def test_spoof_guard() -> None:
    inputs = node_a(local_ports=(local_of(WEB1, BLUE, WEB_EPG, 3),))
    assert texts(spoofguard.flows(TABLES, inputs)) == [
        "table=1, priority=100,ip,in_port=3,dl_src=02:02:c6:13:0a:02,nw_src=198.19.10.2 actions=goto_table:3",
        ("table=1, priority=100,arp,in_port=3,dl_src=02:02:c6:13:0a:02,arp_spa=198.19.10.2,arp_sha=02:02:c6:13:0a:02 actions=goto_table:2"),
    ]


def test_proxy_arp_for_local_and_remote_endpoints() -> None:
    flows = arp.flows(TABLES, node_a())
    assert texts(flows) == [
        f"table=2, priority=100,arp,metadata=0x6400000000/0xffffff00000000,arp_tpa={ip},arp_op=1 actions=" + ARP_REPLY.format(mac=mac, ip=ip)
        for ip, mac in (
            ("198.19.10.2", "02:02:c6:13:0a:02"),
            ("198.19.10.3", "02:02:c6:13:0a:03"),
            ("198.19.10.9", "02:02:c6:13:0a:09"),
        )
    ]
    assert flows[2].cookie == cookie(Category.ARP, "blue.t-web2", 1)


def test_proxy_arp_answers_for_the_gateway_of_networks_with_local_ports() -> None:
    with_gateway = {**BLUE, "gateway": "198.19.10.254"}
    inputs = node_a(local_ports=(local_of(WEB1, with_gateway, WEB_EPG, 3),))
    gateway = [f for f in arp.flows(TABLES, inputs) if f.cookie == cookie(Category.ARP, "gateway:blue.t", 1)]
    assert texts(gateway) == [
        "table=2, priority=100,arp,metadata=0x6400000000/0xffffff00000000,arp_tpa=198.19.10.254,arp_op=1 actions="
        + ARP_REPLY.format(mac="02:02:c6:13:0a:fe", ip="198.19.10.254")
    ]

"""Golden flows: destination EPG, DSCP marking, L2 forwarding and flood groups."""

from __future__ import annotations

from openflow.fields import Category, group_id
from openflow.flows import dstepg, forward, qos
from openflow.inputs import NodeInputs
from openflow.pipeline import TABLES
from openflow.text import group_text
from tests.openflow.scenario import RED_VLAN, ep, local_of, node_a, remote_of, texts

ALL = group_id(Category.FLOOD, "all:blue.t")
LOCAL = group_id(Category.FLOOD, "local:blue.t")
NET = "metadata=0x6400000000/0xffffff00000000"


def test_dst_epg_writes_group_and_mac() -> None:
    assert texts(dstepg.flows(TABLES, node_a())) == [
        (f"table=5, priority=100,ip,{NET},nw_dst=198.19.10.2 actions=set_field:02:02:c6:13:0a:02->eth_dst,write_metadata:0x5/0xffff,goto_table:6"),
        (f"table=5, priority=100,ip,{NET},nw_dst=198.19.10.3 actions=set_field:02:02:c6:13:0a:03->eth_dst,write_metadata:0x6/0xffff,goto_table:6"),
        (f"table=5, priority=100,ip,{NET},nw_dst=198.19.10.9 actions=set_field:02:02:c6:13:0a:09->eth_dst,write_metadata:0x5/0xffff,goto_table:6"),
    ]


def test_dscp_only_for_ports_with_a_netprofile_dscp() -> None:
    assert texts(qos.flows(TABLES, node_a())) == ["table=7, priority=100,ip,in_port=4 actions=set_field:46->ip_dscp,goto_table:8"]


def test_forward_vxlan() -> None:
    assert texts(forward.flows(TABLES, node_a())) == [
        (f"table=8, priority=10,metadata=0x6400000000/0x1ffffff00000000,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=group:{ALL}"),
        (f"table=8, priority=10,metadata=0x100006400000000/0x1ffffff00000000,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00 actions=group:{LOCAL}"),
        f"table=8, priority=100,{NET},dl_dst=02:02:c6:13:0a:02 actions=output:3",
        f"table=8, priority=100,{NET},dl_dst=02:02:c6:13:0a:03 actions=output:4",
        ("table=8, priority=100,metadata=0x6400000000/0x1ffffff00000000,dl_dst=02:02:c6:13:0a:09 actions=set_field:0x64->tun_id,output:7"),
    ]
    assert sorted(group_text(g) for g in forward.groups(TABLES, node_a())) == sorted(
        [
            (f"group_id={ALL},type=all,bucket=actions=output:3,bucket=actions=output:4,bucket=actions=set_field:0x64->tun_id,output:7"),
            f"group_id={LOCAL},type=all,bucket=actions=output:3,bucket=actions=output:4",
        ]
    )


def test_remote_endpoint_waits_for_its_tunnel() -> None:
    flows = texts(forward.flows(TABLES, node_a(tunnels=())))
    assert not any("02:02:c6:13:0a:09" in f for f in flows)


def test_forward_vlan_tags_towards_the_active_uplink() -> None:
    inputs = NodeInputs(
        "vlan",
        (local_of(ep("a", "198.19.20.2", 0, RED_VLAN), RED_VLAN, None, 3),),
        (remote_of(ep("b", "198.19.20.3", 0, RED_VLAN), RED_VLAN),),
        uplinks=(9, 8),
    )
    unicast = [f for f in texts(forward.flows(TABLES, inputs)) if "priority=100" in f]
    assert unicast == [
        "table=8, priority=100,metadata=0xc800000000/0xffffff00000000,dl_dst=02:02:c6:13:14:02 actions=output:3",
        (
            "table=8, priority=100,metadata=0xc800000000/0x1ffffff00000000,dl_dst=02:02:c6:13:14:03"
            " actions=push_vlan:0x8100,set_field:4296->vlan_vid,output:8"
        ),
    ]

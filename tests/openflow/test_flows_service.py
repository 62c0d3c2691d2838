"""Golden flows and groups: conntrack-based service load balancing."""

from __future__ import annotations

from openflow.fields import CT_ZONE, Category, group_id
from openflow.flow import Ct, Nat
from openflow.flows import service
from openflow.pipeline import TABLES
from openflow.text import group_text
from tests.openflow.scenario import IP, SERVICE_LB, node_a, service_of, texts

GROUP = group_id(Category.SERVICE, "web:t:6:80")


def test_service_flows() -> None:
    assert texts(service.flows(TABLES, node_a())) == [
        (
            "table=2, priority=100,arp,arp_tpa=10.1.0.250,arp_op=1 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],"
            "set_field:02:02:0a:01:00:fa->eth_src,set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],"
            "set_field:02:02:0a:01:00:fa->arp_sha,move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:10.1.0.250->arp_spa,IN_PORT"
        ),
        "table=3, priority=100,ip actions=ct(table=4,zone=65520,nat)",
        f"table=4, priority=200,ct_state=+new+trk,tcp,nw_dst=10.1.0.250,tp_dst=80 actions=group:{GROUP}",
        "table=4, priority=300,metadata=0x100000000000000/0x100000000000000 actions=goto_table:8",
    ]


def test_select_group_commits_dnat_to_each_provider() -> None:
    assert [group_text(g) for g in service.groups(TABLES, node_a())] == [
        (
            f"group_id={GROUP},type=select,"
            "bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst=10.1.0.2:8080)),"
            "bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst=10.1.0.9:8080))"
        )
    ]


def test_service_without_providers_has_no_vip_flows() -> None:
    empty = service_of({**SERVICE_LB, "providers": {}})
    inputs = node_a(services=(empty,))
    assert service.groups(TABLES, inputs) == []
    assert texts(service.flows(TABLES, inputs)) == [
        "table=3, priority=100,ip actions=ct(table=4,zone=65520,nat)",
        "table=4, priority=300,metadata=0x100000000000000/0x100000000000000 actions=goto_table:8",
    ]


def test_provider_state_overrides_the_lb_state_providers() -> None:
    spec = service_of(SERVICE_LB, {"id": "web:t", "Providers": ["10.1.0.9"]})
    [group] = service.groups(TABLES, node_a(services=(spec,)))
    assert group.buckets == ((Ct(TABLES["dst_epg"].id, CT_ZONE, commit=True, nat=Nat(IP["web2"], 8080)),),)

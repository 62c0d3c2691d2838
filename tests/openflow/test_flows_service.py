"""Golden flows and groups: conntrack-based service load balancing."""

from __future__ import annotations

import dataclasses

from openflow.fields import CT_ZONE, Category, group_id, round_of
from openflow.flow import Ct, Nat
from openflow.flows import service
from openflow.pipeline import TABLES
from openflow.text import group_text
from tests.openflow.scenario import IP, KUBE_WEB, SERVICE_LB, kube_service_of, node_a, service_of, texts

GROUP = group_id(Category.SERVICE, "web:t:6:80")


def test_service_flows() -> None:
    assert texts(service.flows(TABLES, node_a())) == [
        (
            "table=2, priority=100,arp,arp_tpa=198.19.10.250,arp_op=1 actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],"
            "set_field:02:02:c6:13:0a:fa->eth_src,set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],"
            "set_field:02:02:c6:13:0a:fa->arp_sha,move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:198.19.10.250->arp_spa,IN_PORT"
        ),
        "table=3, priority=100,ip actions=ct(table=4,zone=65520,nat)",
        "table=4, priority=150,ip,nw_dst=198.19.10.250 actions=drop",
        f"table=4, priority=200,ct_state=+new+trk,tcp,nw_dst=198.19.10.250,tp_dst=80 actions=group:{GROUP}",
        "table=4, priority=300,metadata=0x100000000000000/0x100000000000000 actions=goto_table:8",
    ]


def test_select_group_commits_dnat_to_each_provider() -> None:
    assert [group_text(g) for g in service.groups(TABLES, node_a())] == [
        (
            f"group_id={GROUP},type=select,"
            "bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst=198.19.10.2:8080)),"
            "bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst=198.19.10.9:8080))"
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
    spec = service_of(SERVICE_LB, {"id": "web:t", "Providers": ["198.19.10.9"]})
    [group] = service.groups(TABLES, node_a(services=(spec,)))
    assert group.buckets == ((Ct(TABLES["dst_epg"].id, CT_ZONE, commit=True, nat=Nat(IP["web2"], 8080)),),)


KUBE_HTTP = group_id(Category.SERVICE, "k8s:shop/web:6:80")
KUBE_DNS = group_id(Category.SERVICE, "k8s:shop/web:17:53")


def test_kube_service_ports_have_their_own_backends_and_target_ports() -> None:
    spec = kube_service_of(KUBE_WEB)
    assert texts(service.service_flows(TABLES, spec, 1))[1:] == [
        "table=4, priority=150,ip,nw_dst=198.19.112.10 actions=drop",
        f"table=4, priority=200,ct_state=+new+trk,tcp,nw_dst=198.19.112.10,tp_dst=80 actions=group:{KUBE_HTTP}",
        f"table=4, priority=200,ct_state=+new+trk,udp,nw_dst=198.19.112.10,tp_dst=53 actions=group:{KUBE_DNS}",
    ]
    assert [group_text(g) for g in service.service_groups(TABLES, spec)] == [
        f"group_id={KUBE_HTTP},type=select,bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst=198.19.10.2:8080)),"
        "bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst=198.19.10.9:8081))",
        f"group_id={KUBE_DNS},type=select,bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst=198.19.10.9:5353))",
    ]


def test_session_affinity_looks_up_learned_backends_before_the_select_group() -> None:
    spec = dataclasses.replace(kube_service_of({**KUBE_WEB, "ports": KUBE_WEB["ports"][1:]}), affinity_timeout=10800)
    learned = f"{service.learned_cookie(spec):#x}"
    assert texts(service.service_flows(TABLES, spec, 1))[1:] == [
        "table=4, priority=150,ip,nw_dst=198.19.112.10 actions=drop",
        "table=4, priority=200,ct_state=+new+trk,udp,nw_dst=198.19.112.10,tp_dst=53 actions=resubmit(,9),resubmit(,10)",
        f"table=10, priority=100,udp,nw_dst=198.19.112.10,tp_dst=53 actions=group:{KUBE_DNS}",
        "table=10, priority=200,udp,reg0=0xc6130a09,reg1=0x14e9,nw_dst=198.19.112.10,tp_dst=53 actions="
        f"learn(table=9,idle_timeout=10800,priority=100,cookie={learned},eth_type=0x800,nw_proto=17,NXM_OF_IP_SRC[],NXM_OF_IP_DST[],"
        "NXM_OF_UDP_DST[],load:0xc6130a09->NXM_NX_REG0[],load:0x14e9->NXM_NX_REG1[0..15]),ct(commit,table=5,zone=65520,nat(dst=198.19.10.9:5353))",
    ]
    assert [group_text(g) for g in service.service_groups(TABLES, spec)] == [
        f"group_id={KUBE_DNS},type=select,bucket=weight:100,actions=set_field:0xc6130a09->reg0,set_field:0x14e9->reg1,resubmit(,10)"
    ]
    assert round_of(service.learned_cookie(spec)) == 0, "a restart's round sweep keeps what clients learned"


def test_a_port_without_backends_has_no_vip_flow_and_a_service_without_any_has_none() -> None:
    no_dns = kube_service_of({**KUBE_WEB, "ports": [KUBE_WEB["ports"][0], {**KUBE_WEB["ports"][1], "backends": []}]})
    assert [f for f in texts(service.service_flows(TABLES, no_dns, 1)) if "udp" in f] == []
    assert "table=4, priority=150,ip,nw_dst=198.19.112.10 actions=drop" in texts(service.service_flows(TABLES, no_dns, 1)), (
        "the VIP's other ports and protocols are dropped, not left to the forward table (out of the uplink on a VLAN bridge)"
    )
    assert len(service.service_groups(TABLES, no_dns)) == 1
    empty = kube_service_of({**KUBE_WEB, "ports": [{**p, "backends": []} for p in KUBE_WEB["ports"]]})
    assert service.service_flows(TABLES, empty, 1) == [] and service.service_groups(TABLES, empty) == []

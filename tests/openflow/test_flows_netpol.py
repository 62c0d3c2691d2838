"""Golden flows of Kubernetes NetworkPolicy (np_egress, np_ingress) and what they do on the FakeSwitch
together with Contiv's policy (both must allow, docs/policy.md)."""

from __future__ import annotations

import dataclasses

from openflow.desired import desired
from openflow.fields import Category, cookie
from openflow.flows import netpol
from openflow.inputs import NetpolDirection, NetpolPod, NetpolRule, ipv4
from openflow.pipeline import TABLES
from tests.openflow.scenario import IP, MAC, node_a, texts
from tests.openflow.test_fakeswitch_e2e import tcp
from tests.support.fakeswitch import FakeSwitch

DB = ipv4("198.18.11.2", "db")
DB_RULES = (
    NetpolRule("ingress", 100, DB, None, 0, None, "drop", "prod/db/ingress/isolation"),
    NetpolRule("ingress", 200, DB, (ipv4("198.18.11.3", "web"), 32), 6, (5432, 5432), "allow", "prod/db-from-web/ingress/0"),
    NetpolRule("ingress", 200, DB, (ipv4("198.19.0.0", "block"), 24), 17, (8000, 8100), "allow", "prod/db-block/ingress/0"),
    NetpolRule("egress", 100, DB, None, 0, None, "drop", "prod/db/egress/isolation"),
    NetpolRule("egress", 200, DB, None, 17, (53, 53), "allow", "prod/dns/egress/0"),
    NetpolRule("egress", 200, DB, (ipv4("198.18.12.0", "net"), 24), 0, None, "allow", "prod/any/egress/1"),
)


def test_golden_flows_of_one_pod() -> None:
    inputs = dataclasses.replace(node_a(), netpol=(NetpolPod("prod/db", DB_RULES),))
    assert texts(netpol.flows(TABLES, inputs)) == [
        "table=4, priority=310,ip,metadata=0x100000000000000/0x100000000000000,nw_dst=198.18.11.2 actions=ct(commit,table=8,zone=65520)",
        "table=4, priority=320,ip,metadata=0x100000000000000/0x100000000000000,nw_src=198.18.11.2 actions=ct(commit,table=8,zone=65520)",
        *(
            f"table=4, priority=330,ct_state=-rel-rpl+trk,ip,metadata=0x300000000000000/0x300000000000000,nw_dst={ip} actions=goto_table:12"
            for ip in ("198.19.10.2", "198.19.10.3")
        ),
        "table=11, priority=100,ip,nw_src=198.18.11.2 actions=drop",
        "table=11, priority=200,udp,nw_src=198.18.11.2,tp_dst=53 actions=goto_table:12",
        "table=11, priority=200,ip,nw_src=198.18.11.2,nw_dst=198.18.12.0/24 actions=goto_table:12",
        "table=11, priority=300,ct_state=+rel+trk,ip actions=resubmit(,7)",
        "table=11, priority=300,ct_state=+est+rpl+trk,ip actions=resubmit(,7)",
        "table=12, priority=50,ip,nw_dst=198.18.11.2 actions=ct(commit,table=7,zone=65520)",
        "table=12, priority=50,ip,nw_src=198.18.11.2 actions=ct(commit,table=7,zone=65520)",
        "table=12, priority=100,ip,nw_dst=198.18.11.2 actions=drop",
        "table=12, priority=200,tcp,nw_src=198.18.11.3,nw_dst=198.18.11.2,tp_dst=5432 actions=ct(commit,table=7,zone=65520)",
        "table=12, priority=200,udp,nw_src=198.19.0.0/24,nw_dst=198.18.11.2,tp_dst=0x1f40/0xffc0 actions=ct(commit,table=7,zone=65520)",
        "table=12, priority=200,udp,nw_src=198.19.0.0/24,nw_dst=198.18.11.2,tp_dst=0x1f80/0xffe0 actions=ct(commit,table=7,zone=65520)",
        "table=12, priority=200,udp,nw_src=198.19.0.0/24,nw_dst=198.18.11.2,tp_dst=0x1fa0/0xfffc actions=ct(commit,table=7,zone=65520)",
        "table=12, priority=200,udp,nw_src=198.19.0.0/24,nw_dst=198.18.11.2,tp_dst=8100 actions=ct(commit,table=7,zone=65520)",
    ]


def test_every_flow_of_a_rule_carries_the_rule_id_in_its_cookie() -> None:
    flows = netpol.rule_flows(TABLES, DB_RULES[2], 1)
    assert len(flows) == 4 and {f.cookie for f in flows} == {cookie(Category.NETPOL, "prod/db-block/ingress/0", 1)}


def test_the_misses_continue_to_qos_and_ids_of_older_tables_stay() -> None:
    misses = texts(f for f in desired(node_a()).flows if f.priority == 0 and f.table in (6, 11, 12))
    assert misses == [
        "table=6, priority=0 actions=goto_table:11",
        "table=11, priority=0 actions=goto_table:12",
        "table=12, priority=0 actions=resubmit(,7)",
    ]


def _isolated_db1(*allowed: NetpolRule) -> FakeSwitch:
    """Node A with db1 isolated both ways, allowing ``allowed``; Contiv's rule denies web1 -> db1 tcp/5432."""
    db1, web1 = IP["db1"], IP["web1"]
    rules = (
        NetpolRule("ingress", 100, db1, None, 0, None, "drop", "prod/db1/ingress/isolation"),
        NetpolRule("egress", 100, db1, None, 0, None, "drop", "prod/db1/egress/isolation"),
        *allowed,
    )
    web_isolated = (NetpolRule("ingress", 100, web1, None, 0, None, "drop", "prod/web1/ingress/isolation"),)
    return FakeSwitch.with_state(desired(node_a(netpol=(NetpolPod("prod/db1", rules), NetpolPod("prod/web1", web_isolated)))))


def test_isolated_pod_gets_only_what_a_rule_allows_and_replies_come_back() -> None:
    web_on_80 = NetpolRule("ingress", 200, IP["db1"], (IP["web1"], 32), 6, (80, 80), "allow", "prod/db-web/ingress/0")
    switch = _isolated_db1(web_on_80)
    assert switch.send(3, **tcp("web1", IP["db1"], MAC["db1"], 81)).ports == []
    assert switch.send(3, **tcp("web1", IP["db1"], MAC["db1"], 80)).ports == [4]
    # db1 is egress-isolated and web1 ingress-isolated, yet the reply of the allowed connection passes
    assert switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 40000, sport=80, flags=0x12)).ports == [3]
    # but db1 opening a connection itself is dropped by its egress isolation
    assert switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 80, sport=40001)).ports == []


def test_contiv_deny_wins_over_a_networkpolicy_allow() -> None:
    web_on_5432 = NetpolRule("ingress", 200, IP["db1"], (IP["web1"], 32), 6, (5432, 5432), "allow", "prod/db-web/ingress/0")
    result = _isolated_db1(web_on_5432).send(3, **tcp("web1", IP["db1"], MAC["db1"], 5432))
    assert result.ports == [] and result.hits[-1].startswith("table=6, ") and result.hits[-1].endswith("actions=drop")


def test_egress_allow_needs_the_destination_ingress_too() -> None:
    out = NetpolRule("egress", 200, IP["db1"], (IP["web1"], 32), 0, None, "allow", "prod/db-out/egress/0")
    switch = _isolated_db1(out)
    result = switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 80, sport=40002))
    assert result.ports == [] and result.hits[-1].startswith("table=12, priority=100,ip,nw_dst=198.19.10.2")
    assert switch.send(4, **tcp("db1", IP["web2"], MAC["web2"], 80, sport=40003)).ports == []  # not allowed at all


def _one_isolation(pod: str, direction: NetpolDirection) -> FakeSwitch:
    drop = NetpolRule(direction, 100, IP[pod], None, 0, None, "drop", f"prod/{pod}/{direction}/isolation")
    return FakeSwitch.with_state(desired(node_a(netpol=(NetpolPod(f"prod/{pod}", (drop,)),))))


def test_replies_to_what_an_ingress_isolated_pod_opened_come_back() -> None:
    switch = _one_isolation("web1", "ingress")
    assert switch.send(3, **tcp("web1", IP["db1"], MAC["db1"], 80)).ports == [4]
    assert switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 40000, sport=80, flags=0x12)).ports == [3]
    assert switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 80, sport=40005)).ports == []  # db1 opening: dropped


def test_an_egress_isolated_pod_answers_what_others_opened() -> None:
    switch = _one_isolation("db1", "egress")
    assert switch.send(3, **tcp("web1", IP["db1"], MAC["db1"], 80)).ports == [4]
    assert switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 40000, sport=80, flags=0x12)).ports == [3]
    assert switch.send(4, **tcp("db1", IP["web1"], MAC["web1"], 80, sport=40006)).ports == []  # db1 opening: dropped

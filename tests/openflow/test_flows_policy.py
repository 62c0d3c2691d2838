"""Golden flows: Contiv policy rules (the ofnet test vectors where they apply)."""

from __future__ import annotations

import pytest

from contivd.state import RecordError
from openflow.desired import desired
from openflow.flows import policy
from openflow.inputs import InputError, PolicyRuleSpec
from openflow.pipeline import TABLES
from tests.openflow.scenario import node_a, rule_of, texts


def rule(**fields: object) -> PolicyRuleSpec:
    base: dict[str, object] = {"RuleId": "r", "Priority": 100, "Action": "allow"}
    return rule_of({**base, **fields})


def policy_texts(*rules: PolicyRuleSpec) -> list[str]:
    return texts(policy.flows(TABLES, node_a(rules=rules)))


def test_ofnet_vectors_with_our_metadata_layout() -> None:
    # ofnetPolicy_test.go: src EPG 100 -> dst EPG 200, tcp 200 -> 100, allow; and the udp deny.
    tcp = rule(SrcEndpointGroup=100, DstEndpointGroup=200, SrcIpAddr="198.19.110.10/24", DstIpAddr="198.19.11.1/24",
               IpProtocol=6, SrcPort=200, DstPort=100)  # fmt: skip
    udp = rule(RuleId="u", SrcEndpointGroup=300, DstEndpointGroup=400, SrcIpAddr="198.19.200.20/24",
               DstIpAddr="198.19.202.2/24", IpProtocol=17, SrcPort=400, DstPort=300, Action="deny")  # fmt: skip
    assert policy_texts(tcp, udp) == [
        (
            "table=6, priority=110,tcp,metadata=0x6400c8/0xffffffff,nw_src=198.19.110.0/24,nw_dst=198.19.11.0/24,tp_src=200,tp_dst=100 actions=goto_table:11"
        ),
        ("table=6, priority=110,udp,metadata=0x12c0190/0xffffffff,nw_src=198.19.200.0/24,nw_dst=198.19.202.0/24,tp_src=400,tp_dst=300 actions=drop"),
    ]


@pytest.mark.parametrize(
    "flags, text",
    [("syn", "+syn"), ("ack", "+ack"), ("syn,ack", "+syn+ack"), ("syn,!ack", "+syn-ack"), ("!syn,ack", "-syn+ack")],
)
def test_tcp_flags(flags: str, text: str) -> None:
    assert policy_texts(rule(DstEndpointGroup=6, IpProtocol=6, TcpFlags=flags)) == [
        f"table=6, priority=110,tcp,metadata=0x6/0xffff,tcp_flags={text} actions=goto_table:11"
    ]


def test_group_only_rule_ignores_ports_of_icmp() -> None:
    assert policy_texts(rule(SrcEndpointGroup=5, IpProtocol=1, DstPort=80, Priority=1, Action="deny")) == [
        "table=6, priority=11,icmp,metadata=0x50000/0xffff0000 actions=drop"
    ]


def test_same_match_twice_deny_wins_whatever_the_order() -> None:
    allow = rule(RuleId="a", SrcEndpointGroup=5)
    deny = rule(RuleId="d", SrcEndpointGroup=5, Action="deny")
    expected = ["table=6, priority=110,ip,metadata=0x50000/0xffff0000 actions=drop"]
    assert policy_texts(allow, deny) == policy_texts(deny, allow) == expected


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"Action": "accept"}, "Action 'accept'"),
        ({"IpProtocol": 6, "TcpFlags": "fin"}, "TcpFlags 'fin'"),
    ],
)
def test_bad_rules_are_rejected_by_name(fields: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=f"policy rule r: {message}"):
        rule(**fields)


def test_an_unparsable_rule_address_is_refused_by_the_state_record() -> None:
    with pytest.raises(RecordError, match="policy rule r: .*'198.19.0.300'"):
        rule(SrcIpAddr="198.19.0.300")


def test_an_exact_and_a_prefix_source_with_one_address_both_install() -> None:
    exact = rule(RuleId="e", SrcIpAddr="198.19.11.0")
    prefix = rule(RuleId="p", SrcIpAddr="198.19.11.0/24")
    assert policy_texts(exact, prefix) == [
        "table=6, priority=110,ip,nw_src=198.19.11.0 actions=goto_table:11",
        "table=6, priority=110,ip,nw_src=198.19.11.0/24 actions=goto_table:11",
    ]
    assert len(desired(node_a(rules=(exact, prefix))).flows) == len(desired(node_a(rules=())).flows) + 2

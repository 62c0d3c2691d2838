"""Both kinds of policy for one packet (`explain`): Contiv's EPG rules first, then NetworkPolicy,
as the pipeline's tables run; the rules come from the real compilers (Contiv's attachment
compiler and the agent's conversion to flows' specs, the NetworkPolicy compiler)."""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Address
from typing import Any

from contivd.agent.inputs import rule_spec
from contivd.model import Attachment, Remotes, compile_attachment
from contivd.model.netpolicy import Compiled, compile_policies, parse_namespace, parse_pod, parse_policy
from contivd.model.policytrace import TraceEnd, contiv_matches, explain, explanation_json
from openflow.inputs import PolicyRuleSpec

from .conftest import make

TCP, UDP, ICMP = 6, 17, 1
WEB, DB = 3, 7  # EPG ids
NET = "pods.default"


def end(ip: str, group: int = 0, pod: str = "", network: str = NET) -> TraceEnd:
    return TraceEnd(int(IPv4Address(ip)), f"ep-{ip}", group, network, "node1", pod)


CLIENT = end("198.18.0.12", WEB, "prod/client")
SERVER = end("198.18.0.11", DB, "prod/db")
OUTSIDE = TraceEnd(int(IPv4Address("198.19.0.5")))


def contiv(*rules: dict[str, Any], group: str = "db", group_id: int = DB) -> list[PolicyRuleSpec]:
    """Rules of policy default:p attached to `group`, as the agent programs them."""
    bodies = [make("rules", tenantName="default", policyName="p", **body) for body in rules]
    remotes = Remotes(group_ids={"default:web": WEB, "default:db": DB}, subnets={})
    return [rule_spec(r) for r in compile_attachment(Attachment(f"default:{group}", group_id, "default:p"), bodies, remotes)]


def kubernetes(*policies: dict[str, Any]) -> Compiled:
    pods = [
        {"metadata": {"namespace": "prod", "name": "db", "labels": {"app": "db"}}, "status": {"podIP": "198.18.0.11"}},
        {"metadata": {"namespace": "prod", "name": "client", "labels": {"app": "client"}}, "status": {"podIP": "198.18.0.12"}},
    ]
    return compile_policies([parse_policy(p) for p in policies], [parse_pod(p) for p in pods], [parse_namespace({"metadata": {"name": "prod"}})])


def np(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "prod", "name": name}, "spec": {"podSelector": {"matchLabels": {"app": "db"}}, **spec}}


DB_FROM_CLIENT_TCP_5432 = np("db-in", ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": 5432}]}])
DB_CLOSED = np("db-closed", ingress=[])
DENY_WEB_TCP = {"ruleId": "1", "priority": 5, "direction": "in", "fromEndpointGroup": "web", "protocol": "tcp", "action": "deny"}
ALLOW_WEB_5432 = {"ruleId": "2", "priority": 9, "direction": "in", "fromEndpointGroup": "web", "protocol": "tcp", "port": 5432, "action": "allow"}


def test_nothing_configured_allows_and_names_no_rule() -> None:
    answer = explanation_json(explain([], Compiled(()), CLIENT, SERVER, TCP, 5432))
    assert (answer["verdict"], answer["deciding"], answer["rules"]) == ("allow", None, [])
    assert answer["reasons"][0] == "policy: no Contiv rule matches (default allow)"


def test_contiv_deny_ends_it_even_where_network_policy_allows() -> None:
    explanation = explain(contiv(DENY_WEB_TCP), kubernetes(DB_FROM_CLIENT_TCP_5432), CLIENT, SERVER, TCP, 5432)
    answer = explanation_json(explanation)
    assert answer["verdict"] == "drop"
    assert answer["rules"] == [
        {
            "kind": "contiv",
            "table": "policy",
            "rule": "default:db:default:p:default:p:1:inRx",
            "policy": "default:p",
            "action": "deny",
            "priority": 15,  # 10 + the rule's priority 5, as its flow
        }
    ]
    assert answer["deciding"] == "default:db:default:p:default:p:1:inRx"
    assert answer["reasons"][1:] == ["np_egress: not reached", "np_ingress: not reached"]
    # The same packet without the Contiv rule: NetworkPolicy's allow decides it.
    assert explanation_json(explain([], kubernetes(DB_FROM_CLIENT_TCP_5432), CLIENT, SERVER, TCP, 5432))["deciding"] == "prod/db-in/ingress/0"


def test_contiv_allow_then_network_policy_drop() -> None:
    answer = explanation_json(explain(contiv(ALLOW_WEB_5432), kubernetes(DB_CLOSED), CLIENT, SERVER, TCP, 5432))
    assert answer["verdict"] == "drop"
    assert [(r["kind"], r["table"], r["action"], r["priority"]) for r in answer["rules"]] == [
        ("contiv", "policy", "allow", 19),
        ("kubernetes", "np_ingress", "drop", 100),
    ]
    assert answer["deciding"] == "prod/db/ingress/isolation" and answer["ingress"]["policy"] == "prod/db (isolation)"
    assert answer["egress"] is None and answer["reasons"][1] == "np_egress: the source is not isolated for egress"


def test_both_allow_names_every_rule_in_pipeline_order() -> None:
    answer = explanation_json(explain(contiv(ALLOW_WEB_5432), kubernetes(DB_FROM_CLIENT_TCP_5432), CLIENT, SERVER, TCP, 5432))
    assert answer["verdict"] == "allow"
    assert [r["rule"] for r in answer["rules"]] == ["default:db:default:p:default:p:2:inRx", "prod/db-in/ingress/0"]
    assert answer["deciding"] == "prod/db-in/ingress/0" and answer["contiv"]["policy"] == "default:p"


def test_the_higher_priority_contiv_rule_wins_and_a_deny_wins_a_tie() -> None:
    rules = contiv(DENY_WEB_TCP, ALLOW_WEB_5432)  # allow at 9 over deny at 5
    assert explain(rules, Compiled(()), CLIENT, SERVER, TCP, 5432).allowed
    assert not explain(rules, Compiled(()), CLIENT, SERVER, TCP, 22).allowed, "other ports: the deny"
    tie = contiv(DENY_WEB_TCP, {**ALLOW_WEB_5432, "priority": 5})
    assert not explain(tie, Compiled(()), CLIENT, SERVER, TCP, 5432).allowed


def test_the_destination_group_is_known_on_the_sources_network_only() -> None:
    rules = contiv(DENY_WEB_TCP)
    elsewhere = TraceEnd(SERVER.address, SERVER.endpoint, DB, "other.default", "node2")
    assert not explain(rules, Compiled(()), CLIENT, SERVER, TCP, 80).allowed
    assert explain(rules, Compiled(()), CLIENT, elsewhere, TCP, 80).allowed, "routed to another network: DST_EPG 0"


def test_bridge_mode_drops_what_policy_lets_through_to_another_network() -> None:
    elsewhere = TraceEnd(SERVER.address, SERVER.endpoint, DB, "other.default", "node2")
    answer = explanation_json(explain(contiv(ALLOW_WEB_5432), Compiled(()), CLIENT, elsewhere, TCP, 5432, bridged=True))
    assert answer["verdict"] == "drop" and answer["deciding"] is None and answer["reasons"][-1].startswith("forward: drop: ep-198.18.0.11")
    assert [r["action"] for r in answer["rules"]] == [], "DST_EPG 0: the group's allow does not match"
    assert explain([], Compiled(()), CLIENT, SERVER, TCP, 80, bridged=True).allowed, "one network: bridged"
    assert explain([], Compiled(()), CLIENT, OUTSIDE, TCP, 80, bridged=True).allowed, "an external address is no other network"
    denied = explanation_json(explain(contiv(DENY_WEB_TCP), Compiled(()), CLIENT, SERVER, TCP, 80, bridged=True))
    assert denied["deciding"] == "default:db:default:p:default:p:1:inRx", "policy's own drop still names its rule"


def test_port_less_tcp_rules_match_the_opening_syn_and_addresses_match_by_prefix() -> None:
    (syn_only,) = contiv({"ruleId": "3", "priority": 1, "direction": "in", "protocol": "tcp", "fromIpAddress": "198.18.0.0/24", "action": "deny"})
    assert syn_only.tcp_flags is not None  # `syn,!ack`: the traced packet is a SYN
    assert contiv_matches(syn_only, CLIENT, SERVER, TCP, 80)
    assert not contiv_matches(syn_only, CLIENT, SERVER, UDP, 80)
    assert not contiv_matches(syn_only, end("198.18.1.12", WEB), SERVER, TCP, 80)


def test_out_rules_judge_the_sources_group() -> None:
    out = contiv(
        {"ruleId": "4", "priority": 2, "direction": "out", "toEndpointGroup": "db", "protocol": "icmp", "action": "deny"}, group="web", group_id=WEB
    )
    answer = explanation_json(explain(out, Compiled(()), CLIENT, SERVER, ICMP, 0))
    assert answer["verdict"] == "drop" and answer["deciding"] == "default:web:default:p:default:p:4:outTx"
    assert explain(out, Compiled(()), SERVER, CLIENT, ICMP, 0).allowed, "the other way round"


def test_an_external_source_is_judged_by_the_destinations_ingress_only_the_node_itself_not_at_all() -> None:
    answer = explanation_json(explain(contiv(DENY_WEB_TCP), kubernetes(DB_CLOSED), OUTSIDE, SERVER, TCP, 5432))
    assert answer["verdict"] == "drop" and answer["deciding"] == "prod/db/ingress/isolation" and answer["contiv"] is None, answer
    assert [r["table"] for r in answer["rules"]] == ["np_ingress"] and "outside the cluster" in answer["reasons"][0]
    from_block = np("db-block", ingress=[{"from": [{"ipBlock": {"cidr": "198.19.0.0/24", "except": ["198.19.0.128/25"]}}]}])
    assert explanation_json(explain([], kubernetes(from_block), OUTSIDE, SERVER, TCP, 5432))["deciding"] == "prod/db-block/ingress/0"
    excepted = TraceEnd(int(IPv4Address("198.19.0.200")))
    assert explanation_json(explain([], kubernetes(from_block), excepted, SERVER, TCP, 5432))["deciding"] == "prod/db/ingress/isolation"
    node = TraceEnd(int(IPv4Address("198.18.255.254")), node_itself=True)
    answer = explanation_json(explain(contiv(DENY_WEB_TCP), kubernetes(DB_CLOSED), node, SERVER, TCP, 5432))
    assert answer["verdict"] == "allow" and answer["rules"] == [] and "REMOTE" in answer["reasons"][0], answer


def test_a_vxlan_pods_packet_to_the_outside_has_no_way_out_in_bridge_mode() -> None:
    vxlan_client = dataclasses.replace(CLIENT, vxlan=True)
    answer = explanation_json(explain([], Compiled(()), vxlan_client, OUTSIDE, TCP, 443, bridged=True))
    assert answer["verdict"] == "drop" and answer["deciding"] is None and "no way out" in answer["reasons"][-1], answer
    assert explain([], Compiled(()), CLIENT, OUTSIDE, TCP, 443, bridged=True).allowed, "a VLAN network's bridge sends it out of the uplink"
    assert explain([], Compiled(()), vxlan_client, OUTSIDE, TCP, 443).allowed, "routing mode routes it"
    node = TraceEnd(int(IPv4Address("198.18.255.254")), node_itself=True)
    assert explain([], Compiled(()), vxlan_client, node, TCP, 443, bridged=True).allowed, "the gateway leads to the node itself"
    egress_closed = np("db-out", podSelector={"matchLabels": {"app": "db"}}, policyTypes=["Egress"], egress=[])
    assert explanation_json(explain([], kubernetes(egress_closed), SERVER, OUTSIDE, TCP, 443))["deciding"] == "prod/db/egress/isolation"

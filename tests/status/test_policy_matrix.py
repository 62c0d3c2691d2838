"""The policy matrix: compiled rules → who may open connections to a group, on which service."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

from contivd.model.policy import Attachment, PolicyRule, Remotes, compile_attachment
from contivd.state.records import policy_rule_from_json
from contivd.status.policy_matrix import Cell, GroupRef, policy_matrix

APP = GroupRef("app", 2, IPv4Network("198.18.4.0/24"))
DB = GroupRef("db", 3, IPv4Network("198.18.4.0/24"))
WEB = GroupRef("web", 1, IPv4Network("198.18.0.0/24"))
GROUPS = [WEB, APP, DB]
NETWORKS = {"frontend": IPv4Network("198.18.0.0/24"), "backend": IPv4Network("198.18.4.0/24")}
REMOTES = Remotes(
    group_ids={"default:web": 1, "default:app": 2, "default:db": 3}, subnets={"default:frontend": "198.18.0.0/24", "default:backend": "198.18.4.0/24"}
)


def rule(policy: str, rule_id: str, **fields: Any) -> dict[str, Any]:
    base = {"tenantName": "default", "policyName": policy, "ruleId": rule_id, "key": f"default:{policy}:{rule_id}", "priority": 1}
    base.update({"fromEndpointGroup": "", "toEndpointGroup": "", "fromNetwork": "", "toNetwork": "", "fromIpAddress": "", "toIpAddress": ""})
    base.update({"protocol": "", "port": 0})
    return {**base, **fields}


def compiled(group: GroupRef, policy: str, *rules: dict[str, Any]) -> list[PolicyRule]:
    return list(compile_attachment(Attachment(f"default:{group.name}", group.group_id, f"default:{policy}"), rules, REMOTES))


def grid(matrix: Any) -> dict[str, dict[str, str]]:
    return {src.label: {svc.label: cell.action for svc, cell in zip(matrix.services, cells, strict=True)} for src, cells in matrix.rows}


def test_without_rules_everyone_may_reach_the_group_by_default() -> None:
    matrix = policy_matrix(DB, GROUPS, NETWORKS, [])
    assert [s.label for s in matrix.services] == ["other"]
    assert all(cells == (Cell("allow", ""),) for _, cells in matrix.rows)
    assert [src.label for src, _ in matrix.rows] == ["app", "db", "web", "anyone else"]


def test_deny_all_with_an_allowed_port_from_one_group() -> None:
    rules = compiled(
        DB,
        "db-in",
        rule("db-in", "1", direction="in", action="deny", priority=1),
        rule("db-in", "2", direction="in", action="allow", priority=10, fromEndpointGroup="app", protocol="tcp", port=5432),
    )
    matrix = policy_matrix(DB, GROUPS, NETWORKS, rules)
    assert [s.label for s in matrix.services] == ["tcp/5432", "tcp/other", "other"]
    g = grid(matrix)
    assert g["app"] == {"tcp/5432": "allow", "tcp/other": "deny", "other": "deny"}
    assert g["web"] == {"tcp/5432": "deny", "tcp/other": "deny", "other": "deny"}
    assert g["anyone else"]["tcp/5432"] == "deny"
    app_row = matrix.rows[0]
    assert app_row[0].label == "app" and app_row[1][0] == Cell("allow", "default:db:default:db-in:default:db-in:2:inRx"), "the deciding rule is named"


def test_the_higher_priority_wins_and_a_deny_wins_a_tie() -> None:
    rules = compiled(
        WEB,
        "web-in",
        rule("web-in", "1", direction="in", action="allow", priority=5, protocol="tcp", port=443),
        rule("web-in", "2", direction="in", action="deny", priority=5, protocol="tcp", port=443, fromEndpointGroup="app"),
        rule("web-in", "3", direction="in", action="allow", priority=9, protocol="tcp", port=443, fromEndpointGroup="db"),
        rule("web-in", "4", direction="in", action="deny", priority=2, protocol="tcp", port=80),
    )
    g = grid(policy_matrix(WEB, GROUPS, NETWORKS, rules))
    assert g["app"]["tcp/443"] == "deny", "same priority: the deny wins, as in the flow table"
    assert g["db"]["tcp/443"] == "allow"
    assert g["anyone else"]["tcp/443"] == "allow"
    assert g["anyone else"]["tcp/80"] == "deny"
    assert g["anyone else"]["other"] == "allow", "no rule matches: Contiv's default allow"


def test_networks_and_addresses_become_rows_and_match_groups_inside_them() -> None:
    rules = compiled(
        DB,
        "db-in",
        rule("db-in", "1", direction="in", action="deny", priority=1),
        rule("db-in", "2", direction="in", action="allow", priority=10, fromNetwork="frontend", protocol="tcp", port=5432),
        rule("db-in", "3", direction="in", action="allow", priority=10, fromIpAddress="198.18.0.7", protocol="icmp"),
    )
    matrix = policy_matrix(DB, GROUPS, NETWORKS, rules)
    assert [(src.label, src.kind) for src, _ in matrix.rows] == [
        ("app", "group"),
        ("db", "group"),
        ("web", "group"),
        ("frontend", "network"),
        ("198.18.0.7/32", "ip"),
        ("anyone else", "any"),
    ]
    g = grid(matrix)
    assert g["web"]["tcp/5432"] == "allow", "web lives in frontend"
    assert g["app"]["tcp/5432"] == "deny"
    assert g["198.18.0.7/32"]["icmp"] == "allow"
    assert g["web"]["icmp"] == "deny", "a /32 inside web's subnet says nothing about all of web"


def test_outgoing_rules_of_other_groups_count_and_reply_rules_do_not() -> None:
    rules = compiled(APP, "app-out", rule("app-out", "1", direction="out", action="deny", priority=3, toEndpointGroup="db", protocol="tcp", port=22))
    rules += compiled(DB, "db-in", rule("db-in", "1", direction="in", action="deny", priority=1, fromEndpointGroup="web", protocol="udp", port=53))
    assert any(r.src_port for r in rules), "the in rule with a port has a reply half"
    g = grid(policy_matrix(DB, GROUPS, NETWORKS, rules))
    assert g["app"]["tcp/22"] == "deny"
    assert g["web"]["tcp/22"] == "allow"
    assert g["web"]["udp/53"] == "deny"
    g_web = grid(policy_matrix(WEB, GROUPS, NETWORKS, rules))
    assert set(g_web["db"].values()) == {"allow"}, "db's reply rule (source port 53 towards web) decides no new connection"


def test_rule_state_round_trip_and_json() -> None:
    rules = compiled(DB, "db-in", rule("db-in", "2", direction="in", action="allow", priority=10, fromNetwork="frontend", protocol="tcp", port=5432))
    assert [policy_rule_from_json(r.to_json()) for r in rules] == rules, "the matrix reads rules as the state snapshot parses them"
    as_json = policy_matrix(DB, GROUPS, NETWORKS, rules).to_json()
    assert as_json["group"] == "db" and as_json["services"] == ["tcp/5432", "tcp/other", "other"]
    assert as_json["rows"][-1] == {"source": "anyone else", "kind": "any", "cells": [["allow", ""]] * 3}

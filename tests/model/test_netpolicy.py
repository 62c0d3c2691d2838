"""The NetworkPolicy compiler's truth table: policies over a fixed set of pods and namespaces,
one packet each, the verdict `decide` gives on the compiled rules (the datapath programs the same
rules) and the rule that decides it. Plus the parser's rejections and the compiler's shape."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Any

import pytest

from contivd.model import ValidationError
from contivd.model.netpolicy import (
    Compiled,
    compile_policies,
    decide,
    parse_block,
    parse_namespace,
    parse_pod,
    parse_policy,
)

TCP, UDP, ICMP, SCTP = 6, 17, 1, 132


def _ns(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _pod(ns: str, name: str, ip: str, labels: dict[str, str], ports: tuple[tuple[str, str, int], ...] = ()) -> dict[str, Any]:
    container = {"name": "c", "ports": [{"name": n, "protocol": p, "containerPort": c} for n, p, c in ports]}
    return {
        "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"containers": [container]},
        "status": {"podIP": ip},
    }


NAMESPACES = [_ns("prod", team="a", env="prod"), _ns("dev", team="b", env="dev"), _ns("other")]
PODS = [
    _pod("prod", "web", "198.18.0.10", {"app": "web", "tier": "front"}, (("http", "TCP", 8080), ("dns", "UDP", 53))),
    _pod("prod", "db", "198.18.0.11", {"app": "db"}, (("pg", "TCP", 5432),)),
    _pod("prod", "client", "198.18.0.12", {"app": "client", "role": "frontend"}),
    _pod("dev", "web", "198.18.1.10", {"app": "web"}, (("http", "TCP", 9090),)),
    _pod("dev", "tool", "198.18.1.11", {"app": "tool", "role": "frontend"}),
    _pod("other", "x", "198.18.2.10", {"app": "x"}),
]
IP = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["status"]["podIP"] for p in PODS}
IP.update(outside="198.19.0.5", outside2="198.19.1.5", outside_except="198.19.0.200")


def np(name: str, ns: str = "prod", selector: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"podSelector": selector or {}}
    if "types" in spec:
        body["policyTypes"] = spec.pop("types")
    body.update(spec)
    return {"kind": "NetworkPolicy", "metadata": {"namespace": ns, "name": name}, "spec": body}


APP_DB = {"matchLabels": {"app": "db"}}
APP_WEB = {"matchLabels": {"app": "web"}}
DENY_ALL_INGRESS = np("deny-in")
DENY_ALL_EGRESS = np("deny-out", types=["Egress"])
DB_FROM_WEB_PG = np("db-from-web", selector=APP_DB, ingress=[{"from": [{"podSelector": APP_WEB}], "ports": [{"port": 5432}]}])
DB_FROM_CLIENT = np("db-from-client", selector=APP_DB, ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}]}])
WEB_FROM_NS_DEV = np("web-from-dev", selector=APP_WEB, ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"env": "dev"}}}]}])
WEB_FROM_FRONTEND_IN_B = np(
    "web-from-frontend-b",
    selector=APP_WEB,
    ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"team": "b"}}, "podSelector": {"matchLabels": {"role": "frontend"}}}]}],
)
WEB_FROM_BLOCK = np("web-from-block", selector=APP_WEB, ingress=[{"from": [{"ipBlock": {"cidr": "198.19.0.0/24", "except": ["198.19.0.128/25"]}}]}])
WEB_NAMED_HTTP = np("web-http", selector=APP_WEB, ingress=[{"ports": [{"port": "http"}]}])
WEB_NAMED_HTTP_DEV = np("web-http", ns="dev", selector=APP_WEB, ingress=[{"ports": [{"port": "http"}]}])
WEB_NAMED_DNS_UDP = np("web-dns", selector=APP_WEB, ingress=[{"ports": [{"port": "dns", "protocol": "UDP"}]}])
WEB_RANGE = np("web-range", selector=APP_WEB, ingress=[{"ports": [{"port": 8000, "endPort": 8100}]}])
WEB_UDP_ONLY = np("web-udp", selector=APP_WEB, ingress=[{"ports": [{"protocol": "UDP"}]}])
WEB_ALLOW_ALL = np("web-all", selector=APP_WEB, ingress=[{}])
CLIENT_EGRESS_DB = np(
    "client-out", selector={"matchLabels": {"app": "client"}}, types=["Egress"], egress=[{"to": [{"podSelector": APP_DB}], "ports": [{"port": "pg"}]}]
)
CLIENT_EGRESS_BLOCK = np(
    "client-out-block",
    selector={"matchLabels": {"app": "client"}},
    egress=[{"to": [{"ipBlock": {"cidr": "198.19.0.0/16", "except": ["198.19.1.0/24"]}}]}],
)
CLIENT_EGRESS_NAMED_BLOCK = np(
    "client-named-block",
    selector={"matchLabels": {"app": "client"}},
    egress=[{"to": [{"ipBlock": {"cidr": "198.19.0.0/16"}}], "ports": [{"port": "http"}]}],
)
CLIENT_EGRESS_DNS = np(
    "client-dns", selector={"matchLabels": {"app": "client"}}, types=["Egress"], egress=[{"ports": [{"port": 53, "protocol": "UDP"}]}]
)
CLIENT_BOTH = np(
    "client-both",
    selector={"matchLabels": {"app": "client"}},
    types=["Ingress", "Egress"],
    ingress=[{"from": [{"podSelector": APP_WEB}]}],
)
EXPR_NOT_IN = np(
    "db-not-dev",
    selector=APP_DB,
    ingress=[{"from": [{"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}}]}],
)
EXPR_EXISTS = np(
    "db-role",
    selector=APP_DB,
    ingress=[{"from": [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [{"key": "role", "operator": "Exists"}]}}]}],
)
EXPR_NOT_EXISTS = np("all-no-tier", selector={"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, ingress=[])
NS_BY_NAME = np(
    "db-from-other", selector=APP_DB, ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}}]}]
)
DEV_DENY = np("dev-deny", ns="dev")
EGRESS_ICMP_NONE = np("client-tcp-only", selector={"matchLabels": {"app": "client"}}, types=["Egress"], egress=[{"ports": [{"protocol": "TCP"}]}])

# (case, policies, src, dst, proto, dport, allowed, deciding rule id or None)
CASES: list[tuple[str, list[dict[str, Any]], str, str, int, int, bool, str | None]] = [
    ("no policy allows", [], "prod/web", "prod/db", TCP, 5432, True, None),
    ("no policy allows icmp", [], "dev/tool", "prod/db", ICMP, 0, True, None),
    ("deny-all ingress drops tcp", [DENY_ALL_INGRESS], "prod/web", "prod/db", TCP, 5432, False, "prod/db/ingress/isolation"),
    ("deny-all ingress drops udp", [DENY_ALL_INGRESS], "dev/tool", "prod/web", UDP, 53, False, "prod/web/ingress/isolation"),
    ("deny-all ingress drops icmp", [DENY_ALL_INGRESS], "other/x", "prod/client", ICMP, 0, False, "prod/client/ingress/isolation"),
    ("deny-all ingress leaves egress", [DENY_ALL_INGRESS], "prod/web", "dev/web", TCP, 9090, True, None),
    ("deny-all ingress other namespace untouched", [DENY_ALL_INGRESS], "dev/tool", "dev/web", TCP, 9090, True, None),
    ("deny-all egress drops", [DENY_ALL_EGRESS], "prod/web", "dev/web", TCP, 9090, False, "prod/web/egress/isolation"),
    ("deny-all egress leaves ingress", [DENY_ALL_EGRESS], "dev/tool", "prod/web", TCP, 8080, True, None),
    ("podSelector allows port", [DB_FROM_WEB_PG], "prod/web", "prod/db", TCP, 5432, True, "prod/db-from-web/ingress/0"),
    ("podSelector other port dropped", [DB_FROM_WEB_PG], "prod/web", "prod/db", TCP, 5433, False, "prod/db/ingress/isolation"),
    ("podSelector udp same port dropped", [DB_FROM_WEB_PG], "prod/web", "prod/db", UDP, 5432, False, "prod/db/ingress/isolation"),
    ("podSelector other pod dropped", [DB_FROM_WEB_PG], "prod/client", "prod/db", TCP, 5432, False, "prod/db/ingress/isolation"),
    ("podSelector is namespace-local", [DB_FROM_WEB_PG], "dev/web", "prod/db", TCP, 5432, False, "prod/db/ingress/isolation"),
    ("podSelector icmp dropped", [DB_FROM_WEB_PG], "prod/web", "prod/db", ICMP, 0, False, "prod/db/ingress/isolation"),
    (
        "union: second policy adds client",
        [DB_FROM_WEB_PG, DB_FROM_CLIENT],
        "prod/client",
        "prod/db",
        TCP,
        7000,
        True,
        "prod/db-from-client/ingress/0",
    ),
    ("union: first policy still holds", [DB_FROM_WEB_PG, DB_FROM_CLIENT], "prod/web", "prod/db", TCP, 5432, True, "prod/db-from-web/ingress/0"),
    ("union: neither allows", [DB_FROM_WEB_PG, DB_FROM_CLIENT], "dev/tool", "prod/db", TCP, 5432, False, "prod/db/ingress/isolation"),
    (
        "union with deny-all is the allow",
        [DENY_ALL_INGRESS, DB_FROM_CLIENT],
        "prod/client",
        "prod/db",
        ICMP,
        0,
        True,
        "prod/db-from-client/ingress/0",
    ),
    ("namespaceSelector allows its pods", [WEB_FROM_NS_DEV], "dev/tool", "prod/web", UDP, 53, True, "prod/web-from-dev/ingress/0"),
    ("namespaceSelector excludes own ns", [WEB_FROM_NS_DEV], "prod/client", "prod/web", TCP, 8080, False, "prod/web/ingress/isolation"),
    ("namespaceSelector excludes unlabeled ns", [WEB_FROM_NS_DEV], "other/x", "prod/web", TCP, 8080, False, "prod/web/ingress/isolation"),
    (
        "both selectors: matching pod in matching ns",
        [WEB_FROM_FRONTEND_IN_B],
        "dev/tool",
        "prod/web",
        TCP,
        8080,
        True,
        "prod/web-from-frontend-b/ingress/0",
    ),
    ("both selectors: wrong pod in matching ns", [WEB_FROM_FRONTEND_IN_B], "dev/web", "prod/web", TCP, 8080, False, "prod/web/ingress/isolation"),
    ("both selectors: matching pod in wrong ns", [WEB_FROM_FRONTEND_IN_B], "prod/client", "prod/web", TCP, 8080, False, "prod/web/ingress/isolation"),
    ("ipBlock allows inside", [WEB_FROM_BLOCK], "outside", "prod/web", TCP, 8080, True, "prod/web-from-block/ingress/0"),
    ("ipBlock except drops", [WEB_FROM_BLOCK], "outside_except", "prod/web", TCP, 8080, False, "prod/web/ingress/isolation"),
    ("ipBlock outside cidr drops", [WEB_FROM_BLOCK], "outside2", "prod/web", TCP, 8080, False, "prod/web/ingress/isolation"),
    ("ipBlock does not cover pods", [WEB_FROM_BLOCK], "prod/client", "prod/web", TCP, 8080, False, "prod/web/ingress/isolation"),
    ("named port resolves on target", [WEB_NAMED_HTTP], "other/x", "prod/web", TCP, 8080, True, "prod/web-http/ingress/0"),
    (
        "named port per pod: dev/web's http is 9090",
        [WEB_NAMED_HTTP, WEB_NAMED_HTTP_DEV],
        "other/x",
        "dev/web",
        TCP,
        9090,
        True,
        "dev/web-http/ingress/0",
    ),
    (
        "named port per pod: not prod/web's 8080",
        [WEB_NAMED_HTTP, WEB_NAMED_HTTP_DEV],
        "other/x",
        "dev/web",
        TCP,
        8080,
        False,
        "dev/web/ingress/isolation",
    ),
    ("named port: other number dropped", [WEB_NAMED_HTTP], "other/x", "prod/web", TCP, 9090, False, "prod/web/ingress/isolation"),
    ("named udp port", [WEB_NAMED_DNS_UDP], "prod/client", "prod/web", UDP, 53, True, "prod/web-dns/ingress/0"),
    ("named udp port not tcp", [WEB_NAMED_DNS_UDP], "prod/client", "prod/web", TCP, 53, False, "prod/web/ingress/isolation"),
    ("endPort low edge", [WEB_RANGE], "prod/client", "prod/web", TCP, 8000, True, "prod/web-range/ingress/0"),
    ("endPort high edge", [WEB_RANGE], "prod/client", "prod/web", TCP, 8100, True, "prod/web-range/ingress/0"),
    ("endPort above", [WEB_RANGE], "prod/client", "prod/web", TCP, 8101, False, "prod/web/ingress/isolation"),
    ("endPort below", [WEB_RANGE], "prod/client", "prod/web", TCP, 7999, False, "prod/web/ingress/isolation"),
    ("protocol without port: any udp", [WEB_UDP_ONLY], "prod/client", "prod/web", UDP, 9999, True, "prod/web-udp/ingress/0"),
    ("protocol without port: tcp dropped", [WEB_UDP_ONLY], "prod/client", "prod/web", TCP, 9999, False, "prod/web/ingress/isolation"),
    ("empty rule allows everything", [WEB_ALLOW_ALL, DENY_ALL_INGRESS], "other/x", "prod/web", ICMP, 0, True, "prod/web-all/ingress/0"),
    ("egress to pod on named port", [CLIENT_EGRESS_DB], "prod/client", "prod/db", TCP, 5432, True, "prod/client-out/egress/0"),
    ("egress named port resolves on peer", [CLIENT_EGRESS_DB], "prod/client", "prod/db", TCP, 8080, False, "prod/client/egress/isolation"),
    ("egress to non-peer dropped", [CLIENT_EGRESS_DB], "prod/client", "prod/web", TCP, 5432, False, "prod/client/egress/isolation"),
    ("egress isolation leaves other sources", [CLIENT_EGRESS_DB], "prod/web", "prod/db", TCP, 1, True, None),
    ("egress section implies Egress type", [CLIENT_EGRESS_BLOCK], "prod/client", "outside", UDP, 123, True, "prod/client-out-block/egress/0"),
    ("egress ipBlock except", [CLIENT_EGRESS_BLOCK], "prod/client", "outside2", UDP, 123, False, "prod/client/egress/isolation"),
    (
        "egress section also isolates ingress (default types)",
        [CLIENT_EGRESS_BLOCK],
        "prod/web",
        "prod/client",
        TCP,
        80,
        False,
        "prod/client/ingress/isolation",
    ),
    (
        "egress named port means nothing for ipBlock",
        [CLIENT_EGRESS_NAMED_BLOCK],
        "prod/client",
        "outside",
        TCP,
        8080,
        False,
        "prod/client/egress/isolation",
    ),
    ("egress dns to anywhere", [CLIENT_EGRESS_DNS], "prod/client", "other/x", UDP, 53, True, "prod/client-dns/egress/0"),
    ("egress dns only", [CLIENT_EGRESS_DNS], "prod/client", "other/x", ICMP, 0, False, "prod/client/egress/isolation"),
    ("egress tcp only drops icmp", [EGRESS_ICMP_NONE], "prod/client", "prod/web", ICMP, 0, False, "prod/client/egress/isolation"),
    ("egress tcp any port", [EGRESS_ICMP_NONE], "prod/client", "prod/web", TCP, 31337, True, "prod/client-tcp-only/egress/0"),
    (
        "egress allowed, ingress isolated dst drops",
        [CLIENT_EGRESS_DB, DENY_ALL_INGRESS],
        "prod/client",
        "prod/db",
        TCP,
        5432,
        False,
        "prod/db/ingress/isolation",
    ),
    (
        "egress allowed and ingress allowed",
        [CLIENT_EGRESS_DB, DB_FROM_CLIENT],
        "prod/client",
        "prod/db",
        TCP,
        5432,
        True,
        "prod/db-from-client/ingress/0",
    ),
    (
        "ingress allowed but source egress-isolated",
        [DENY_ALL_EGRESS, DB_FROM_CLIENT],
        "prod/client",
        "prod/db",
        TCP,
        5432,
        False,
        "prod/client/egress/isolation",
    ),
    (
        "policyTypes both with no egress rules isolates egress",
        [CLIENT_BOTH],
        "prod/client",
        "prod/web",
        TCP,
        80,
        False,
        "prod/client/egress/isolation",
    ),
    ("policyTypes both: ingress rule works", [CLIENT_BOTH], "prod/web", "prod/client", TCP, 80, True, "prod/client-both/ingress/0"),
    ("NotIn namespace selector", [EXPR_NOT_IN], "other/x", "prod/db", TCP, 5432, True, "prod/db-not-dev/ingress/0"),
    ("NotIn namespace selector excludes dev", [EXPR_NOT_IN], "dev/tool", "prod/db", TCP, 5432, False, "prod/db/ingress/isolation"),
    ("Exists pod selector across all namespaces", [EXPR_EXISTS], "dev/tool", "prod/db", TCP, 1, True, "prod/db-role/ingress/0"),
    ("Exists pod selector: no label dropped", [EXPR_EXISTS], "dev/web", "prod/db", TCP, 1, False, "prod/db/ingress/isolation"),
    ("DoesNotExist target selector isolates db", [EXPR_NOT_EXISTS], "prod/web", "prod/db", TCP, 1, False, "prod/db/ingress/isolation"),
    ("DoesNotExist target selector skips web", [EXPR_NOT_EXISTS], "prod/db", "prod/web", TCP, 1, True, None),
    ("namespace by its name label", [NS_BY_NAME], "other/x", "prod/db", UDP, 9, True, "prod/db-from-other/ingress/0"),
    ("policy in dev isolates dev only", [DEV_DENY], "prod/web", "dev/web", TCP, 9090, False, "dev/web/ingress/isolation"),
    ("policy in dev leaves prod", [DEV_DENY], "dev/web", "prod/web", TCP, 8080, True, None),
]


def _compile(policies: list[dict[str, Any]]) -> Compiled:
    return compile_policies([parse_policy(p) for p in policies], [parse_pod(p) for p in PODS], [parse_namespace(n) for n in NAMESPACES])


def _ip(name: str) -> int:
    return int(IPv4Address(IP[name]))


def test_the_table_has_enough_cases() -> None:
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case", "policies", "src", "dst", "proto", "dport", "allowed", "rule"), CASES, ids=[c[0] for c in CASES])
def test_truth_table(case: str, policies: list[dict[str, Any]], src: str, dst: str, proto: int, dport: int, allowed: bool, rule: str | None) -> None:
    decision = decide(_compile(policies), _ip(src), _ip(dst), proto, dport)
    assert decision.allowed is allowed, decision.reasons
    assert (decision.deciding.rule_id if decision.deciding else None) == rule, decision.reasons


def test_ip_block_minus_except_is_disjoint_prefixes() -> None:
    got = parse_block({"cidr": "198.18.0.0/24", "except": ["198.18.0.0/26", "198.18.0.192/27"]}, "t")
    assert got == (IPv4Network("198.18.0.64/26"), IPv4Network("198.18.0.128/26"), IPv4Network("198.18.0.224/27"))
    assert parse_block({"cidr": "198.18.0.0/24", "except": ["198.18.0.0/24"]}, "t") == ()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}, "operator 'Is'"),
        ({"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "In needs values"),
        ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "198.18.0.0/24", "except": ["198.19.0.0/24"]}}]}]}, "not inside"),
        ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "nope"}}]}]}, "ipBlock"),
        ({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "198.18.0.0/24"}, "podSelector": {}}]}]}, "cannot be combined"),
        ({"podSelector": {}, "ingress": [{"ports": [{"protocol": "ICMP"}]}]}, "protocol 'ICMP'"),
        ({"podSelector": {}, "ingress": [{"ports": [{"port": 70000}]}]}, "port 70000"),
        ({"podSelector": {}, "ingress": [{"ports": [{"port": "http", "endPort": 90}]}]}, "endPort"),
        ({"podSelector": {}, "ingress": [{"ports": [{"port": 90, "endPort": 80}]}]}, "endPort"),
        ({"podSelector": {}, "policyTypes": ["Sideways"]}, "policyTypes"),
    ],
)
def test_bad_policies_are_rejected_naming_the_policy(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message) as raised:
        parse_policy({"metadata": {"namespace": "prod", "name": "bad"}, "spec": spec})
    assert "prod/bad" in str(raised.value)


def test_sctp_ports_are_reported_not_widened() -> None:
    compiled = _compile([np("sctp", selector=APP_WEB, ingress=[{"ports": [{"port": 9, "protocol": "SCTP"}]}])])
    assert compiled.problems and "TCP and UDP only" in compiled.problems[0]
    assert not decide(compiled, _ip("prod/client"), _ip("prod/web"), SCTP, 9).allowed


def test_duplicate_matches_from_two_policies_are_kept_once_for_the_smaller_rule_id() -> None:
    twin = np("a-twin", selector=APP_DB, ingress=[{"from": [{"podSelector": APP_WEB}], "ports": [{"port": 5432}]}])
    compiled = _compile([DB_FROM_WEB_PG, twin])
    allows = [r for r in compiled.rules if r.action == "allow"]
    assert [r.rule_id for r in allows] == ["prod/a-twin/ingress/0"]


def test_isolation_is_one_drop_per_pod_and_direction_whatever_the_policies() -> None:
    compiled = _compile([DENY_ALL_INGRESS, DB_FROM_CLIENT, DB_FROM_WEB_PG])
    drops = [r.rule_id for r in compiled.rules if r.action == "drop"]
    assert drops == sorted(
        ["prod/web/ingress/isolation", "prod/db/ingress/isolation", "prod/client/ingress/isolation"],
        key=lambda i: int(IPv4Address(IP[i.rsplit("/", 2)[0]])),
    )


def test_pods_without_address_and_host_network_pods_are_neither_targets_nor_peers() -> None:
    pending = parse_pod({"metadata": {"namespace": "prod", "name": "p", "labels": {"app": "db"}}, "status": {}})
    host = parse_pod(
        {"metadata": {"namespace": "prod", "name": "h", "labels": {"app": "db"}}, "spec": {"hostNetwork": True}, "status": {"podIP": "198.18.9.9"}}
    )
    assert pending.ip == 0 and host.ip == 0
    compiled = compile_policies([parse_policy(DENY_ALL_INGRESS)], [pending, host], [])
    assert compiled.rules == ()


def test_rules_with_and_without_a_peer_on_one_pod_sort() -> None:
    compiled = _compile([WEB_ALLOW_ALL, WEB_FROM_NS_DEV, CLIENT_EGRESS_DNS, CLIENT_EGRESS_DB])
    assert [r.peer is None for r in compiled.rules if r.rule_id == "prod/web-all/ingress/0"] == [True]
    assert decide(compiled, _ip("dev/tool"), _ip("prod/web"), TCP, 1).deciding.rule_id == "prod/web-all/ingress/0"  # type: ignore[union-attr]

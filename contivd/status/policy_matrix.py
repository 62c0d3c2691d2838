"""Who may reach a group on which ports: compiled policy rules → a matrix, as a pure function.

Operators think "can web talk to db on 5432?", not in directional ofnet rules. Each cell
answers one such question the way the datapath's policy table would: a probe packet (a new
connection from a source to the group on a service) is matched against every compiled rule,
the highest priority wins, a deny wins a tie (as in openflow/flows/policy.py), and no match
means allow (Contiv's default). Rows are the tenant's groups, the networks and addresses the
rules name, and "anyone else"; columns are the services the rules name plus "other".

A probe stands for a whole source: a group's packets carry its id and come from its network's
subnet, so a rule naming a prefix counts for a source only if the source lies entirely inside
it. Reply-direction rules (a source port set) never decide a new connection and are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any, Literal

from ..model.policy import PolicyRule

PROTOCOL_NAMES = {1: "icmp", 6: "tcp", 17: "udp"}


@dataclass(frozen=True)
class GroupRef:
    """An endpoint group as the matrix sees it: its name, datapath id and network subnet."""

    name: str
    group_id: int
    subnet: IPv4Network | None


@dataclass(frozen=True)
class Source:
    label: str
    kind: Literal["group", "network", "ip", "any"]
    group_id: int  # 0: packets without a group
    prefix: IPv4Network | None  # None: an address no rule names


@dataclass(frozen=True)
class Service:
    protocol: int  # 0: a protocol no rule names
    port: int  # 0: a port no rule names

    @property
    def label(self) -> str:
        if self.protocol == 0:
            return "other"
        name = PROTOCOL_NAMES.get(self.protocol, f"proto {self.protocol}")
        if self.protocol in (6, 17):
            return f"{name}/{self.port}" if self.port else f"{name}/other"
        return name


@dataclass(frozen=True)
class Cell:
    action: Literal["allow", "deny"]
    rule: str  # the deciding rule's id; "" for the default allow


@dataclass(frozen=True)
class Matrix:
    group: str
    services: tuple[Service, ...]
    rows: tuple[tuple[Source, tuple[Cell, ...]], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "services": [s.label for s in self.services],
            "rows": [{"source": src.label, "kind": src.kind, "cells": [[c.action, c.rule] for c in cells]} for src, cells in self.rows],
        }


def _inside(inner: IPv4Network | None, outer: IPv4Network | None) -> bool:
    return outer is None or (inner is not None and inner.subnet_of(outer))


def _reaches(rule: PolicyRule, target: GroupRef) -> bool:
    """The rule can match new connections towards the target group."""
    return rule.src_port == 0 and rule.dst_endpoint_group in (0, target.group_id) and _inside(target.subnet, rule.dst_ip_addr)


def _matches(rule: PolicyRule, source: Source, service: Service) -> bool:
    return (
        rule.src_endpoint_group in (0, source.group_id)
        and _inside(source.prefix, rule.src_ip_addr)
        and rule.ip_protocol in (0, service.protocol)
        and rule.dst_port in (0, service.port)
    )


def decide(rules: Iterable[PolicyRule], source: Source, service: Service) -> Cell:
    """What the policy table does with a new connection from `source` on `service`."""
    best: PolicyRule | None = None
    for rule in rules:
        if not _matches(rule, source, service):
            continue
        if best is None or (rule.priority, rule.action == "deny") > (best.priority, best.action == "deny"):
            best = rule
    if best is None:
        return Cell("allow", "")
    return Cell("deny" if best.action == "deny" else "allow", best.rule_id)


def _services(rules: Sequence[PolicyRule]) -> tuple[Service, ...]:
    named = {Service(r.ip_protocol, r.dst_port) for r in rules if r.ip_protocol}
    with_ports = {s.protocol for s in named if s.port}
    named |= {Service(protocol, 0) for protocol in with_ports}  # the same protocol on a port no rule names
    return (*sorted(named, key=lambda s: (s.protocol, s.port == 0, s.port)), Service(0, 0))


def _sources(rules: Sequence[PolicyRule], groups: Sequence[GroupRef], networks: Mapping[str, IPv4Network]) -> tuple[Source, ...]:
    by_prefix = {prefix: name for name, prefix in networks.items()}
    rows = [Source(g.name, "group", g.group_id, g.subnet) for g in sorted(groups, key=lambda g: g.name)]
    prefixes = sorted({r.src_ip_addr for r in rules if r.src_ip_addr is not None}, key=lambda p: (int(p.network_address), p.prefixlen))
    for prefix in prefixes:
        name = by_prefix.get(prefix)
        rows.append(Source(name, "network", 0, prefix) if name else Source(str(prefix), "ip", 0, prefix))
    rows.append(Source("anyone else", "any", 0, None))
    return tuple(rows)


def policy_matrix(target: GroupRef, groups: Sequence[GroupRef], networks: Mapping[str, IPv4Network], rules: Iterable[PolicyRule]) -> Matrix:
    """The matrix for `target`. `groups`: the tenant's groups (sources, the target among them);
    `networks`: the tenant's network subnets by name (to name prefixes); `rules`: compiled rules
    (any superset: those that cannot reach the target are left out)."""
    relevant = [r for r in rules if _reaches(r, target)]
    services = _services(relevant)
    rows = tuple((src, tuple(decide(relevant, src, svc) for svc in services)) for src in _sources(relevant, groups, networks))
    return Matrix(target.name, services, rows)

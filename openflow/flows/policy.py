"""Contiv policy rules: one flow per ofnet rule, priority 10 + rule priority; the miss allows.

An allow (and the miss) continues to Kubernetes NetworkPolicy (np_egress): both must allow
(docs/policy.md).

Rules are VRF/network-agnostic and IPv4-only, as in ofnet.  Two rules that
compile to the same match (same priority) cannot both be installed; the
deny wins, then the rule with the smaller cookie, so the result does not
depend on the order rules arrived in.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import ETH_IPV4, Flow, MatchValue
from openflow.inputs import NodeInputs, PolicyRuleSpec
from openflow.pipeline import Table, Tables

PRIORITY_OFFSET = 10


def _prefix(ip: tuple[int, int]) -> tuple[int, int]:
    mask = ((1 << ip[1]) - 1) << (32 - ip[1])
    return ip[0] & mask, mask


def rule_flow(table: Table, rule: PolicyRuleSpec, round_: int) -> Flow:
    match: dict[str, MatchValue] = {"eth_type": ETH_IPV4}
    groups = {k: v for k, v in (("SRC_EPG", rule.src_epg), ("DST_EPG", rule.dst_epg)) if v}
    if groups:
        match["metadata"] = meta(**groups)
    for name, value in (("ipv4_src", rule.src_ip), ("ipv4_dst", rule.dst_ip)):
        if value is not None:
            match[name] = _prefix(value)
    optional = (("ip_proto", rule.proto), ("tp_src", rule.src_port), ("tp_dst", rule.dst_port))
    match.update({name: value for name, value in optional if value})
    if rule.tcp_flags is not None:
        match["tcp_flags"] = rule.tcp_flags
    return table.flow(
        PRIORITY_OFFSET + rule.priority,
        match,
        cookie=cookie(Category.POLICY, rule.rule_id, round_),
        goto="np_egress" if rule.action == "allow" else None,
    )


def rank(flow: Flow) -> tuple[bool, int, Flow]:
    """Which of two rule flows with one match is installed: the smaller rank (deny, then smaller cookie)."""
    return (flow.goto is not None, flow.cookie, flow)


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    table = tables["policy"]
    chosen: dict[object, Flow] = {}
    for rule in inputs.rules:
        flow = rule_flow(table, rule, inputs.round)
        other = chosen.get(flow.key)
        if other is None or rank(flow) < rank(other):
            chosen[flow.key] = flow
    return sorted(chosen.values())

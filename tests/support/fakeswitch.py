"""A FakeSwitch that applies our flows and groups and answers "where does this packet go".

It models what the pipeline relies on and no more: priority lookup per
table, apply-actions in order, write-metadata, goto, ALL/select groups
(select by a stable hash of the 5-tuple), OVS's rule that ``output`` to the
input port is dropped, and a conntrack with DNAT entries (``ct(nat)`` finds
them in both directions, ``ct(commit,nat(dst=...))`` creates them).
Packets are dicts of match-field names (``vlan_vid`` absent when untagged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openflow.desired import Desired
from openflow.diff import Plan
from openflow.flow import (
    ETH_ARP,
    OFPP_IN_PORT,
    Action,
    Ct,
    Flow,
    Group,
    GroupAction,
    LearnBackend,
    Move,
    Output,
    PopVlan,
    PushVlan,
    Resubmit,
    SetField,
    make_match,
)
from openflow.text import flow_text

Packet = dict[str, Any]
CT_NEW, CT_EST, CT_RPL, CT_TRK = 0x01, 0x02, 0x08, 0x20
_MAX_STEPS = 64
_PIPELINE_STATE = ("in_port", "metadata", "ct_state", "reg0", "reg1")  # not part of the packet on the wire


@dataclass
class Result:
    """Where one packet went: (port, packet as it left, without pipeline state) per output, and the flows it hit."""

    outputs: list[tuple[int, Packet]] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)

    @property
    def ports(self) -> list[int]:
        return sorted(port for port, _ in self.outputs)


def _tuple(p: Packet) -> tuple[int, int, int, int, int]:
    return (p["ipv4_src"], p["ipv4_dst"], p.get("ip_proto", 0), p.get("tp_src", 0), p.get("tp_dst", 0))


class FakeSwitch:
    def __init__(self) -> None:
        self.flows: dict[object, Flow] = {}
        self.groups: dict[int, Group] = {}
        self.conntrack: list[tuple[tuple[int, int, int, int, int], tuple[int, int]]] = []

    @classmethod
    def with_state(cls, want: Desired) -> FakeSwitch:
        switch = cls()
        switch.apply(Plan(add_groups=want.groups, add_flows=want.flows))
        return switch

    def apply(self, plan: Plan) -> None:
        """Apply a plan in its order, failing like OVS would on a dangling group reference, an
        added group that exists or a modified one that does not."""
        for group in plan.add_groups:
            if group.group_id in self.groups:
                raise AssertionError(f"group {group.group_id} added twice")
            self.groups[group.group_id] = group
        for group in plan.modify_groups:
            if group.group_id not in self.groups:
                raise AssertionError(f"group {group.group_id} modified before it exists")
            self.groups[group.group_id] = group
        for flow in plan.add_flows:
            for action in flow.actions:
                if isinstance(action, GroupAction) and action.group_id not in self.groups:
                    raise AssertionError(f"flow references missing group {action.group_id}: {flow_text(flow)}")
            self.flows[flow.key] = flow
        for flow in plan.delete_flows:
            del self.flows[flow.key]
        for group in plan.delete_groups:
            users = [f for f in self.flows.values() if GroupAction(group.group_id) in f.actions]
            if users:
                raise AssertionError(f"group {group.group_id} deleted while in use: {flow_text(users[0])}")
            del self.groups[group.group_id]

    def send(self, in_port: int, **packet: Any) -> Result:
        """Inject ``packet`` on ``in_port`` at table 0 and follow it through the pipeline."""
        result = Result()
        self._table(0, {"in_port": in_port, "metadata": 0, "reg0": 0, "reg1": 0, **packet}, result, 0)
        return result

    def _lookup(self, table: int, p: Packet) -> Flow | None:
        candidates = [f for f in self.flows.values() if f.table == table and self._matches(f, p)]
        return max(candidates, key=lambda f: f.priority, default=None)

    @staticmethod
    def _matches(flow: Flow, p: Packet) -> bool:
        for name, value, mask in flow.match:
            have = p.get(name)
            if have is None:
                return False
            if (have & mask if mask is not None else have) != value:
                return False
        return True

    def _table(self, table: int, p: Packet, result: Result, depth: int) -> None:
        if depth > _MAX_STEPS:
            raise AssertionError("pipeline loop")
        flow = self._lookup(table, p)
        if flow is None:
            raise AssertionError(f"table {table} has no miss flow")
        result.hits.append(flow_text(flow, cookie=False))
        for action in flow.actions:
            self._act(action, p, result, depth)
        if flow.write_metadata is not None:
            value, mask = flow.write_metadata
            p["metadata"] = (p["metadata"] & ~mask) | (value & mask)
        if flow.goto is not None:
            self._table(flow.goto, p, result, depth + 1)

    def _act(self, action: Action, p: Packet, result: Result, depth: int) -> None:
        if isinstance(action, Output):
            port = p["in_port"] if action.port == OFPP_IN_PORT else action.port
            if action.port == OFPP_IN_PORT or port != p["in_port"]:
                result.outputs.append((port, {k: v for k, v in p.items() if k not in _PIPELINE_STATE}))
        elif isinstance(action, SetField):
            p[action.field] = action.value
        elif isinstance(action, Move):
            p[action.dst] = p[action.src]
        elif isinstance(action, PushVlan):
            p["vlan_vid"] = 0
        elif isinstance(action, PopVlan):
            p.pop("vlan_vid", None)
        elif isinstance(action, GroupAction):
            group = self.groups[action.group_id]
            buckets = group.buckets if group.type == "all" else (group.buckets[sum(_tuple(p)) % len(group.buckets)],)
            for bucket in buckets:
                copy = dict(p)
                for inner in bucket:
                    self._act(inner, copy, result, depth)
        elif isinstance(action, Resubmit):
            self._table(action.table, p, result, depth + 1)
        elif isinstance(action, LearnBackend):
            self._learn(action, p)
        elif isinstance(action, Ct):
            copy = dict(p)
            self._conntrack(action, copy)
            self._table(action.table, copy, result, depth + 1)

    def _learn(self, learn: LearnBackend, p: Packet) -> None:
        """OVS ``learn``: add (or replace) the flow naming this client's backend (timeouts not modelled)."""
        match = {"eth_type": p["eth_type"], "ip_proto": learn.proto, "ipv4_src": p["ipv4_src"], "ipv4_dst": p["ipv4_dst"], "tp_dst": p["tp_dst"]}
        actions = (SetField("reg0", learn.backend_ip), SetField("reg1", learn.backend_port))
        flow = Flow(learn.table, learn.priority, make_match(match), actions, cookie=learn.cookie)
        self.flows[flow.key] = flow

    def _conntrack(self, ct: Ct, p: Packet) -> None:
        key = _tuple(p)
        for orig, (ip, port) in self.conntrack:
            reply = (ip, orig[0], orig[2], port, orig[3])
            if key == orig:
                p["ct_state"] = CT_TRK | CT_EST
                if ct.nat is not None:
                    p["ipv4_dst"], p["tp_dst"] = ip, port
                return
            if key == reply:
                p["ct_state"] = CT_TRK | CT_EST | CT_RPL
                if ct.nat is not None:
                    p["ipv4_src"], p["tp_src"] = orig[1], orig[4]
                return
        p["ct_state"] = CT_TRK | CT_NEW
        if ct.commit and ct.nat is not None and ct.nat.ip:
            self.conntrack.append((key, (ct.nat.ip, ct.nat.port or key[4])))
            p["ipv4_dst"], p["tp_dst"] = ct.nat.ip, ct.nat.port or key[4]
        elif ct.commit:  # a plain commit (NetworkPolicy): replies come back +est+rpl
            self.conntrack.append((key, (key[1], key[4])))


def arp_request(sender_mac: int, sender_ip: int, target_ip: int) -> dict[str, Any]:
    """Fields of a broadcast ARP request."""
    return {
        "eth_src": sender_mac, "eth_dst": 0xFFFFFFFFFFFF, "eth_type": ETH_ARP, "arp_op": 1,
        "arp_sha": sender_mac, "arp_spa": sender_ip, "arp_tha": 0, "arp_tpa": target_ip,
    }  # fmt: skip

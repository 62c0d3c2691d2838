"""One packet through both kinds of policy, as the pipeline judges it: Contiv's EPG rules (the
`policy` table) first, then Kubernetes NetworkPolicy (`np_egress`, `np_ingress`); both must allow
(docs/policy.md). `ctl trace` and the status page's trace card show this beside OVS's own trace.

Pure: the compiled Contiv rules (the same `PolicyRuleSpec`s the agent programs, one flow each at
priority 10 + the rule's), the compiled NetworkPolicy rules and the packet's two ends in, the
verdict and every rule that took part out. The packet is the first of a connection, as the OVS
trace sends it: TCP a SYN from port `CLIENT_PORT`, UDP from the same port, ICMP an echo request.

What the pipeline knows of the ends is what the model uses: the source's group is its port's
EPG; the destination's group is known (metadata DST_EPG) only when it is an endpoint on the
source's network (`dst_epg` matches the network and the address). A source outside every
endpoint enters the bridge as REMOTE: the node itself (its private address, a node's VTEP)
skips every policy table; any other address is from outside the cluster, and the destination's
node judges it by the destination pod's ingress NetworkPolicy (np_ingress, no Contiv policy and
no egress: it is no pod). Pod-to-pod packets are judged at the source's node only.

What leaves the bridge: in bridge mode an endpoint of another network is not reached
(`unrouted`), nor an address outside the cluster from a VXLAN network (no way out but to the
node itself: `no_way_out`); a VLAN network's bridge sends it out of the uplink.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any, Literal

from openflow.inputs import NetpolRule, PolicyRuleSpec

from .netpolicy import Compiled, Decision, decide
from .policy import rule_key_of

CLIENT_PORT = 40000  # the source port of the traced packet (contivd.agent.trace sends the same)
TCP_SYN = 0x002
CONTIV_PRIORITY_OFFSET = 10  # a rule's flow priority is 10 + its Priority (openflow/flows/policy.py)
_PORTED = (6, 17)  # ofnet matches ports of TCP and UDP only

Kind = Literal["contiv", "kubernetes"]


@dataclass(frozen=True)
class TraceEnd:
    """One end of a traced packet. `endpoint` empty: an address outside every endpoint."""

    address: int
    endpoint: str = ""
    group: int = 0  # the endpoint's EPG id (0: none)
    network: str = ""  # the endpoint's network id
    node: str = ""  # the node the endpoint is homed on
    pod: str = ""  # `<namespace>/<name>` of its Kubernetes pod, when it is one
    node_itself: bool = False  # no endpoint: an address of a node (its private address, a VTEP), trusted on its host port
    vxlan: bool = False  # an endpoint on a VXLAN network (its bridge sends nothing out of the cluster)


@dataclass(frozen=True)
class TookPart:
    """One rule that judged the packet, in the table where it did."""

    kind: Kind
    table: str  # policy | np_egress | np_ingress
    rule: str  # the compiled rule id (its flows' cookie)
    policy: str  # Contiv: `tenant:policy`; Kubernetes: `namespace/policy`, or the pod's isolation
    action: str  # Contiv: allow | deny; Kubernetes: allow | drop
    priority: int  # the rule's flow priority in its table

    @property
    def drops(self) -> bool:
        return self.action != "allow"


@dataclass(frozen=True)
class Explanation:
    allowed: bool
    rules: tuple[TookPart, ...]  # pipeline order: the deciding rule of each table the packet reached
    reasons: tuple[str, ...]  # one line per table: what happened there
    netpol: Decision | None  # NetworkPolicy's own answer (None: not reached)
    forwarded: bool = True  # False: policy allows, the forward table drops it (no rule decides)

    @property
    def deciding(self) -> TookPart | None:
        """The one rule to name: the drop, else the last allow (the most specific to the packet);
        none when the forward table, not a rule, drops it."""
        if not self.forwarded:
            return None
        drops = [r for r in self.rules if r.drops]
        return drops[0] if drops else (self.rules[-1] if self.rules else None)


def contiv_matches(rule: PolicyRuleSpec, src: TraceEnd, dst: TraceEnd, proto: int, dport: int) -> bool:
    """Whether the rule's flow in the `policy` table matches the traced packet (the flow's twin)."""
    if rule.src_epg and rule.src_epg != src.group:
        return False
    if rule.dst_epg and rule.dst_epg != destination_group(src, dst):
        return False
    for prefix, address in ((rule.src_ip, src.address), (rule.dst_ip, dst.address)):
        if prefix is not None:
            mask = ((1 << prefix[1]) - 1) << (32 - prefix[1])
            if address & mask != prefix[0] & mask:
                return False
    if rule.proto and rule.proto != proto:
        return False
    if proto in _PORTED and ((rule.src_port and rule.src_port != CLIENT_PORT) or (rule.dst_port and rule.dst_port != dport)):
        return False
    flags = TCP_SYN if proto == 6 else 0
    return rule.tcp_flags is None or flags & rule.tcp_flags[1] == rule.tcp_flags[0]


def destination_group(src: TraceEnd, dst: TraceEnd) -> int:
    """The DST_EPG the pipeline writes: the destination endpoint's group on the source's network."""
    return dst.group if dst.endpoint and dst.network == src.network else 0


def contiv_rule(rules: Iterable[PolicyRuleSpec], src: TraceEnd, dst: TraceEnd, proto: int, dport: int) -> PolicyRuleSpec | None:
    """The rule whose flow the packet hits: the highest priority; at one priority a deny first
    (the flows' own tie-break for one match), then the smaller rule id."""
    hits = [r for r in rules if contiv_matches(r, src, dst, proto, dport)]
    return min(hits, key=lambda r: (-r.priority, r.action != "deny", r.rule_id)) if hits else None


def contiv_part(rule: PolicyRuleSpec) -> TookPart:
    key = rule_key_of(rule.rule_id)
    policy = key.rpartition(":")[0] if key.count(":") == 2 else rule.rule_id
    return TookPart("contiv", "policy", rule.rule_id, policy, rule.action, CONTIV_PRIORITY_OFFSET + rule.priority)


def kubernetes_part(rule: NetpolRule) -> TookPart:
    namespace, name, *_ = rule.rule_id.split("/")
    policy = f"{namespace}/{name} (isolation)" if rule.rule_id.endswith("/isolation") else f"{namespace}/{name}"
    return TookPart("kubernetes", f"np_{rule.direction}", rule.rule_id, policy, rule.action, rule.priority)


def _line(table: str, part: TookPart | None, absent: str) -> str:
    return f"{table}: {absent}" if part is None else f"{table}: {part.action} by {part.rule} ({part.kind}, priority {part.priority})"


def unrouted(src: TraceEnd, dst: TraceEnd) -> str | None:
    """Why a bridging node's forward table drops src → dst whatever policy says (None: it does
    not): an endpoint of another network is reached through the gateway's MAC, and in bridge
    mode no forward flow routes that (only Contiv's routing mode routes between networks)."""
    if not (src.endpoint and dst.endpoint) or src.network == dst.network:
        return None
    return (
        f"forward: drop: {dst.endpoint} is on network {dst.network}, the source on {src.network}; in bridge mode nothing "
        "routes between networks (the packet to the gateway's MAC matches no forward flow)"
    )


def no_way_out(src: TraceEnd, dst: TraceEnd) -> str | None:
    """Why the source's bridge drops a pod's packet to an address outside the cluster whatever
    policy says (None: it does not): a VXLAN network's bridge forwards unknown unicast nowhere,
    and its gateway leads to the node itself only (the host port)."""
    if not (src.endpoint and src.vxlan) or dst.endpoint or dst.node_itself:
        return None
    return (
        f"forward: drop: {IPv4Address(dst.address)} is outside the cluster and {src.endpoint}'s network is VXLAN: its bridge sends "
        "unknown unicast nowhere and routes through the gateway to the node itself only (no way out)"
    )


def explain(
    contiv: Iterable[PolicyRuleSpec], netpol: Compiled, src: TraceEnd, dst: TraceEnd, proto: int, dport: int = 0, *, bridged: bool = False
) -> Explanation:
    """What the pipeline's policy tables do to the first packet of a connection src → dst and,
    `bridged` (the nodes bridge: Contiv's bridge mode), whether the forward table then drops it
    for being addressed to another network (`unrouted`) or out of a VXLAN network (`no_way_out`)."""
    judged = _judged(contiv, netpol, src, dst, proto, dport)
    why = (unrouted(src, dst) or no_way_out(src, dst)) if bridged and judged.allowed else None
    return judged if why is None else Explanation(False, judged.rules, (*judged.reasons, why), judged.netpol, forwarded=False)


def _judged(contiv: Iterable[PolicyRuleSpec], netpol: Compiled, src: TraceEnd, dst: TraceEnd, proto: int, dport: int) -> Explanation:
    """What the pipeline's policy tables do to the first packet of a connection src → dst."""
    if not src.endpoint and (src.node_itself or not dst.endpoint):
        why = "not judged: the source is the node itself, which enters through its host port as REMOTE and skips policy"
        if not src.node_itself:
            why = "not judged: neither end is an endpoint (it enters as REMOTE; no pod's rules apply)"
        return Explanation(True, (), (f"policy: {why}", "np_egress: not judged", "np_ingress: not judged"), None)
    if not src.endpoint:
        return _from_outside(netpol, src, dst, proto, dport)
    hit = contiv_rule(contiv, src, dst, proto, dport)
    first = None if hit is None else contiv_part(hit)
    head = _line("policy", first, "no Contiv rule matches (default allow)")
    if first is not None and first.drops:
        return Explanation(False, (first,), (head, "np_egress: not reached", "np_ingress: not reached"), None)
    decision = decide(netpol, src.address, dst.address, proto, dport)
    egress = None if decision.egress is None else kubernetes_part(decision.egress)
    ingress = None if decision.ingress is None else kubernetes_part(decision.ingress)
    reached = egress is None or not egress.drops
    reasons = (
        head,
        _line("np_egress", egress, "the source is not isolated for egress"),
        _line("np_ingress", ingress, "the destination is not isolated for ingress") if reached else "np_ingress: not reached",
    )
    parts = tuple(p for p in (first, egress, ingress if reached else None) if p is not None)
    return Explanation(decision.allowed, parts, reasons, decision)


def _from_outside(netpol: Compiled, src: TraceEnd, dst: TraceEnd, proto: int, dport: int) -> Explanation:
    """A packet from outside the cluster: its destination's node judges it by the destination's
    ingress only (OUTSIDE sends it from service_lb to np_ingress; the source is no pod)."""
    decision = decide(netpol, src.address, dst.address, proto, dport, from_outside=True)
    ingress = None if decision.ingress is None else kubernetes_part(decision.ingress)
    reasons = (
        "policy: not judged: the source is outside the cluster (no Contiv group); it enters the destination's node as REMOTE and OUTSIDE",
        "np_egress: not judged: the source is no pod",
        _line("np_ingress", ingress, "the destination is not isolated for ingress"),
    )
    return Explanation(decision.allowed, () if ingress is None else (ingress,), reasons, decision)


def part_json(part: TookPart | None) -> dict[str, Any] | None:
    if part is None:
        return None
    return {"kind": part.kind, "table": part.table, "rule": part.rule, "policy": part.policy, "action": part.action, "priority": part.priority}


def explanation_json(explanation: Explanation) -> dict[str, Any]:
    """The model's answer as the API renders it: the verdict, the deciding rule, every rule that
    took part in pipeline order, and each table's (`contiv`, `egress`, `ingress`: None when no
    rule of it matched or it was not reached)."""
    by_table = {part.table: part for part in explanation.rules}
    deciding = explanation.deciding
    return {
        "verdict": "allow" if explanation.allowed else "drop",
        "deciding": None if deciding is None else deciding.rule,
        "rules": [part_json(part) for part in explanation.rules],
        "contiv": part_json(by_table.get("policy")),
        "egress": part_json(by_table.get("np_egress")),
        "ingress": part_json(by_table.get("np_ingress")),
        "reasons": list(explanation.reasons),
    }

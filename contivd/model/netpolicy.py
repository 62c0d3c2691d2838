"""Kubernetes NetworkPolicy (networking.k8s.io/v1) compiled to address rules, and their verdict.

Pure: Kubernetes objects (the JSON the API server sent) are parsed into frozen records
(`parse_policy`, `parse_pod`, `parse_namespace`), `compile_policies` turns policies + pods +
namespaces into `NetpolRule`s over pod IPs, and `decide` says what those rules do to one packet.
The datapath programs the same rules (two tables, egress then ingress, see docs/policy.md); the
trace command and the truth table in tests/model/test_netpolicy.py use `decide`, so the model
verdict and the flows come from one compilation.

Semantics, as the API documents them:

  * a pod selected by a policy whose `policyTypes` has Ingress (Egress) is *isolated* for that
    direction: only what some such policy's rules allow gets through (union of policies);
    `policyTypes` defaults to Ingress, plus Egress when the policy has an `egress` section;
  * a connection needs the source's egress *and* the destination's ingress to allow it;
    replies of an allowed connection pass (the datapath commits it to conntrack);
  * peers: `podSelector` (the policy's namespace), `namespaceSelector` (all pods there), both
    (the pods matching in the matching namespaces), `ipBlock` (its CIDR minus `except`);
    no `from`/`to` means any peer, no `ports` any port and protocol;
  * ports: protocol (default TCP), number or named container port (resolved on the pod that
    listens: the selected pod for ingress, the peer pod for egress; a named port has no meaning
    for an ipBlock peer), `endPort` for a range.

Not compiled (each reported in `Compiled.problems`, never silently widened): SCTP ports (the
pipeline matches TCP/UDP ports only; the SCTP protocol without ports is compiled), IPv6
CIDRs. A policy with an unusable selector is reported and left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, collapse_addresses
from typing import Any, Literal

from openflow.inputs import NetpolDirection as Direction
from openflow.inputs import NetpolRule

from .errors import ValidationError

PROTOCOLS = {"TCP": 6, "UDP": 17, "SCTP": 132}
PORT_PROTOCOLS = frozenset({6, 17})
"""Protocols whose ports the datapath can match."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server puts on every namespace (so selectors may name one)."""

ALLOW_PRIORITY = 200
ISOLATION_PRIORITY = 100
"""Within one direction's table: any allow beats the isolated pod's default drop."""


@dataclass(frozen=True)
class Requirement:
    """One `matchExpressions` entry (or one `matchLabels` pair, as `In` with one value)."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator == "In" else not inside


@dataclass(frozen=True)
class Selector:
    """A label selector; no requirements selects everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


@dataclass(frozen=True)
class ContainerPort:
    name: str
    protocol: int
    port: int


@dataclass(frozen=True)
class Pod:
    """The part of a pod policy needs; `ip` 0 means none yet (it is neither target nor peer)."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    ip: int
    ports: tuple[ContainerPort, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Namespace:
    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True)
class Peer:
    """One `from`/`to` entry: pods by selectors, or an address block minus its exceptions."""

    pods: Selector | None = None
    namespaces: Selector | None = None
    """None with `pods` set: the policy's own namespace."""
    block: tuple[IPv4Network, ...] = ()
    """ipBlock's CIDR minus `except`, as disjoint prefixes (empty for pod peers)."""
    is_block: bool = False


@dataclass(frozen=True)
class PortSpec:
    protocol: int
    port: int | str | None = None
    """A number, a container port's name, or None (every port of the protocol)."""
    end_port: int | None = None


@dataclass(frozen=True)
class RuleSpec:
    peers: tuple[Peer, ...] | None
    """None: any peer (no `from`/`to`)."""
    ports: tuple[PortSpec, ...] | None
    """None: any protocol and port (no `ports`)."""


@dataclass(frozen=True)
class Policy:
    namespace: str
    name: str
    pod_selector: Selector
    ingress: tuple[RuleSpec, ...] | None
    """None: no Ingress in policyTypes; () : isolation without any allow."""
    egress: tuple[RuleSpec, ...] | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Compiled:
    rules: tuple[NetpolRule, ...]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    """`decide`'s answer: the verdict and the rule of each table that decided (None: no rule,
    the pod is not isolated in that direction)."""

    allowed: bool
    egress: NetpolRule | None
    ingress: NetpolRule | None
    reasons: tuple[str, ...] = ()

    @property
    def deciding(self) -> NetpolRule | None:
        """The one rule to name: the drop, else the ingress allow, else the egress allow."""
        rules = [r for r in (self.egress, self.ingress) if r is not None]
        drops = [r for r in rules if r.action == "drop"]
        return (drops or rules[::-1])[0] if rules else None


# ---------------------------------------------------------------------------------------------
# Parsing the API's JSON


def parse_selector(raw: Any, what: str) -> Selector:
    """A LabelSelector (`matchLabels` + `matchExpressions`); ValidationError naming `what`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ValidationError("spec", f"{what}: a label selector must be an object")
    reqs = [Requirement(k, "In", frozenset({str(v)})) for k, v in sorted((raw.get("matchLabels") or {}).items())]
    for expr in raw.get("matchExpressions") or ():
        op = expr.get("operator")
        values = frozenset(str(v) for v in expr.get("values") or ())
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValidationError("spec", f"{what}: matchExpressions operator {op!r} is not In, NotIn, Exists or DoesNotExist")
        if (op in ("In", "NotIn")) != bool(values):
            raise ValidationError("spec", f"{what}: operator {op} {'needs' if op in ('In', 'NotIn') else 'takes no'} values")
        reqs.append(Requirement(str(expr.get("key", "")), op, values))
    return Selector(tuple(reqs))


def parse_block(raw: Mapping[str, Any], what: str) -> tuple[IPv4Network, ...]:
    """ipBlock → the disjoint prefixes of `cidr` minus every `except` (pure prefix arithmetic)."""
    try:
        cidr = IPv4Network(str(raw.get("cidr", "")), strict=False)
        excepts = [IPv4Network(str(e), strict=False) for e in raw.get("except") or ()]
    except ValueError as error:
        raise ValidationError("spec", f"{what}: ipBlock: {error}") from None
    left = [cidr]
    for hole in excepts:
        if not hole.subnet_of(cidr):
            raise ValidationError("spec", f"{what}: ipBlock except {hole} is not inside {cidr}")
        left = [piece for net in left for piece in _minus(net, hole)]
    return tuple(sorted(collapse_addresses(left)))


def _minus(net: IPv4Network, hole: IPv4Network) -> list[IPv4Network]:
    """`net` without `hole`; two prefixes are nested or disjoint."""
    if net.subnet_of(hole):
        return []
    return list(net.address_exclude(hole)) if hole.subnet_of(net) else [net]


def _parse_peer(raw: Mapping[str, Any], what: str) -> Peer:
    if "ipBlock" in raw:
        if "podSelector" in raw or "namespaceSelector" in raw:
            raise ValidationError("spec", f"{what}: ipBlock cannot be combined with a selector")
        return Peer(block=parse_block(raw["ipBlock"], what), is_block=True)
    if "podSelector" not in raw and "namespaceSelector" not in raw:
        raise ValidationError("spec", f"{what}: a peer needs podSelector, namespaceSelector or ipBlock")
    pods = parse_selector(raw.get("podSelector"), f"{what}: podSelector")
    namespaces = parse_selector(raw["namespaceSelector"], f"{what}: namespaceSelector") if "namespaceSelector" in raw else None
    return Peer(pods=pods, namespaces=namespaces)


def _parse_port(raw: Mapping[str, Any], what: str) -> PortSpec:
    name = str(raw.get("protocol") or "TCP").upper()
    if name not in PROTOCOLS:
        raise ValidationError("spec", f"{what}: protocol {raw.get('protocol')!r} is not TCP, UDP or SCTP")
    port = raw.get("port")
    end = raw.get("endPort")
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if isinstance(port, int) and not 1 <= port <= 65535:
        raise ValidationError("spec", f"{what}: port {port} is not 1..65535")
    if end is not None and (not isinstance(port, int) or not isinstance(end, int) or not port <= end <= 65535):
        raise ValidationError("spec", f"{what}: endPort {end!r} needs a numeric port <= endPort <= 65535")
    return PortSpec(PROTOCOLS[name], port, end)


def _parse_rules(raw: Any, peer_key: str, what: str) -> tuple[RuleSpec, ...]:
    rules = []
    for index, rule in enumerate(raw or ()):
        here = f"{what}[{index}]"
        peers = rule.get(peer_key)
        ports = rule.get("ports")
        rules.append(
            RuleSpec(
                tuple(_parse_peer(p, f"{here}.{peer_key}") for p in peers) if peers else None,
                tuple(_parse_port(p, f"{here}.ports") for p in ports) if ports else None,
            )
        )
    return tuple(rules)


def parse_policy(obj: Mapping[str, Any]) -> Policy:
    """A NetworkPolicy object → Policy; ValidationError naming the policy and the field."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    what = f"NetworkPolicy {meta.get('namespace', '')}/{meta.get('name', '')}"
    types = spec.get("policyTypes") or (["Ingress", "Egress"] if "egress" in spec else ["Ingress"])
    unknown = set(types) - {"Ingress", "Egress"}
    if unknown:
        raise ValidationError("spec", f"{what}: policyTypes {sorted(unknown)} not Ingress or Egress")
    return Policy(
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        parse_selector(spec.get("podSelector"), f"{what}: podSelector"),
        _parse_rules(spec.get("ingress"), "from", f"{what}: ingress") if "Ingress" in types else None,
        _parse_rules(spec.get("egress"), "to", f"{what}: egress") if "Egress" in types else None,
    )


def parse_pod(obj: Mapping[str, Any], ip: str | None = None) -> Pod:
    """A Pod object → Pod; `ip` overrides status.podIP (contivd knows the address it gave)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    address = ip if ip is not None else (obj.get("status") or {}).get("podIP") or ""
    if spec.get("hostNetwork"):
        address = ""  # a host-network pod's traffic never crosses the bridge
    ports = [
        ContainerPort(str(p["name"]), PROTOCOLS.get(str(p.get("protocol") or "TCP").upper(), 0), int(p["containerPort"]))
        for c in spec.get("containers") or ()
        for p in c.get("ports") or ()
        if p.get("name") and p.get("containerPort")
    ]
    try:
        value = int(IPv4Address(address)) if address else 0
    except ValueError:
        value = 0  # an IPv6 pod address: not ours to police
    return Pod(str(meta.get("namespace", "")), str(meta.get("name", "")), dict(meta.get("labels") or {}), value, tuple(ports))


def parse_namespace(obj: Mapping[str, Any]) -> Namespace:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    return Namespace(name, {**(meta.get("labels") or {}), NAMESPACE_NAME_LABEL: name})


# ---------------------------------------------------------------------------------------------
# Compiling


@dataclass(frozen=True)
class _World:
    pods_by_namespace: Mapping[str, tuple[Pod, ...]]
    namespaces: tuple[Namespace, ...]

    def selected(self, policy: Policy) -> list[Pod]:
        return [p for p in self.pods_by_namespace.get(policy.namespace, ()) if policy.pod_selector.matches(p.labels)]

    def peer_pods(self, peer: Peer, namespace: str) -> list[Pod]:
        spaces = [namespace] if peer.namespaces is None else [n.name for n in self.namespaces if peer.namespaces.matches(n.labels)]
        pods = peer.pods or Selector()
        return [p for ns in spaces for p in self.pods_by_namespace.get(ns, ()) if pods.matches(p.labels)]


def _port_ranges(spec: PortSpec, listener: Pod | None) -> list[tuple[int, tuple[int, int] | None]]:
    """(protocol, port range) pairs of one `ports` entry on the pod that listens; [] if it
    names a port that pod does not have (or the listener is an address block)."""
    if spec.port is None:
        return [(spec.protocol, None)]
    if isinstance(spec.port, int):
        return [(spec.protocol, (spec.port, spec.end_port or spec.port))]
    if listener is None:
        return []
    return [(spec.protocol, (c.port, c.port)) for c in listener.ports if c.name == spec.port and c.protocol == spec.protocol]


def _peer_prefixes(rule: RuleSpec, policy: Policy, world: _World) -> list[tuple[tuple[int, int] | None, Pod | None]]:
    """The other end of a rule: (prefix, the pod there or None for an address block)."""
    if rule.peers is None:
        return [(None, None)]
    out: list[tuple[tuple[int, int] | None, Pod | None]] = []
    for peer in rule.peers:
        if peer.is_block:
            out.extend(((int(net.network_address), net.prefixlen), None) for net in peer.block)
        else:
            out.extend(((p.ip, 32), p) for p in world.peer_pods(peer, policy.namespace) if p.ip)
    return out


def _port_pairs(rule: RuleSpec, listener: Pod | None) -> list[tuple[int, tuple[int, int] | None]]:
    """(protocol, port range) of a rule on the pod that listens; SCTP ports are left out (the
    caller reports them)."""
    if rule.ports is None:
        return [(0, None)]
    pairs: list[tuple[int, tuple[int, int] | None]] = []
    for spec in rule.ports:
        if spec.protocol in PORT_PROTOCOLS or spec.port is None:
            pairs.extend(_port_ranges(spec, listener))
    return pairs


def _policy_rules(policy: Policy, world: _World) -> tuple[list[NetpolRule], list[str]]:
    """One policy's rules (isolation drops included) and what it cannot express."""
    out: list[NetpolRule] = []
    problems: list[str] = []
    targets = world.selected(policy)
    sides: tuple[tuple[Direction, tuple[RuleSpec, ...] | None], ...] = (("ingress", policy.ingress), ("egress", policy.egress))
    for direction, rules in sides:
        if rules is None:
            continue
        out += [NetpolRule(direction, ISOLATION_PRIORITY, t.ip, None, 0, None, "drop", f"{t.key}/{direction}/isolation") for t in targets]
        for index, rule in enumerate(rules):
            rule_id = f"{policy.key}/{direction}/{index}"
            if any(spec.protocol not in PORT_PROTOCOLS and spec.port is not None for spec in rule.ports or ()):
                problems.append(
                    f"NetworkPolicy {policy.key}: {direction}[{index}]: ports of protocol SCTP are not matched (TCP and UDP only); left out"
                )
            peers = _peer_prefixes(rule, policy, world)  # once per rule, not per target
            for target in targets:
                for prefix, peer_pod in peers:
                    for proto, ports in _port_pairs(rule, target if direction == "ingress" else peer_pod):
                        out.append(NetpolRule(direction, ALLOW_PRIORITY, target.ip, prefix, proto, ports, "allow", rule_id))
    return out, problems


class Compiler:
    """Policies over one set of pods and namespaces, remembering each policy's rules: while the
    pods and namespaces stay, a changed policy costs its own compile and the merge only (the
    leader keeps one per world; `compile_policies` is the one-shot form)."""

    def __init__(self, pods: Iterable[Pod], namespaces: Iterable[Namespace]):
        by_ns: dict[str, list[Pod]] = {}
        for pod in pods:
            if pod.ip:
                by_ns.setdefault(pod.namespace, []).append(pod)
        self.world = _World({ns: tuple(sorted(ps, key=lambda p: p.name)) for ns, ps in by_ns.items()}, tuple(namespaces))
        self._done: dict[Policy, tuple[list[NetpolRule], list[str]]] = {}

    def compile(self, policies: Iterable[Policy]) -> Compiled:
        """The datapath's rules, sorted and without duplicates (the same match from two
        policies is kept once, for the smaller rule_id), plus one drop per isolated pod and
        direction."""
        done: dict[Policy, tuple[list[NetpolRule], list[str]]] = {}
        chosen: dict[tuple[object, ...], NetpolRule] = {}
        problems: list[str] = []
        for policy in sorted(policies, key=lambda p: p.key):
            result = done[policy] = self._done.get(policy) or _policy_rules(policy, self.world)
            problems += result[1]
            for rule in result[0]:
                key = (rule.direction, rule.priority, rule.pod_ip, rule.peer, rule.proto, rule.ports)
                held = chosen.get(key)
                if held is None or rule.rule_id < held.rule_id:
                    chosen[key] = rule
        self._done = done  # policies gone are forgotten
        return Compiled(tuple(sorted(chosen.values(), key=NetpolRule.order)), tuple(dict.fromkeys(problems)))


def compile_policies(policies: Iterable[Policy], pods: Iterable[Pod], namespaces: Iterable[Namespace]) -> Compiled:
    """Every policy over the current pods and namespaces → the datapath's rules (`Compiler.compile`)."""
    return Compiler(pods, namespaces).compile(policies)


def _first(rules: Iterable[NetpolRule], src: int, dst: int, proto: int, dport: int) -> NetpolRule | None:
    hits = [r for r in rules if r.matches(src, dst, proto, dport)]
    return min(hits, key=lambda r: (-r.priority, r.rule_id)) if hits else None


def decide(compiled: Compiled, src: int, dst: int, proto: int, dport: int = 0, *, from_outside: bool = False) -> Decision:
    """What the datapath does to the first packet of a connection src → dst (proto, dport):
    the egress table then the ingress table, each the highest-priority matching rule (ties:
    the smaller rule_id, the one whose counter counts it). `from_outside`: src is no pod of the
    cluster, so only the destination's ingress judges it (at the destination's node)."""
    egress = None if from_outside else _first((r for r in compiled.rules if r.direction == "egress"), src, dst, proto, dport)
    if egress is not None and egress.action == "drop":
        return Decision(False, egress, None, (f"egress: drop by {egress.rule_id}", "ingress: not reached"))
    ingress = _first((r for r in compiled.rules if r.direction == "ingress"), src, dst, proto, dport)
    reasons = tuple(
        f"{name}: {'not isolated' if rule is None else f'{rule.action} by {rule.rule_id}'}"
        for name, rule in (("egress", egress), ("ingress", ingress))
    )
    return Decision(ingress is None or ingress.action == "allow", egress, ingress, reasons)


# ---------------------------------------------------------------------------------------------
# Tracing one packet (`contivd ctl trace SRC DST [PROTO/PORT]`)

TRACE_PROTOCOLS = {"tcp": 6, "udp": 17, "icmp": 1, "sctp": 132, "any": 0}


@dataclass(frozen=True)
class TraceQuery:
    """`SRC DST [PROTO[/PORT]]` as the route's path gives it: each end an IPv4 address, an
    endpoint id (both contain a dot) or a pod `namespace/name` (two segments: a namespace is a
    DNS label, without dots)."""

    src: str
    dst: str
    proto: int
    port: int


def parse_trace(spec: str) -> TraceQuery:
    """`198.18.0.2/prod/db/tcp/5432` → TraceQuery; ValidationError saying what is wrong."""
    parts = [p for p in spec.split("/") if p]
    ends: list[str] = []
    while parts and len(ends) < 2:
        if "." in parts[0] or len(parts) < 2:
            ends.append(parts.pop(0))
        else:
            ends.append(f"{parts.pop(0)}/{parts.pop(0)}")
    if len(ends) < 2:
        raise ValidationError("spec", f"trace {spec!r}: give SRC DST [PROTO/PORT], each end an IP, an endpoint id or namespace/name")
    proto_name = parts.pop(0).lower() if parts else "any"
    if proto_name not in TRACE_PROTOCOLS:
        raise ValidationError("spec", f"trace {spec!r}: protocol {proto_name!r} is not one of {', '.join(TRACE_PROTOCOLS)}")
    port_text = parts.pop(0) if parts else "0"
    if parts or not port_text.isdigit() or int(port_text) > 65535:
        raise ValidationError("spec", f"trace {spec!r}: the port {port_text!r} is not 0..65535 (or extra segments follow it)")
    return TraceQuery(ends[0], ends[1], TRACE_PROTOCOLS[proto_name], int(port_text))

"""The incremental flow engine: what a bridge holds, updated per changed owner (sans-I/O).

:class:`FlowState` remembers the inputs of its last update, indexed per owner (see
:mod:`openflow.owners`), and the flows and groups those owners built.  An update compares the
new inputs with the last ones owner by owner — record identity first (the agent reuses
unchanged record objects, so this is a C-speed comparison of ``id()`` maps), equality only
for the records whose identity changed — rebuilds just the changed owners and the networks
whose local ports changed, and returns the Plan of what that changed.  Building and
validating flows is therefore O(changed owners); only dict and set operations run over the
whole bridge.  A change of the bridge-wide :class:`~openflow.inputs.Fabric` (encapsulation,
tunnels, uplinks, cookie round) rebuilds everything and diffs it against what was held.

Not responsible for sending anything (contivd.agent.push does) nor for knowing what the
switch really holds: :meth:`FlowState.audit` compares with a from-scratch
:func:`openflow.desired`, :func:`switch_drift` with a dump of the switch's flows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Generic, TypeVar

from openflow._ofp import FlowRecord
from openflow.desired import desired
from openflow.diff import diff
from openflow.encode import record_match
from openflow.fields import ROUND_MASK
from openflow.flow import Flow, Group
from openflow.inputs import Fabric, LocalPort, NetpolPod, NetworkRef, NodeInputs, PolicyRuleSpec, RemoteEndpoint, Route, ServiceSpec
from openflow.owners import (
    Built,
    FlowKey,
    Ledger,
    Owner,
    all_owners,
    build_netpol,
    build_network,
    build_port,
    build_remote,
    build_route,
    build_rule,
    build_service,
    unique_ids,
)
from openflow.pipeline import TABLES, Tables
from openflow.plan import Desired, Plan

R = TypeVar("R")
K = TypeVar("K")
V = TypeVar("V")


class _Index(Generic[R]):
    """One kind of record of some inputs by id, with each record's identity (``id()``) for change detection.

    Holding the records keeps their ``id()`` values from being reused, so equal identity
    maps mean the very same objects."""

    def __init__(self, records: tuple[R, ...], key: Callable[[R], str], kind: str) -> None:
        self.records, self.key, self.kind = records, key, kind
        self.by_id = dict(zip(map(key, records), records, strict=True))
        if len(self.by_id) != len(records):
            unique_ids(kind, map(key, records))
        self.identity = dict(zip(self.by_id, map(id, self.by_id.values()), strict=True))

    def following(self, records: tuple[R, ...]) -> tuple[_Index[R], list[str]]:
        """The index of ``records`` and the ids added, removed or changed since this one (sorted)."""
        if records is self.records:
            return self, []
        new = _Index(records, self.key, self.kind)
        candidates = {name for name, _ in self.identity.items() ^ new.identity.items()}
        return new, sorted(name for name in candidates if self.by_id.get(name) != new.by_id.get(name))


@dataclass(frozen=True)
class _Snapshot:
    """The last inputs, per owner: what the next update compares with."""

    fabric: Fabric
    ports: _Index[LocalPort]
    remotes: _Index[RemoteEndpoint]
    rules: _Index[PolicyRuleSpec]
    services: _Index[ServiceSpec]
    netpol: _Index[NetpolPod]
    routes: _Index[Route]
    members: dict[NetworkRef, dict[str, int]]
    """Networks with local ports on this bridge -> endpoint id -> ofport (their flood buckets)."""

    @classmethod
    def of(cls, inputs: NodeInputs) -> _Snapshot:
        members: dict[NetworkRef, dict[str, int]] = {}
        for port in inputs.local_ports:
            if port.network.encap == inputs.encap:
                members.setdefault(port.network, {})[port.endpoint_id] = port.ofport
        return cls(
            inputs.fabric,
            _Index(inputs.local_ports, _PORT_ID, "local port"),
            _Index(inputs.remote_endpoints, _ENDPOINT_ID, "remote endpoint"),
            _Index(inputs.rules, _RULE_ID, "policy rule"),
            _Index(inputs.services, _SERVICE_ID, "service"),
            _Index(inputs.netpol, _NETPOL_POD, "NetworkPolicy pod"),
            _Index(inputs.routes, _ROUTE_ID, "route"),
            members,
        )


_PORT_ID: Callable[[LocalPort], str] = attrgetter("endpoint_id")
_ENDPOINT_ID: Callable[[RemoteEndpoint], str] = attrgetter("endpoint_id")
_RULE_ID: Callable[[PolicyRuleSpec], str] = attrgetter("rule_id")
_SERVICE_ID: Callable[[ServiceSpec], str] = attrgetter("service_id")
_NETPOL_POD: Callable[[NetpolPod], str] = attrgetter("pod")
_ROUTE_ID: Callable[[Route], str] = attrgetter("key")


@dataclass(frozen=True)
class Drift:
    """How what is held differs from what should be: counts of flows (by match) and groups (by id)."""

    missing_flows: int = 0
    extra_flows: int = 0
    different_flows: int = 0
    missing_groups: int = 0
    extra_groups: int = 0
    different_groups: int = 0

    @property
    def clean(self) -> bool:
        return not (
            self.missing_flows or self.extra_flows or self.different_flows or self.missing_groups or self.extra_groups or self.different_groups
        )


def _count(have: Mapping[K, V], want: Mapping[K, V]) -> tuple[int, int, int]:
    """(missing, extra, different) of ``have`` against ``want``."""
    missing = want.keys() - have.keys()
    extra = have.keys() - want.keys()
    different = sum(1 for key in want.keys() & have.keys() if have[key] != want[key])
    return len(missing), len(extra), different


class FlowState:
    """The flows and groups one bridge holds, kept equal to its inputs one changed owner at a time."""

    def __init__(self, tables: Tables = TABLES) -> None:
        self._tables = tables
        self._ledger = Ledger()
        self._last: _Snapshot | None = None
        self.last_update_full = False
        """Whether the last :meth:`update` rebuilt everything (first update, reset, fabric change)."""

    @property
    def needs_full_update(self) -> bool:
        """Nothing is held (new or reset): the next update adds everything."""
        return self._last is None

    def reset(self) -> None:
        """Forget everything held (the switch reconnected): the next update is full and adds everything."""
        self._ledger, self._last = Ledger(), None

    def update(self, inputs: NodeInputs) -> Plan:
        """Hold what ``inputs`` want; the Plan of what changed.  PipelineError (a collision, an id
        listed twice) leaves the state as it was."""
        last = self._last
        fabric = inputs.fabric
        if last is None or last.fabric != fabric:
            return self._rebuild(inputs)
        ports, changed_ports = last.ports.following(inputs.local_ports)
        remotes, changed_remotes = last.remotes.following(inputs.remote_endpoints)
        rules, changed_rules = last.rules.following(inputs.rules)
        services, changed_services = last.services.following(inputs.services)
        netpols, changed_netpols = last.netpol.following(inputs.netpol)
        routes, changed_routes = last.routes.following(inputs.routes)
        tables, round_, encap = self._tables, fabric.round, fabric.encap
        rebuilt: list[tuple[Owner, Built | None]] = []
        members = dict(last.members)  # copied per network before it changes
        copied: set[NetworkRef] = set()
        dirty: set[NetworkRef] = set()

        def member_list(net: NetworkRef) -> dict[str, int]:
            if net not in copied:
                members[net] = dict(members.get(net, ()))
                copied.add(net)
            dirty.add(net)
            return members[net]

        for name in changed_ports:
            old, new = last.ports.by_id.get(name), ports.by_id.get(name)
            old = old if old is not None and old.network.encap == encap else None
            new = new if new is not None and new.network.encap == encap else None
            if old is None and new is None:
                continue
            rebuilt.append((("port", name), None if new is None else build_port(tables, new, round_, fabric.host_port, fabric.routed)))
            if old is not None and new is not None and (old.network, old.ofport) == (new.network, new.ofport):
                continue  # same network and flood bucket
            if old is not None:
                del member_list(old.network)[name]
            if new is not None:
                member_list(new.network)[name] = new.ofport
        for net in sorted(dirty):
            ofports = members[net]
            if not ofports:
                del members[net]
            rebuilt.append((("network", net), build_network(tables, net, ofports.values(), fabric) if ofports else None))
        for name in changed_remotes:
            remote = remotes.by_id.get(name)
            live = remote is not None and remote.network.encap == encap
            rebuilt.append((("remote", name), build_remote(tables, remote, fabric) if remote is not None and live else None))
        for name in changed_rules:
            rule = rules.by_id.get(name)
            rebuilt.append((("rule", name), None if rule is None else build_rule(tables, rule, round_)))
        for name in changed_services:
            spec = services.by_id.get(name)
            rebuilt.append((("service", name), None if spec is None else build_service(tables, spec, round_, fabric.host_port)))
        for name in changed_netpols:
            pod = netpols.by_id.get(name)
            rebuilt.append((("netpol", name), None if pod is None else build_netpol(tables, pod, round_)))
        router = fabric.router if fabric.routed else None
        for name in changed_routes:
            route = routes.by_id.get(name)
            rebuilt.append((("route", name), None if route is None or router is None else build_route(tables, route, router, round_)))
        plan = self._ledger.change(rebuilt)
        self._last = _Snapshot(fabric, ports, remotes, rules, services, netpols, routes, members)
        self.last_update_full = False
        return plan

    def _rebuild(self, inputs: NodeInputs) -> Plan:
        ledger = Ledger.of(all_owners(self._tables, inputs))
        snapshot = _Snapshot.of(inputs)
        plan = diff(ledger.desired(), self._ledger.flows.values(), self._ledger.groups.values())
        self._ledger, self._last, self.last_update_full = ledger, snapshot, True
        return plan

    @property
    def installed(self) -> Desired:
        """Everything held, sorted as :func:`openflow.desired` returns it (O(n log n): metrics and audits only)."""
        return self._ledger.desired()

    @property
    def flow_count(self) -> int:
        return len(self._ledger.flows)

    @property
    def group_count(self) -> int:
        return len(self._ledger.groups)

    def flows_per_table(self) -> dict[int, int]:
        return dict(Counter(flow.table for flow in self._ledger.flows.values()))

    def held(self) -> Held:
        """A copy of what is held now, to audit while this state moves on (a worker thread may)."""
        return Held(dict(self._ledger.flows), dict(self._ledger.groups), self._tables)

    def audit(self, inputs: NodeInputs) -> Drift:
        """What is held against :func:`openflow.desired` of ``inputs`` computed from scratch."""
        return self.held().audit(inputs)

    def switch_drift(self, records: Iterable[FlowRecord]) -> Drift:
        """What is held against the switch's flows (see :meth:`Held.switch_drift`)."""
        return self.held().switch_drift(records)


@dataclass(frozen=True)
class Held:
    """The flows (by key) and groups (by id) a FlowState held at one moment.  Its audits are pure
    and take about a second of CPU at thousands of flows: the agent runs them in a worker thread
    while the bridge's state goes on changing."""

    flows: Mapping[FlowKey, Flow]
    groups: Mapping[int, Group]
    tables: Tables

    def audit(self, inputs: NodeInputs) -> Drift:
        """What was held against :func:`openflow.desired` of ``inputs`` computed from scratch."""
        want = desired(inputs, self.tables)
        flows = _count(self.flows, {f.key: f for f in want.flows})
        groups = _count(self.groups, {g.group_id: g for g in want.groups})
        return Drift(*flows, *groups)

    def switch_drift(self, records: Iterable[FlowRecord]) -> Drift:
        """What was held against the switch's flows (``SwitchConnection.dump_flows()``).

        Flows are compared by table, priority and match (in os-ken's form, as the dump
        carries them) and then by cookie; a flow whose actions alone differ is not seen,
        because OVS prints actions in its own normal form.  Flows the switch learned (session
        affinity: round 0 in a learned table) are not the agent's and are left out.  Groups are not dumped: 0."""
        learned = {table.id for table in self.tables.values() if table.spec.learned}
        have = {(r.table, r.priority, r.match): r.cookie for r in records if r.table not in learned or r.cookie & ROUND_MASK}
        return Drift(*_count(have, {_record_key(f): f.cookie for f in self.flows.values()}))


def _record_key(flow: Flow) -> tuple[int, int, tuple[tuple[str, object], ...]]:
    return flow.table, flow.priority, record_match(flow)

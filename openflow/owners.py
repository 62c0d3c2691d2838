"""Owners of flows and groups, and the ledger that merges what they build (pure).

Every flow and group of a bridge belongs to exactly one owner, built from that owner's record
alone (plus the round or the bridge's :class:`Fabric`), never from the whole NodeInputs:

* the pipeline: table-miss flows and the conntrack/service base flows;
* a local port: classifier, spoof guard, ARP reply, destination EPG, DSCP, unicast forward,
  and the service_lb flow that sends what comes from outside the cluster to it to np_ingress;
* a remote endpoint: ARP reply, destination EPG, forward (when its tunnel/uplink exists), and
  the uplink's classifier flow that tells its packets from outside hosts' (VLAN, routing mode);
* a network with local ports on this bridge: tunnel/uplink classifier flows, gateway ARP,
  flood flows and the two flood groups, whose buckets list the network's local ports;
* a policy rule: its one flow;
* a pod's Kubernetes NetworkPolicy rules (those whose pod end it is): their flows;
* the router (routing mode): the uplink's and the router port's flows, rebuilt with the Fabric
  that carries it;
* a learned route (routing mode): its one flow;
* a service: VIP ARP reply, VIP flows, one select group per service port, and the host port's
  classifier flow to the VIP when the node enters it (NodePort; the Fabric carries the host port).

The :class:`Ledger` records each owner's build and decides which flow is installed for each
match: rules with the same match resolve by :func:`openflow.flows.policy.rank` (deny, then
smaller cookie), two other owners with different flows for one match are a PipelineError,
as are two different groups with one id.  Replacing some owners' builds yields the Plan of
just the flows and groups that changed, so its cost follows the owners changed, not the
bridge's size.  docs/pipeline.md ("Owners") describes the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from openflow.flow import Flow, Group, PipelineError, key_order, sort_flows
from openflow.flows import arp, base, classifier, dstepg, forward, netpol, policy, qos, routing, service, spoofguard
from openflow.inputs import (
    ANYCAST_MAC,
    Fabric,
    HostPort,
    LocalPort,
    NetpolPod,
    NetworkRef,
    NodeInputs,
    PolicyRuleSpec,
    RemoteEndpoint,
    Route,
    Router,
    ServiceSpec,
)
from openflow.pipeline import Tables
from openflow.plan import Desired, Plan

Owner = tuple[str, str | NetworkRef]
"""("pipeline", ""), ("port", endpoint id), ("remote", endpoint id), ("network", NetworkRef),
("rule", rule id), ("service", service id), ("netpol", pod), ("router", "") or ("route", prefix) (routing mode)."""
FlowKey = tuple[int, int, tuple[tuple[str, int, int | None], ...]]

PIPELINE: Owner = ("pipeline", "")
ROUTER: Owner = ("router", "")
RULE = "rule"


@dataclass(frozen=True)
class Built:
    """What one owner contributes to the bridge."""

    flows: tuple[Flow, ...] = ()
    groups: tuple[Group, ...] = ()


def build_pipeline(tables: Tables, round_: int) -> Built:
    return Built((*base.pipeline_flows(tables, round_), *service.pipeline_flows(tables, round_), *netpol.pipeline_flows(tables, round_)))


def build_port(tables: Tables, port: LocalPort, round_: int, host: HostPort | None = None, routed: bool = False) -> Built:
    """``routed``: routing mode, the port's /32 is also delivered from the anycast MAC."""
    return Built(
        (
            *classifier.port_flows(tables, port, round_),
            *classifier.host_flows(tables, port, host, round_),
            *spoofguard.port_flows(tables, port, round_),
            *arp.endpoint_flows(tables, port, round_),
            *dstepg.endpoint_flows(tables, port, round_),
            *qos.port_flows(tables, port, round_),
            *forward.port_flows(tables, port, round_),
            *netpol.port_flows(tables, port, round_),
            *(routing.port_flows(tables, port, round_) if routed else ()),
        )
    )


def build_remote(tables: Tables, remote: RemoteEndpoint, fabric: Fabric) -> Built:
    return Built(
        (
            *classifier.remote_flows(tables, remote, fabric),
            *arp.endpoint_flows(tables, remote, fabric.round, ANYCAST_MAC if fabric.routed else None),
            *dstepg.endpoint_flows(tables, remote, fabric.round),
            *forward.remote_flows(tables, remote, fabric),
        )
    )


def build_network(tables: Tables, net: NetworkRef, ofports: Iterable[int], fabric: Fabric) -> Built:
    """``ofports``: the network's local ports on this bridge (its flood buckets)."""
    flows = (
        *classifier.network_flows(tables, net, fabric),
        *arp.network_flows(tables, net, fabric),
        *forward.network_flows(tables, net, fabric.round, fabric),
    )
    return Built(flows, tuple(forward.network_groups(tables, net, ofports, fabric)))


def build_route(tables: Tables, route: Route, router: Router, round_: int) -> Built:
    """A learned route's flow (routing mode only)."""
    return Built((routing.route_flow(tables, route, router, round_),))


def build_rule(tables: Tables, rule: PolicyRuleSpec, round_: int) -> Built:
    return Built((policy.rule_flow(tables["policy"], rule, round_),))


def build_service(tables: Tables, spec: ServiceSpec, round_: int, host: HostPort | None = None) -> Built:
    flows = (*service.service_flows(tables, spec, round_), *classifier.host_service_flows(tables, spec, host, round_))
    return Built(flows, tuple(service.service_groups(tables, spec)))


def build_netpol(tables: Tables, pod: NetpolPod, round_: int) -> Built:
    return Built(tuple(netpol.pod_flows(tables, pod, round_)))


def unique_ids(kind: str, ids: Iterable[str]) -> None:
    """PipelineError naming the first id listed twice (owners are indexed by id)."""
    seen: set[str] = set()
    for one in ids:
        if one in seen:
            raise PipelineError(f"{kind} {one} is listed twice")
        seen.add(one)


def all_owners(tables: Tables, inputs: NodeInputs) -> Iterator[tuple[Owner, Built]]:
    """Every owner of ``inputs`` with its build (a full rebuild; the incremental engine builds owners one by one)."""
    fabric = inputs.fabric
    ports = [p for p in inputs.local_ports if p.network.encap == inputs.encap]
    remotes = [r for r in inputs.remote_endpoints if r.network.encap == inputs.encap]
    unique_ids("local port", (p.endpoint_id for p in inputs.local_ports))
    unique_ids("remote endpoint", (r.endpoint_id for r in inputs.remote_endpoints))
    unique_ids("policy rule", (r.rule_id for r in inputs.rules))
    unique_ids("service", (s.service_id for s in inputs.services))
    unique_ids("NetworkPolicy pod", (p.pod for p in inputs.netpol))
    yield PIPELINE, build_pipeline(tables, inputs.round)
    unique_ids("route", (r.key for r in inputs.routes))
    if fabric.router is not None and fabric.routed:
        yield ROUTER, Built(tuple(routing.router_flows(tables, fabric.router, inputs.round)))
        for route in inputs.routes:
            yield ("route", route.key), build_route(tables, route, fabric.router, inputs.round)
    members: dict[NetworkRef, list[int]] = {}
    for port in ports:
        members.setdefault(port.network, []).append(port.ofport)
        yield ("port", port.endpoint_id), build_port(tables, port, inputs.round, fabric.host_port, fabric.routed)
    for remote in remotes:
        yield ("remote", remote.endpoint_id), build_remote(tables, remote, fabric)
    for net, ofports in members.items():
        yield ("network", net), build_network(tables, net, ofports, fabric)
    for rule in inputs.rules:
        yield (RULE, rule.rule_id), build_rule(tables, rule, inputs.round)
    for spec in inputs.services:
        yield ("service", spec.service_id), build_service(tables, spec, inputs.round, fabric.host_port)
    for pod in inputs.netpol:
        yield ("netpol", pod.pod), build_netpol(tables, pod, inputs.round)


def _describe(owner: Owner) -> str:
    kind, name = owner
    return f"{kind} {name.net_id if isinstance(name, NetworkRef) else name}".rstrip()


def _winner_flow(claims: Mapping[Owner, Flow]) -> Flow:
    flows = list(claims.values())
    if len(flows) == 1:
        return flows[0]
    if all(owner[0] == RULE for owner in claims):
        return min(flows, key=policy.rank)
    if len(set(flows)) == 1:
        return flows[0]
    (a_owner, a), (b_owner, b) = sorted(claims.items(), key=lambda item: item[1])[:2]
    if a == b:
        b_owner, b = next((o, f) for o, f in claims.items() if f != a)
    raise PipelineError(f"two flows with one match in table {a.table} priority {a.priority}: {a} ({_describe(a_owner)}) / {b} ({_describe(b_owner)})")


def _winner_group(group_id: int, claims: Mapping[Owner, Group]) -> Group:
    groups = list(claims.values())
    if len(groups) > 1 and len(set(groups)) > 1:
        owners = ", ".join(sorted(_describe(o) for o in claims))
        raise PipelineError(f"group id {group_id:#x} is claimed by two objects ({owners})")
    return groups[0]


@dataclass
class _Staged:
    """A change worked out but not yet made: the new builds, and the claims and winners of every
    flow match and group id the change touches (None: nothing installed there any more)."""

    builds: dict[Owner, Built | None]
    flow_claims: dict[FlowKey, dict[Owner, Flow]]
    group_claims: dict[int, dict[Owner, Group]]
    flows: dict[FlowKey, Flow | None]
    groups: dict[int, Group | None]


class Ledger:
    """Each owner's build and, per flow match and group id, what is installed (mutable, pure)."""

    def __init__(self) -> None:
        self.built: dict[Owner, Built] = {}
        self.flows: dict[FlowKey, Flow] = {}
        self.groups: dict[int, Group] = {}
        self._flow_claims: dict[FlowKey, dict[Owner, Flow]] = {}
        self._group_claims: dict[int, dict[Owner, Group]] = {}

    @classmethod
    def of(cls, builds: Iterable[tuple[Owner, Built]]) -> Ledger:
        """A ledger holding ``builds`` (a full build: no plan is made)."""
        ledger = cls()
        ledger._commit(ledger._stage(builds))
        return ledger

    def desired(self) -> Desired:
        """What is installed, sorted like :func:`openflow.desired` returns it."""
        return Desired(tuple(sort_flows(self.flows.values())), tuple(sorted(self.groups.values())))

    def change(self, rebuilt: Iterable[tuple[Owner, Built | None]]) -> Plan:
        """Replace the builds of the given owners (None: the owner is gone) and return what changed.

        All or nothing: a PipelineError (a collision) leaves the ledger as it was."""
        staged = self._stage(rebuilt)
        plan = self._plan(staged)
        self._commit(staged)
        return plan

    def _stage(self, rebuilt: Iterable[tuple[Owner, Built | None]]) -> _Staged:
        flow_claims: dict[FlowKey, dict[Owner, Flow]] = {}
        group_claims: dict[int, dict[Owner, Group]] = {}
        builds: dict[Owner, Built | None] = {}
        for owner, new in rebuilt:
            old = builds[owner] if owner in builds else self.built.get(owner)
            builds[owner] = new
            for flow in () if old is None else old.flows:
                _staged(flow_claims, self._flow_claims, flow.key).pop(owner, None)
            for group in () if old is None else old.groups:
                _staged(group_claims, self._group_claims, group.group_id).pop(owner, None)
            for flow in () if new is None else new.flows:
                claims = _staged(flow_claims, self._flow_claims, flow.key)
                held = claims.setdefault(owner, flow)
                if held is not flow and held != flow:
                    raise PipelineError(f"{_describe(owner)} builds two flows with one match: {held} / {flow}")
            for group in () if new is None else new.groups:
                held_group = _staged(group_claims, self._group_claims, group.group_id).setdefault(owner, group)
                if held_group is not group and held_group != group:
                    raise PipelineError(f"{_describe(owner)} builds group id {group.group_id:#x} twice")
        group_winners = {gid: _winner_group(gid, claims) if claims else None for gid, claims in sorted(group_claims.items())}
        return _Staged(builds, flow_claims, group_claims, _winners(flow_claims), group_winners)

    def _plan(self, staged: _Staged) -> Plan:
        have, have_groups = self.flows, self.groups
        add_flows = [f for k, f in staged.flows.items() if f is not None and (old := have.get(k)) is not f and old != f]
        delete_flows = [have[k] for k, f in staged.flows.items() if f is None and k in have]
        add_groups = [g for i, g in staged.groups.items() if g is not None and i not in have_groups]
        modify_groups = [g for i, g in staged.groups.items() if g is not None and i in have_groups and have_groups[i] != g]
        delete_groups = [have_groups[i] for i, g in staged.groups.items() if g is None and i in have_groups]
        return Plan(
            add_groups=tuple(add_groups),
            modify_groups=tuple(modify_groups),
            add_flows=tuple(sort_flows(add_flows)),
            delete_flows=tuple(sort_flows(delete_flows)),
            delete_groups=tuple(delete_groups),
        )

    def _commit(self, staged: _Staged) -> None:
        for owner, build in staged.builds.items():
            if build is None:
                self.built.pop(owner, None)
            else:
                self.built[owner] = build
        for key, flow in staged.flows.items():
            if flow is None:
                self._flow_claims.pop(key, None)
                self.flows.pop(key, None)
            else:
                self._flow_claims[key] = staged.flow_claims[key]
                self.flows[key] = flow
        for gid, group in staged.groups.items():
            if group is None:
                self._group_claims.pop(gid, None)
                self.groups.pop(gid, None)
            else:
                self._group_claims[gid] = staged.group_claims[gid]
                self.groups[gid] = group


_K = TypeVar("_K")
_T = TypeVar("_T")


def _staged(staging: dict[_K, dict[Owner, _T]], held: Mapping[_K, dict[Owner, _T]], key: _K) -> dict[Owner, _T]:
    """The claims on ``key`` being changed: a copy of the held ones, made on first touch."""
    claims = staging.get(key)
    if claims is None:
        current = held.get(key)
        claims = staging[key] = {} if current is None else dict(current)
    return claims


def _winners(flow_claims: Mapping[FlowKey, Mapping[Owner, Flow]]) -> dict[FlowKey, Flow | None]:
    """The installed flow of each staged match; on collisions the error names the first match in sort order."""
    winners: dict[FlowKey, Flow | None] = {}
    errors: dict[FlowKey, PipelineError] = {}
    for key, claims in flow_claims.items():
        if len(claims) == 1:
            winners[key] = next(iter(claims.values()))
            continue
        try:
            winners[key] = _winner_flow(claims) if claims else None
        except PipelineError as error:
            errors[key] = error
    if errors:
        raise errors[min(errors, key=key_order)]
    return winners

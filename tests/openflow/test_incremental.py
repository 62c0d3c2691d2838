"""The incremental flow engine: per-owner builds merge into desired(), updates send only what changed."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from functools import cache
from typing import Any, Literal, cast

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import fastpath
from contivd.agent.push import Audit, Pusher
from openflow import Controller, SwitchConnection
from openflow._ofp import FlowRecord
from openflow.desired import Desired, desired
from openflow.encode import record_match
from openflow.fields import OBJECT_MASK, Category, group_id, object_id
from openflow.flow import Flow, Group, PipelineError
from openflow.flows import arp, base, classifier, dstepg, forward, netpol, policy, qos, service, spoofguard
from openflow.incremental import Drift, FlowState
from openflow.inputs import (
    Backend,
    LocalPort,
    NetpolPod,
    NetpolRule,
    NetworkRef,
    NodeInputs,
    PolicyRuleSpec,
    RemoteEndpoint,
    ServicePort,
    ServiceSpec,
    TunnelPort,
)
from openflow.pipeline import TABLES
from tests.openflow.ovs_fixture import Ovs, fixture_ovs, fixture_ovs_instance  # noqa: F401  (pytest fixtures)
from tests.support.fakeswitch import FakeSwitch

VTEPS = (0xC613FE02, 0xC613FE03)
TUNNELS = (TunnelPort(7, VTEPS[0]), TunnelPort(8, VTEPS[1]))
UPLINKS = (8, 9)
GATEWAY = 0xC6130AFE
OVS_TIMEOUT_S = 15


# Records come from cached factories, so an unchanged record is the same object from one
# NodeInputs to the next (as the agent will hand them over); the "copy" operation makes
# equal records that are not identical.


@cache
def network(name: str, gateway: bool) -> NetworkRef:
    if name == "red":
        return NetworkRef("red", "vlan", 300, 0, GATEWAY if gateway else 0)
    tag = {"blue": 1, "green": 2}[name]
    return NetworkRef(name, "vxlan", tag, 100 * tag, GATEWAY if gateway else 0)


@cache
def local_port(index: int, net: str, gateway: bool, variant: int) -> LocalPort:
    """variant 0/1: EPG 5 / EPG 6 with DSCP; 2: another ofport; 3: the next port's ofport (a clash)."""
    ofport = {2: 40 + index, 3: 11 + index}.get(variant, 10 + index)
    return LocalPort(ofport, f"p{index}", 0xC6130A00 + index, 0x020200000000 + index, network(net, gateway), 5 + (variant == 1), 46 * (variant == 1))


@cache
def remote(index: int, net: str, gateway: bool, vtep: int) -> RemoteEndpoint:
    ref = network(net, gateway)
    return RemoteEndpoint(f"r{index}", 0xC6130B00 + index, 0x020300000000 + index, ref, 5, 0 if ref.encap == "vlan" else VTEPS[vtep])


@cache
def rule(index: int, variant: int) -> PolicyRuleSpec:
    """A small space of matches, so rules collide often (same match: deny wins, then the smaller cookie);
    variants 4 and 5 match one source address exactly and as a /24 (sorting must cope)."""
    action: Literal["allow", "deny"] = "deny" if variant in (2, 3) else "allow"
    source = {4: (0xC6130B00, 32), 5: (0xC6130B00, 24)}.get(variant)
    return PolicyRuleSpec(f"rule{index}", 1 + index % 2, action, src_epg=5 if variant in (1, 3) else 0, src_ip=source, proto=6, dst_port=80)


@cache
def service_spec(index: int, variant: int) -> ServiceSpec:
    providers = ((), (0xC6130A02,), (0xC6130A02, 0xC6130A03))[min(variant, 2)]
    ports = (ServicePort(6, 80, tuple(Backend(ip, 8080) for ip in providers)),)
    if variant == 2:
        ports += (ServicePort(17, 53, tuple(Backend(ip, 53) for ip in providers)),)
    affinity = 600 if variant == 3 else 0
    return ServiceSpec(f"s{index}", 0xC6135A00 + index, ports, affinity)


@cache
def netpol_pod(index: int, variant: int) -> NetpolPod:
    """A pod's NetworkPolicy rules: ingress isolation (0), + an allow on a port range (1),
    egress isolation with an allow to a /24 (2), both directions (3)."""
    ip = 0xC6130B00 + index
    ingress = (
        NetpolRule("ingress", 100, ip, None, 0, None, "drop", f"ns/p{index}/ingress/isolation"),
        NetpolRule("ingress", 200, ip, (0xC6130C00, 32), 6, (8000, 8100), "allow", "ns/np/ingress/0"),
    )
    egress = (
        NetpolRule("egress", 100, ip, None, 0, None, "drop", f"ns/p{index}/egress/isolation"),
        NetpolRule("egress", 200, ip, (0xC6135A00, 24), 17, None, "allow", "ns/np/egress/0"),
    )
    rules = {0: ingress[:1], 1: ingress, 2: egress, 3: ingress + egress}[variant]
    return NetpolPod(f"ns/p{index}", rules)


@dataclasses.dataclass(frozen=True)
class World:
    """What a node's store says, in a form that operations change one piece at a time."""

    encap: str = "vxlan"
    gateway: bool = False
    ports: tuple[tuple[int, str, int], ...] = ()  # (index, network, variant), sorted by index
    remotes: tuple[tuple[int, str, int], ...] = ()  # (index, network, vtep)
    rules: tuple[tuple[int, int], ...] = ()
    services: tuple[tuple[int, int], ...] = ()
    netpols: tuple[tuple[int, int], ...] = ()
    tunnels: tuple[int, ...] = (0,)
    uplinks: tuple[int, ...] = (0,)
    round: int = 1
    copies: bool = False

    def inputs(self) -> NodeInputs:
        def fresh(record: Any) -> Any:
            return dataclasses.replace(record) if self.copies else record

        return NodeInputs(
            "vlan" if self.encap == "vlan" else "vxlan",
            tuple(fresh(local_port(i, net, self.gateway, v)) for i, net, v in self.ports),
            tuple(fresh(remote(i, net, self.gateway, vtep)) for i, net, vtep in self.remotes),
            tuple(TUNNELS[t] for t in self.tunnels),
            tuple(UPLINKS[u] for u in self.uplinks),
            tuple(fresh(rule(i, v)) for i, v in self.rules),
            tuple(fresh(service_spec(i, v)) for i, v in self.services),
            self.round,
            netpol=tuple(fresh(netpol_pod(i, v)) for i, v in self.netpols),
        )


def _set(items: tuple[Any, ...], index: int, value: Any) -> tuple[Any, ...]:
    """``items`` with the entry of ``index`` replaced by ``value`` (removed when None), sorted by index."""
    kept = [item for item in items if item[0] != index]
    return tuple(sorted(kept + ([value] if value is not None else [])))


NETS = st.sampled_from(("blue", "green", "red"))
OPERATIONS = st.one_of(
    st.tuples(st.just("port"), st.integers(0, 7), st.none() | st.tuples(NETS, st.integers(0, 3))),
    st.tuples(st.just("remote"), st.integers(0, 5), st.none() | st.tuples(NETS, st.integers(0, 1))),
    st.tuples(st.just("rule"), st.integers(0, 5), st.none() | st.integers(0, 5)),
    st.tuples(st.just("service"), st.integers(0, 2), st.none() | st.integers(0, 2)),
    st.tuples(st.just("netpol"), st.integers(0, 3), st.none() | st.integers(0, 3)),
    st.tuples(st.just("tunnels"), st.sampled_from(((), (0,), (1,), (0, 1)))),
    st.tuples(st.just("uplinks"), st.sampled_from(((), (0,), (1, 0)))),
    st.tuples(st.just("round"), st.integers(1, 3)),
    st.tuples(st.just("gateway"), st.booleans()),
    st.tuples(st.just("encap"), st.sampled_from(("vxlan", "vlan"))),
    st.tuples(st.just("copies"), st.booleans()),
)


def apply(world: World, op: tuple[Any, ...]) -> World:
    kind = op[0]
    changes: dict[str, Any]
    if kind == "world":
        return cast(World, op[1])
    if kind in ("port", "remote"):
        field = "ports" if kind == "port" else "remotes"
        changes = {field: _set(getattr(world, field), op[1], None if op[2] is None else (op[1], *op[2]))}
    elif kind in ("rule", "service", "netpol"):
        field = kind + "s"
        changes = {field: _set(getattr(world, field), op[1], None if op[2] is None else (op[1], op[2]))}
    else:
        changes = {kind: op[1]}
    return dataclasses.replace(world, **changes)


def _entries(values: st.SearchStrategy[Any], indexes: int) -> st.SearchStrategy[tuple[Any, ...]]:
    """Sorted (index, *value) entries with distinct indexes."""
    flat = st.dictionaries(st.integers(0, indexes - 1), values)
    return flat.map(lambda d: tuple(sorted((i, *(v if isinstance(v, tuple) else (v,))) for i, v in d.items())))


WORLDS = st.builds(
    World,
    encap=st.sampled_from(("vxlan", "vxlan", "vlan")),
    gateway=st.booleans(),
    ports=_entries(st.tuples(NETS, st.integers(0, 3)), 8),
    remotes=_entries(st.tuples(NETS, st.integers(0, 1)), 6),
    rules=_entries(st.integers(0, 5), 6),
    services=_entries(st.integers(0, 3), 3),
    netpols=_entries(st.integers(0, 3), 4),
    tunnels=st.sampled_from(((), (0,), (1,), (0, 1))),
    uplinks=st.sampled_from(((), (0,), (1, 0))),
    round=st.integers(1, 3),
)


def by_feature(inputs: NodeInputs) -> Desired:
    """The other way to compose the same builders: each feature over the whole inputs, then merged."""
    features = (base, classifier, spoofguard, arp, service, dstepg, policy, netpol, qos, forward)
    flows: dict[object, Flow] = {}
    for flow in sorted(f for feature in features for f in feature.flows(TABLES, inputs)):
        if flows.setdefault(flow.key, flow) != flow:
            raise PipelineError(f"two flows with one match: {flow}")
    groups: dict[int, Group] = {}
    for group in sorted(g for feature in (service, forward) for g in feature.groups(TABLES, inputs)):
        if groups.setdefault(group.group_id, group) != group:
            raise PipelineError(f"group id {group.group_id:#x} twice")
    return Desired(tuple(flows.values()), tuple(groups.values()))


@settings(max_examples=300, deadline=None)
@given(WORLDS)
def test_desired_is_the_union_of_the_per_owner_builds(world: World) -> None:
    inputs = world.inputs()
    try:
        expected = by_feature(inputs)
    except PipelineError:
        with pytest.raises(PipelineError):
            desired(inputs)
        return
    assert desired(inputs) == expected


def _switch_holds(switch: FakeSwitch, want: Desired) -> None:
    assert switch.flows == {f.key: f for f in want.flows}
    assert switch.groups == {g.group_id: g for g in want.groups}


@settings(max_examples=200, deadline=None)
@given(WORLDS, st.lists(OPERATIONS, min_size=1, max_size=40))
def test_every_plan_applied_to_a_switch_leaves_it_holding_desired(start: World, ops: list[tuple[Any, ...]]) -> None:
    engine, switch, world = FlowState(), FakeSwitch(), World()
    for op in [("world", start), *ops]:
        candidate = apply(world, op)
        inputs = candidate.inputs()
        try:
            want = desired(inputs)
        except PipelineError:
            held = engine.installed
            with pytest.raises(PipelineError):
                engine.update(inputs)
            assert engine.installed == held  # nothing half-applied; the world stays as it was
            continue
        switch.apply(engine.update(inputs))  # the fake refuses dangling groups and misplaced group commands
        _switch_holds(switch, want)
        world = candidate
    assert engine.installed == desired(world.inputs())
    assert engine.audit(world.inputs()).clean


# Exact plans on a node with 250 ports --------------------------------------------------------

BLUE = network("blue", False)
FLOOD = sorted((group_id(Category.FLOOD, "all:blue"), group_id(Category.FLOOD, "local:blue")))
PORT_FLOWS = 7  # classifier, 2 spoof guard, ARP, dst EPG, forward, from outside (service_lb) (+1 DSCP when its EPG has one)


def node(ports: int, extra: tuple[LocalPort, ...] = ()) -> NodeInputs:
    return NodeInputs(
        "vxlan",
        tuple(local_port(i, "blue", False, 0) for i in range(ports)) + extra,
        tuple(remote(i, "blue", False, i % 2) for i in range(20)),
        TUNNELS,
        rules=(rule(0, 0), rule(1, 3)),
        services=(service_spec(0, 2),),
        round=1,
    )


def _objects(flows: Sequence[Flow]) -> set[int]:
    return {f.cookie & OBJECT_MASK for f in flows}


def test_attach_and_detach_on_250_ports_send_the_endpoints_flows_and_two_group_modifications() -> None:
    engine = FlowState()
    engine.update(node(250))
    newcomer = local_port(250, "blue", False, 1)  # with a DSCP: one more flow
    attach = engine.update(node(250, (newcomer,)))
    assert not engine.last_update_full
    assert len(attach.add_flows) == PORT_FLOWS + 1 and _objects(attach.add_flows) == {object_id("p250")}
    assert [g.group_id for g in attach.modify_groups] == FLOOD
    assert sorted(len(g.buckets) for g in attach.modify_groups) == [251, 251 + len(TUNNELS)]  # local, all
    assert not (attach.add_groups or attach.delete_flows or attach.delete_groups)

    detach = engine.update(node(250))
    assert len(detach.delete_flows) == PORT_FLOWS + 1 and _objects(detach.delete_flows) == {object_id("p250")}
    assert [g.group_id for g in detach.modify_groups] == FLOOD
    assert not (detach.add_flows or detach.add_groups or detach.delete_groups)
    assert engine.installed == desired(node(250))


def test_first_port_of_a_network_brings_its_network_flows_and_groups() -> None:
    engine = FlowState()
    engine.update(node(3))
    plan = engine.update(node(3, (local_port(9, "green", True, 0),)))
    network_flows = len(TUNNELS) + 1 + 2  # tunnel classifiers, gateway ARP, two flood flows
    assert len(plan.add_flows) == PORT_FLOWS + network_flows
    assert len(plan.add_groups) == 2 and not plan.modify_groups


def test_a_rule_change_sends_only_the_flow_of_its_match() -> None:
    engine = FlowState()
    engine.update(node(250))
    allow, deny = rule(4, 0), rule(2, 2)  # the match and priority of rule(0, 0)
    assert allow.priority == deny.priority == rule(0, 0).priority
    inputs = node(250)
    with_deny = engine.update(dataclasses.replace(inputs, rules=(*inputs.rules, deny)))
    assert [f.goto for f in with_deny.add_flows] == [None] and not with_deny.delete_flows  # replaces the allow
    with_both = engine.update(dataclasses.replace(inputs, rules=(*inputs.rules, deny, allow)))
    assert with_both.empty  # the new allow loses to the deny
    without_deny = engine.update(dataclasses.replace(inputs, rules=(*inputs.rules, allow)))
    winner = min((policy.rule_flow(TABLES["policy"], r, 1) for r in (rule(0, 0), allow)), key=policy.rank)
    assert without_deny.add_flows == (winner,) and not without_deny.delete_flows


def test_a_service_provider_change_modifies_only_its_groups() -> None:
    engine = FlowState()
    engine.update(node(250))
    plan = engine.update(dataclasses.replace(node(250), services=(service_spec(0, 1),)))
    assert [g.type for g in plan.modify_groups] == ["select"]  # the TCP port's group
    assert len(plan.delete_groups) == 1 and len(plan.delete_flows) == 1  # the UDP port is gone
    assert not (plan.add_flows or plan.add_groups)


def test_a_tunnel_change_rebuilds_everything_and_diffs_it() -> None:
    engine = FlowState()
    engine.update(node(10))
    plan = engine.update(dataclasses.replace(node(10), tunnels=TUNNELS[:1]))
    assert engine.last_update_full
    assert engine.installed == desired(dataclasses.replace(node(10), tunnels=TUNNELS[:1]))
    assert plan.delete_flows and plan.modify_groups


def test_reset_makes_the_next_update_add_everything() -> None:
    engine = FlowState()
    engine.update(node(5))
    engine.reset()
    plan = engine.update(node(5))
    want = desired(node(5))
    assert (plan.add_flows, plan.add_groups) == (want.flows, want.groups) and not plan.delete_flows


def test_duplicate_ids_are_rejected_by_name() -> None:
    twice = node(2, (dataclasses.replace(local_port(0, "blue", False, 0), ofport=99),))
    with pytest.raises(PipelineError, match="local port p0 is listed twice"):
        FlowState().update(twice)


def test_audit_counts_what_differs_from_the_inputs() -> None:
    engine = FlowState()
    engine.update(node(5))
    drift = engine.audit(node(5, (local_port(5, "blue", False, 0),)))
    assert (drift.missing_flows, drift.extra_flows, drift.different_flows, drift.different_groups) == (PORT_FLOWS, 0, 0, 2)


def test_switch_drift_compares_matches_and_cookies() -> None:
    engine = FlowState()
    engine.update(node(2))
    flows = engine.installed.flows
    records = [FlowRecord(f.table, f.priority, f.cookie, record_match(f), ()) for f in flows]
    assert engine.switch_drift(records).clean
    changed = dataclasses.replace(records[0], cookie=records[0].cookie ^ 1)
    drift = engine.switch_drift([changed, *records[2:], dataclasses.replace(records[1], priority=9999)])
    assert (drift.missing_flows, drift.extra_flows, drift.different_flows) == (1, 1, 1)


# The Pusher, counting what it really sends --------------------------------------------------

OFPT_EXPERIMENTER, OFPT_FLOW_MOD, OFPT_GROUP_MOD = 4, 14, 15
ONF_BUNDLE_ADD = 2301
OFPGC_MODIFY = 1
OFPFC_DELETE = 3


class RecordingSwitch:
    """Stands in for a SwitchConnection: records each FLOW_MOD (command, cookie) and GROUP_MOD (command, id) sent."""

    closed = False

    def __init__(self) -> None:
        self.flow_mods: list[tuple[int, int]] = []
        self.group_mods: list[tuple[int, int]] = []
        self.bundles = 0

    async def dump_flows(self) -> list[FlowRecord]:
        return []

    async def dump_flow_messages(self) -> tuple[bytes, ...]:
        return ()

    async def send_flow_mods(self, encoded: fastpath.Messages | bytes) -> None:
        for message in fastpath.split_messages(encoded.data if isinstance(encoded, fastpath.Messages) else encoded):
            self._record(message)

    async def send_bundle(self, encoded: fastpath.Messages) -> None:
        self.bundles += 1
        for message in fastpath.split_messages(encoded.data):
            if message[1] == OFPT_EXPERIMENTER and struct.unpack_from("!I", message, 12)[0] == ONF_BUNDLE_ADD:
                self._record(message[24:])

    def _record(self, message: bytes) -> None:
        if message[1] == OFPT_FLOW_MOD:
            (cookie,) = struct.unpack_from("!Q", message, 8)
            self.flow_mods.append((message[25], cookie))
        elif message[1] == OFPT_GROUP_MOD:
            command, _, _, gid = struct.unpack_from("!HBBI", message, 8)
            self.group_mods.append((command, gid))

    def clear(self) -> None:
        self.flow_mods, self.group_mods, self.bundles = [], [], 0


async def test_pusher_sends_one_endpoints_flow_mods_in_one_bundle() -> None:
    switch, pusher = RecordingSwitch(), Pusher()
    await pusher.attach(cast(SwitchConnection, switch))
    await pusher.push(node(250))
    assert pusher.statistics().full_pushes == 1
    assert pusher.statistics().last_flow_mods == len(desired(node(250)).flows) == len(switch.flow_mods)
    newcomer = local_port(250, "blue", False, 0)
    switch.clear()
    await pusher.push(node(250, (newcomer,)))
    assert switch.bundles == 1
    assert [command for command, _ in switch.flow_mods] == [fastpath.Command.ADD] * PORT_FLOWS
    assert {cookie & OBJECT_MASK for _, cookie in switch.flow_mods} == {object_id("p250")}
    assert switch.group_mods == [(OFPGC_MODIFY, gid) for gid in FLOOD]
    switch.clear()
    await pusher.push(node(250))
    assert [command for command, _ in switch.flow_mods] == [fastpath.Command.DELETE_STRICT] * PORT_FLOWS
    assert switch.group_mods == [(OFPGC_MODIFY, gid) for gid in FLOOD]
    stats = pusher.statistics()
    assert (stats.pushes, stats.full_pushes, stats.incremental_pushes, stats.last_flow_mods, stats.last_group_mods) == (3, 1, 2, PORT_FLOWS, 2)
    assert stats.flow_mods == len(desired(node(250)).flows) + 2 * PORT_FLOWS
    assert (await pusher.audit(node(250))).held.clean


async def test_pusher_starts_over_under_a_new_round_after_a_failed_push() -> None:
    class Failing(RecordingSwitch):
        async def send_bundle(self, encoded: fastpath.Messages) -> None:
            raise fastpath_error

    fastpath_error = ConnectionError("switch went away")
    switch, pusher = Failing(), Pusher()
    first = await pusher.attach(cast(SwitchConnection, switch))
    with pytest.raises(ConnectionError):
        await pusher.push(node(3))
    assert pusher.round == first + 1 and pusher.needs_full_push
    good = RecordingSwitch()
    pusher.connection = cast(SwitchConnection, good)
    await pusher.push(node(3))
    sweeps = [cookie for command, cookie in good.flow_mods if command == OFPFC_DELETE]
    assert sweeps == [first << 48]  # the failed round's flows are swept by cookie


# Against a real ovs-vswitchd -----------------------------------------------------------------


@pytest.mark.ovs
@pytest.mark.parametrize(("encap", "net"), [("vxlan", "blue"), ("vlan", "red")])
async def test_pusher_on_real_ovs_keeps_the_switch_without_drift(ovs: Ovs, encap: str, net: str) -> None:
    async with trio.open_nursery() as nursery:
        controller = Controller("127.0.0.1", 0)
        await nursery.start(controller.run)
        bridge = await trio.to_thread.run_sync(ovs.add_bridge, controller.port)
        dpid = await trio.to_thread.run_sync(ovs.datapath_id, bridge)
        with trio.fail_after(OVS_TIMEOUT_S):
            connection = await controller.wait_connected(dpid)
            pusher = Pusher()
            await pusher.attach(connection)
            world = World(
                encap=encap, gateway=True, ports=((0, net, 0), (1, net, 1), (2, "green", 0)), remotes=((0, net, 0),),
                rules=((0, 0), (2, 2), (3, 4), (4, 5)), services=((0, 2),),
            )  # fmt: skip
            await pusher.push(world.inputs())
            assert (await pusher.audit(world.inputs())) == Audit(Drift(), Drift())
            attached = apply(world, ("port", 3, (net, 1)))
            await pusher.push(attached.inputs())
            assert pusher.statistics().last_flow_mods == PORT_FLOWS + 1
            assert (await pusher.audit(attached.inputs())) == Audit(Drift(), Drift())
            await pusher.push(world.inputs())  # detach
            assert (await pusher.audit(world.inputs())) == Audit(Drift(), Drift())
            await trio.to_thread.run_sync(ovs.ofctl, "del-flows", ovs.mgmt(bridge), "table=0,in_port=10")
            audit = await pusher.audit(world.inputs())
            assert audit.held.clean and audit.switch == Drift(missing_flows=1)
        nursery.cancel_scope.cancel()

"""Keeps one switch's flows and groups equal to the bridge's inputs, sending only what changed.

After every (re)connect the first push is a full one under a fresh cookie round (one above
any round found on the switch): everything desired is added (an ADD replaces a same-match
flow atomically, so traffic keeps flowing), then flows of older rounds are swept by cookie.
Later pushes send the plan of `openflow.incremental.FlowState.update`: the flows and groups
of the owners that changed (an endpoint, its network's flood groups, a rule, a service),
flows in one atomic bundle, groups added before it and deleted after it.  A push that fails
part-way leaves the switch's state unknown, so the next push is a full one under a new round
(and sweeps this one).  The pusher owns the round: the inputs' own round is replaced by it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

import fastpath
from fastpath import Messages
from openflow import GroupCommand, NodeInputs, SwitchConnection, SwitchError, encode_groups, flow_records
from openflow.diff import Plan, round_sweep
from openflow.encode import encode_delete_cookie, encode_flow_bundle
from openflow.fields import ROUND_MASK, round_of
from openflow.incremental import Drift, FlowState, Held

log = logging.getLogger("contivd.agent")

_MAX_ROUND = 0xFFFF
_ENCODE_IN_THREAD = 200  # flows or groups: encoding more takes long enough to starve the event loop


async def _encoded(encode: Callable[..., Messages], items: Sequence[Any], *args: Any, size: int | None = None) -> Messages:
    """``encode(items, *args)``; a large batch (1 000 Services at once: seconds of os-ken) is
    encoded in a worker thread, so the event loop keeps answering the switch's echo requests and
    the store's heartbeats meanwhile (a blocked loop loses its OpenFlow connection and leadership)."""
    if (len(items) if size is None else size) < _ENCODE_IN_THREAD:
        return encode(items, *args)
    return await trio.to_thread.run_sync(encode, items, *args)


@dataclass(frozen=True)
class PushStatistics:
    round: int
    pushes: int
    full_pushes: int
    """Pushes that rebuilt everything: after a (re)connect or a failed push, or when tunnels/uplinks changed."""
    incremental_pushes: int
    flows: int
    groups: int
    last_flow_mods: int
    """FLOW_MODs the last push sent (bundled adds and deletes, round sweeps)."""
    flow_mods: int
    last_group_mods: int
    group_mods: int


@dataclass(frozen=True)
class Audit:
    """Drift of what the pusher holds: against the inputs recomputed from scratch, and against the switch."""

    held: Drift
    switch: Drift | None
    """None when no switch is connected or nothing was pushed to it yet."""


@dataclass(frozen=True)
class AuditJob:
    """One audit's material (Pusher.start_audit); ``run`` is pure: seconds of CPU at thousands of
    flows (os-ken parsing the dump, the flows built again from scratch), so not on the event loop."""

    held: Held
    inputs: NodeInputs
    dump: tuple[bytes, ...] | None
    """The switch's FLOW_STATS replies; None when no switch holds what was pushed."""

    def run(self) -> Audit:
        switch = None if self.dump is None else self.held.switch_drift(flow_records(self.dump))
        return Audit(self.held.audit(self.inputs), switch)


class Pusher:
    def __init__(self) -> None:
        self.connection: SwitchConnection | None = None
        self.round = 0
        self._state = FlowState()
        self._old_rounds: set[int] = set()
        self._pushes = self._full = 0
        self._last_flow_mods = self._flow_mods = self._last_group_mods = self._group_mods = 0

    async def attach(self, connection: SwitchConnection) -> int:
        """A switch (re)connected: learn its rounds; the next push is a full one. Returns the new round."""
        records = await connection.dump_flows()
        self._old_rounds = {round_of(r.cookie) for r in records if r.cookie & ROUND_MASK}
        self.round = max(self._old_rounds, default=0) % _MAX_ROUND + 1
        self.connection = connection
        self._state.reset()
        return self.round

    @property
    def needs_full_push(self) -> bool:
        return self._state.needs_full_update

    async def push(self, inputs: NodeInputs) -> None:
        """Make the switch hold what ``inputs`` want; raises OpenFlowError (the caller retries later)
        or PipelineError (inputs that collide: nothing is sent and nothing changes)."""
        connection = self.connection
        if connection is None:
            return
        sweep = self._state.needs_full_update
        plan = self._state.update(self._own_round(inputs))
        try:
            flow_mods, group_mods = await self._apply(connection, plan, sweep)
            if sweep:
                for old in sorted(self._old_rounds - {self.round}):
                    cookie, mask = round_sweep(old)
                    await connection.send_flow_mods(encode_delete_cookie(cookie, mask))
                    flow_mods += 1
                self._old_rounds = {self.round}
        except BaseException:  # the switch holds part of the plan: start over under a new round
            self.start_new_round()
            raise
        self._pushes += 1
        self._full += self._state.last_update_full
        self._last_flow_mods, self._last_group_mods = flow_mods, group_mods
        self._flow_mods += flow_mods
        self._group_mods += group_mods

    def start_new_round(self) -> None:
        """Forget what is held: the next push adds everything under a new round and sweeps the
        current one (after a failed push, or when an audit found the switch drifted)."""
        self._old_rounds.add(self.round)
        self.round = self.round % _MAX_ROUND + 1
        self._state.reset()

    def _own_round(self, inputs: NodeInputs) -> NodeInputs:
        return inputs if inputs.round == self.round else dataclasses.replace(inputs, round=self.round)

    async def _apply(self, connection: SwitchConnection, plan: Plan, full: bool) -> tuple[int, int]:
        """Send ``plan``; (flow-mods, group-mods) sent."""
        group_mods = len(plan.add_groups)
        if plan.add_groups:  # one batch, one barrier: a thousand Services are a thousand groups
            try:
                await connection.send_flow_mods(await _encoded(encode_groups, plan.add_groups, GroupCommand.ADD))
            except SwitchError:
                if not full:
                    raise
                group_mods += await self._add_or_modify(connection, plan)
        if plan.modify_groups:
            group_mods += len(plan.modify_groups)
            await connection.send_flow_mods(await _encoded(encode_groups, plan.modify_groups, GroupCommand.MODIFY))
        flow_mods = len(plan.add_flows) + len(plan.delete_flows)
        if flow_mods:  # one atomic bundle: no moment with half a change
            changes = ((fastpath.Command.ADD, plan.add_flows), (fastpath.Command.DELETE_STRICT, plan.delete_flows))
            await connection.send_bundle(await _encoded(encode_flow_bundle, changes, size=flow_mods))
        if plan.delete_groups:
            group_mods += len(plan.delete_groups)
            await connection.send_flow_mods(encode_groups(plan.delete_groups, GroupCommand.DELETE))
        return flow_mods, group_mods

    @staticmethod
    async def _add_or_modify(connection: SwitchConnection, plan: Plan) -> int:
        """After a restart or a new round some groups exist already, so some ADDs of the batch
        failed (the others were applied: every message of a batch is processed). Now every group
        exists: one batch of MODIFYs gives each its buckets. Returns the group-mods sent."""
        await connection.send_flow_mods(await _encoded(encode_groups, plan.add_groups, GroupCommand.MODIFY))
        return len(plan.add_groups)

    async def audit(self, inputs: NodeInputs) -> Audit:
        """Drift of what was pushed from ``inputs`` recomputed from scratch, and from the
        switch's own flows (one flow dump; call it between pushes, from the task that pushes)."""
        job = await self.start_audit(inputs)
        return await trio.to_thread.run_sync(job.run)

    async def start_audit(self, inputs: NodeInputs) -> AuditJob:
        """What an audit compares, taken at one moment: call it between pushes, from the task
        that pushes (what is held, the inputs it came from, the switch's flow dump unparsed).
        Comparing is ``AuditJob.run``, which the caller may leave to a worker thread while
        pushes go on."""
        inputs = self._own_round(inputs)
        held = self._state.held()
        connection = self.connection
        if connection is None or connection.closed or self._state.needs_full_update:
            return AuditJob(held, inputs, None)
        return AuditJob(held, inputs, await connection.dump_flow_messages())

    def flows_per_table(self) -> dict[int, int]:
        """How many installed flows each table id holds (metrics)."""
        return self._state.flows_per_table()

    def statistics(self) -> PushStatistics:
        return PushStatistics(
            round=self.round,
            pushes=self._pushes,
            full_pushes=self._full,
            incremental_pushes=self._pushes - self._full,
            flows=self._state.flow_count,
            groups=self._state.group_count,
            last_flow_mods=self._last_flow_mods,
            flow_mods=self._flow_mods,
            last_group_mods=self._last_group_mods,
            group_mods=self._group_mods,
        )

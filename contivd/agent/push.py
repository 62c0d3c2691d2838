"""Keeps one switch's flows and groups equal to the desired set.

After every (re)connect the first push is a full one under a fresh cookie round (one above
any round found on the switch): everything desired is added (an ADD replaces a same-match
flow atomically, so traffic keeps flowing), then flows of older rounds are swept by cookie.
Later pushes apply `openflow.diff` against what this pusher last installed.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

import fastpath
from openflow import Desired, GroupCommand, SwitchConnection, SwitchError, diff, encode_groups
from openflow.diff import Plan, round_sweep
from openflow.encode import encode_delete_cookie, encode_flow_bundle
from openflow.fields import ROUND_MASK, round_of

log = logging.getLogger("contivd.agent")


@dataclass(frozen=True)
class PushStatistics:
    round: int
    pushes: int
    full_pushes: int
    flows: int
    groups: int


class Pusher:
    def __init__(self) -> None:
        self.connection: SwitchConnection | None = None
        self.round = 0
        self._installed: Desired | None = None
        self._old_rounds: set[int] = set()
        self._pushes = self._full = 0

    async def attach(self, connection: SwitchConnection) -> int:
        """A switch (re)connected: learn its rounds; the next push is a full one. Returns the new round."""
        records = await connection.dump_flows()
        self._old_rounds = {round_of(r.cookie) for r in records if r.cookie & ROUND_MASK}
        self.round = max(self._old_rounds, default=0) % 0xFFFF + 1
        self.connection, self._installed = connection, None
        return self.round

    @property
    def needs_full_push(self) -> bool:
        return self._installed is None

    async def push(self, want: Desired) -> None:
        """Make the switch hold `want`; raises OpenFlowError (the caller retries later)."""
        connection = self.connection
        if connection is None:
            return
        full = self._installed is None
        plan = diff(want) if full else diff(want, self._installed.flows, self._installed.groups)  # type: ignore[union-attr]
        if not plan.empty:
            await self._apply(connection, plan, full)
        if full:
            for old in sorted(self._old_rounds - {self.round}):
                cookie, mask = round_sweep(old)
                await connection.send_flow_mods(encode_delete_cookie(cookie, mask))
            self._old_rounds = {self.round}
            self._full += 1
        self._installed = want
        self._pushes += 1

    async def _apply(self, connection: SwitchConnection, plan: Plan, full: bool) -> None:
        for group in plan.add_groups:  # after a restart the group may exist already: then modify it
            try:
                await connection.send_flow_mods(encode_groups([group], GroupCommand.ADD))
            except SwitchError:
                if not full:
                    raise
                await connection.send_flow_mods(encode_groups([group], GroupCommand.MODIFY))
        if plan.modify_groups:
            await connection.send_flow_mods(encode_groups(plan.modify_groups, GroupCommand.MODIFY))
        if plan.add_flows or plan.delete_flows:  # one atomic bundle: no moment with half a change
            changes = ((fastpath.Command.ADD, plan.add_flows), (fastpath.Command.DELETE_STRICT, plan.delete_flows))
            await connection.send_bundle(encode_flow_bundle(changes))
        if plan.delete_groups:
            await connection.send_flow_mods(encode_groups(plan.delete_groups, GroupCommand.DELETE))

    def flows_per_table(self) -> dict[int, int]:
        """How many installed flows each table id holds (metrics)."""
        installed = self._installed
        return dict(Counter(flow.table for flow in installed.flows)) if installed else {}

    def statistics(self) -> PushStatistics:
        installed = self._installed
        return PushStatistics(
            self.round, self._pushes, self._full, len(installed.flows) if installed else 0, len(installed.groups) if installed else 0
        )

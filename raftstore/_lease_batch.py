"""A voter coalesces the lease keepalives its followers of the store forward.

Every contivd node renews its registration lease every ttl/3 (5 s). Forwarded one by one, a
thousand followers make ~200 Raft commands a second on the leader while the cluster is idle.
Instead the voter holds each forwarded keepalive for a short window and proposes everything
that arrived meanwhile as ONE `lease_keepalive_many` command (ids and the voter's clock),
then answers each follower with its own lease's outcome, exactly as a single keepalive would
(renewed, or `LeaseNotFoundError` so the node registers again; or the proposal's error, e.g.
`UnavailableError` when this voter lost the leadership or its quorum, for every waiter).

The window: at most WINDOW_SECONDS, and at most TTL_FRACTION of the lease's ttl, so a lease
renewed every ttl/3 still has more than half its ttl left when the renewal applies (a 15 s
lease: 0.5 s against a 5 s renew period). A voter then proposes at most ~2 such commands a
second, however many followers it serves. The batch gets its own request id; a follower
retrying its keepalive on another voter renews again, which is harmless (idempotent).

Rolling upgrades: a member of an older release does not know `lease_keepalive_many` and would
not renew what the others renew, so the command is proposed only while every voter is linked
to this one at wire format LEASE_BATCH_WIRE_FORMAT or newer (and this member speaks it):
checked per keepalive (cached GATE_REFRESH_SECONDS) and again right before a batch is proposed.
Otherwise each keepalive is proposed alone, as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio

from ._base import StateMachineStore, raise_for_error
from ._commands import new_request_id
from ._consensus import ConsensusStatus
from ._errors import StoreError, UnavailableError

WINDOW_SECONDS = 0.5
TTL_FRACTION = 0.1
MAX_IDS = 4096  # per command; a fuller batch goes out at once
LEASE_BATCH_WIRE_FORMAT = 3
GATE_REFRESH_SECONDS = 1.0


def every_member_speaks(own_format: int, status: ConsensusStatus, version: int = LEASE_BATCH_WIRE_FORMAT) -> bool:
    """Whether this member and every member linked to it speak `version`, and every voter is
    linked (a voter not linked may run an older release): then every member applies what
    that version's release applies."""
    linked = dict(status.wire_formats)
    return (
        own_format >= version
        and all(linked.get(address, 0) >= version for address, _ in status.other_voters)
        and all(v >= version for v in linked.values())
    )


def is_keepalive(command: dict[str, Any]) -> bool:
    return command.get("op") == "lease_keepalive" and type(command.get("id")) is int


def hold_seconds(ttl: float | None) -> float:
    """How long a keepalive for a lease of `ttl` may wait for others; 0 for a lease this voter
    does not hold (most likely gone: the node should learn it and register again at once)."""
    return 0.0 if ttl is None else min(WINDOW_SECONDS, ttl * TTL_FRACTION)


class _Waiting:
    __slots__ = ("command", "deadline", "done", "result", "error")

    def __init__(self, command: dict[str, Any], deadline: float):
        self.command = command
        self.deadline = deadline
        self.done = trio.Event()
        self.result: Any = None
        self.error: StoreError | None = None


class KeepaliveBatcher:
    """Collects keepalives (`renew`), proposes them together (`run`; see the module doc)."""

    def __init__(self, store: StateMachineStore, members_apply_batches: Callable[[], bool]):
        self._store = store
        self._gate = members_apply_batches
        self._gate_open = False
        self._gate_checked = -math.inf
        self._queue: list[_Waiting] = []
        self._due = math.inf  # the earliest deadline run() sleeps towards
        self._wake = trio.Event()

    def _allowed(self, fresh: bool = False) -> bool:
        now = trio.current_time()
        if fresh or now - self._gate_checked >= GATE_REFRESH_SECONDS:
            self._gate_open, self._gate_checked = self._gate(), now
        return self._gate_open

    async def renew(self, command: dict[str, Any]) -> dict[str, Any]:
        """A follower's `lease_keepalive`: its result, or raise as proposing it alone would."""
        if not self._allowed():
            return await self._store._propose(command)
        ttl = self._store._read_state(lambda fsm: fsm.lease_ttl(command["id"]))
        waiting = _Waiting(command, trio.current_time() + hold_seconds(ttl))
        self._queue.append(waiting)
        if waiting.deadline < self._due or len(self._queue) >= MAX_IDS:
            self._wake.set()
        await waiting.done.wait()
        if waiting.error is not None:
            raise waiting.error
        if waiting.result is None:
            raise UnavailableError("the voter stopped before the keepalive was proposed; retrying it is safe")
        return raise_for_error(waiting.result)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                self._wake = trio.Event()
                if not self._queue:
                    self._due = math.inf
                    await self._wake.wait()
                    continue
                self._due = min(w.deadline for w in self._queue)
                if len(self._queue) < MAX_IDS and trio.current_time() < self._due:
                    with trio.move_on_at(self._due):
                        await self._wake.wait()
                    continue
                batch, self._queue = self._queue[:MAX_IDS], self._queue[MAX_IDS:]
                nursery.start_soon(self._propose, batch)

    async def _propose(self, batch: list[_Waiting]) -> None:
        try:
            if self._allowed(fresh=True):
                await self._propose_together(batch)
            else:  # a voter of an older release linked meanwhile
                async with trio.open_nursery() as nursery:
                    for waiting in batch:
                        nursery.start_soon(self._propose_alone, waiting)
        finally:
            for waiting in batch:
                waiting.done.set()

    async def _propose_together(self, batch: list[_Waiting]) -> None:
        command = {"op": "lease_keepalive_many", "rid": new_request_id(), "ids": [w.command["id"] for w in batch], "now": self._store._clock()}
        try:
            results = (await self._store._propose(command)).get("results")
            if not isinstance(results, list) or len(results) != len(batch):
                raise StoreError(f"lease_keepalive_many answered {len(batch)} ids with {results!r}")
        except StoreError as exc:
            for waiting in batch:
                waiting.error = exc
            return
        for waiting, result in zip(batch, results, strict=True):
            waiting.result = result

    async def _propose_alone(self, waiting: _Waiting) -> None:
        try:
            waiting.result = await self._store._propose(waiting.command)
        except StoreError as exc:
            waiting.error = exc

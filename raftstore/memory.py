"""MemoryStore: the store's API on the real state machine, in-process and synchronous.

For tests of code written against `KeyValueStore` (the netmaster's plans, IPAM, effects): every
command is encoded exactly as `Store` encodes it and applied to a `StateMachine` at once, in
the calling trio task — no Raft, no threads, no sockets, no disk. It is always the leader.
Leases expire only when `expire_leases()` runs, against the injected clock. Retry paths are
reached by injecting one outcome per call: a failed transaction guard (`fail_next_compare`) or
an error such as UnavailableError (`fail_next`). Not for production: nothing is replicated or
persisted.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import trio

from . import _commands
from ._base import StateMachineStore, raise_for_error
from ._fsm import StateMachine
from ._types import LeadershipChange, StoreStatistics

T = TypeVar("T")
# What a failure can be injected into: the commands writes propose, and "sync" for sync() and
# linearizable get/list.
Operation = Literal["txn", "lease_grant", "lease_keepalive", "lease_keepalive_many", "lease_revoke", "sync"]
_NEVER_HOLDS = {"key": "/memorystore/never", "check": "mod_revision", "value": -1}  # mod revisions are >= 0


@dataclass(frozen=True)
class _Failure:
    error: Exception
    applied: bool


class MemoryStore(StateMachineStore):
    """A single, always-leading member held in memory (see the module doc).

    `proposals` counts the commands applied, by op ("txn", "lease_grant", …), so a test can
    tell how many transactions a piece of code committed.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time, history_limit: int = 10_000, address: str = "memory"):
        super().__init__(clock)
        self.address = address
        self.proposals: Counter[str] = Counter()
        self._fsm = StateMachine(history_limit=history_limit)
        self._leader_since = clock()
        self._failures: defaultdict[str, deque[_Failure]] = defaultdict(deque)
        self._failing_compares = 0

    # ---- injected outcomes ---------------------------------------------------------------

    def fail_next(self, operation: Operation, error: Exception, *, applied: bool = False) -> None:
        """Make the next `operation` raise `error`. With `applied=True` the write is applied
        first and only its answer is lost (what a caller sees when a leader fails between
        commit and reply). Calls queue: two calls fail the next two operations."""
        self._failures[operation].append(_Failure(error, applied))

    def fail_next_compare(self, times: int = 1) -> None:
        """Make the next `times` transactions find a guard false, as if another writer had
        committed in between: their `failure` branch runs and `succeeded` is False."""
        self._failing_compares += times

    def _injected(self, operation: str) -> _Failure | None:
        queue = self._failures.get(operation)
        return queue.popleft() if queue else None

    # ---- the StateMachineStore hooks -----------------------------------------------------

    async def _propose(self, command: dict[str, Any]) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()  # a proposal is a suspension point, as with Raft
        op = command["op"]
        failure = self._injected(op)
        if failure is not None and not failure.applied:
            raise failure.error
        if op == "txn" and self._failing_compares:
            self._failing_compares -= 1
            command = {**command, "if": [*command["if"], _NEVER_HOLDS]}
        result = self._fsm.apply(_commands.encode(command))
        self.proposals[op] += 1
        if self._open_watches:
            self._fire_changed()
        if failure is not None:
            raise failure.error
        return raise_for_error(result)

    async def _linearize(self) -> None:
        await trio.lowlevel.checkpoint()
        failure = self._injected("sync")
        if failure is not None:
            raise failure.error

    def _read_state(self, fn: Callable[[StateMachine], T]) -> T:
        return fn(self._fsm)

    # ---- leases --------------------------------------------------------------------------

    async def expire_leases(self) -> None:
        """Revoke every lease past its deadline by the clock, as the leader's expiry loop does
        (a lease gets at least one TTL after the store was created)."""
        await self._expire_leases(self._clock(), self._leader_since)

    # ---- leadership and observability ----------------------------------------------------

    def is_leader(self) -> bool:
        return True

    def leader(self) -> str | None:
        return self.address

    async def leadership_changes(self) -> AsyncIterator[LeadershipChange]:
        """This member leads from the start and never stops."""
        yield LeadershipChange(True, self.address, 1)
        await trio.sleep_forever()

    def apply_latency(self) -> tuple[int, float]:
        return sum(self.proposals.values()), 0.0

    def statistics(self) -> StoreStatistics:
        applied = sum(self.proposals.values())
        return StoreStatistics(
            self_address=self.address,
            role="leader",
            leader=self.address,
            term=1,
            commit_index=applied,
            last_applied=applied,
            log_length=applied,
            revision=self._fsm.revision,
            keys=self._fsm.key_count(),
            leases=self._fsm.lease_count(),
            voters=(self.address,),
            connected_voters=(),
            readonly_members=0,
            has_quorum=True,
            fsync=False,
            commit_blockers=(),
        )

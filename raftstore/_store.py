"""The async face of the store for trio code.

Store runs inside the caller's trio loop, on top of a `Consensus` (`_consensus.py`; a Raft
member, `RaftNode`, is the one `open_store` builds): group commit, retries, linearizable
reads, watches and leases are raftstore's own and need nothing else from the replicated log,
so a node that is not a Raft member can carry the same Store. A proposal is appended and sent
to the followers by the task that makes it (`submit`); while this member leads, `_tick_loop`
waits on the raft sockets and ticks the node here, so the answers that commit a write are read
and its result delivered on this thread, with no wake-up of another thread per write. Results
of ticks run by the node's own thread (a follower, or the backstop while this loop stalls)
come back with `TrioToken.run_sync_soon`. Watches are revision cursors over the state
machine's history, woken by one coalesced notification per batch of applied commands, so a
slow watcher costs no memory and cannot stall Raft.
"""

from __future__ import annotations

import builtins
import logging
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from . import _commands
from ._base import StateMachineStore, raise_for_error
from ._config import StoreConfig, is_loopback, parse_address
from ._consensus import DENIED, FAIL_NAMES, RETRYABLE, SUCCESS, Consensus
from ._errors import StoreClosedError, StoreConfigError, StoreError, UnavailableError
from ._feed import Feed
from ._fsm import StateMachine
from ._lease_batch import every_member_speaks
from ._node import RaftNode
from ._types import LeadershipChange, StoreStatistics, commit_blockers

log = logging.getLogger("raftstore")
T = TypeVar("T")

LEASE_EXPIRY_PERIOD = 0.25  # seconds between the leader's scans for expired leases
RETRY_BACKOFF = (0.02, 0.5)  # first and largest pause between retries of a failed proposal
MAX_INFLIGHT_ENTRIES = 2  # log entries proposed but not yet applied, before proposals batch up
MAX_BATCH_COMMANDS = 256
MAX_BATCH_BYTES = 1 << 20  # one oversized command still goes alone
TRANSFER_RETRY_SECONDS = 0.005  # between leadership-transfer requests PySyncObj refused


def _failed(what: str, reason: int) -> StoreError:
    return StoreError(f"{what} failed: {FAIL_NAMES.get(reason, reason)}")


class _Waiter:
    """A one-shot result slot, filled by the tick that applies its entry."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: Any = None
        self.reason: int = SUCCESS

    def fill(self, result: Any, reason: int) -> None:
        self.result, self.reason = result, reason
        self.done.set()


class _Slot:
    """One in-flight log entry's claim on the group-commit window.

    Released by the entry's callback, or reclaimed when no entry finished for a request
    timeout (an entry lost in a leader change may never be applied), so the window cannot leak.
    """

    def __init__(self, semaphore: trio.Semaphore):
        self._semaphore = semaphore
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._semaphore.release()


class Store(StateMachineStore):
    """Replicated key-value store: KV, transactions, watches, leases, leadership.

    Reads are linearizable unless `stale=True` (then they see this member's applied state,
    which may lag the leader). Every call that needs the leader raises UnavailableError
    after `config.request_timeout` seconds without one; none hangs.
    """

    def __init__(self, config: StoreConfig, token: trio.lowlevel.TrioToken):
        super().__init__(time.time)
        self.config = config
        self._token = token
        self._loop_thread = threading.get_ident()  # constructed on the trio thread
        self._leadership_changed = trio.Event()
        self._leader_since = math.inf
        self._closed = False
        self._barrier_wanted = trio.Event()
        self._next_barrier = _Waiter()
        self._node: Consensus | None = None
        self._outbox: list[tuple[str, _Waiter]] = []
        self._outbox_ready = trio.Event()
        self._inflight = trio.Semaphore(MAX_INFLIGHT_ENTRIES)
        self._slots: deque[_Slot] = deque()
        self._applied_writes = 0  # successful proposals and their summed propose-to-apply time, for metrics
        self._apply_seconds = 0.0
        self._last_entry_commands = 1
        self._started = time.time()  # "unreachable since" for a voter never reached
        # followers of the store connected to this voter; their keepalives batched once every member can apply that
        self._feed = Feed(self, self._feed_serving, lambda: every_member_speaks(self.config.wire_format, self.node.status()))

    # ---- wiring from ticks -------------------------------------------------------------------

    def _call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn` on the trio thread: now if this tick runs there, else through the token."""
        if threading.get_ident() == self._loop_thread:
            fn(*args)
            return
        try:
            self._token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            pass  # the loop is gone; nobody is waiting any more

    async def _tick_loop(self) -> None:
        """While this member leads, tick the node on this loop whenever a raft socket has an
        event or a timer is due (the node's thread ticks otherwise, and whenever this loop
        has not ticked for STALL_SECONDS)."""
        node = self.node
        node.attach_loop()
        try:
            while True:
                changed = self._leadership_changed
                if not node.loop_drives():
                    await changed.wait()
                    continue
                wait = node.tick()
                with trio.move_on_after(wait):
                    await trio.lowlevel.wait_readable(node.fileno())
        finally:
            node.attach_loop(False)

    def _on_applied(self) -> None:  # any tick
        # Waking the trio loop costs a socket write and a thread switch per applied entry;
        # only watches wait for it. A watch counts itself before its first read, so an entry
        # applied before that is in what it reads, and one applied after it is announced.
        if self._open_watches and not self._change_pending:
            self._change_pending = True
            self._call_soon(self._fire_changed)

    def _on_leadership(self) -> None:  # any tick
        self._call_soon(self._fire_leadership)

    def _fire_leadership(self) -> None:
        if self._node is not None and self._node.is_leader():
            if self._leader_since == math.inf:
                self._leader_since = time.time()
        else:
            self._leader_since = math.inf
        if self._bound and self._node is not None:  # also called before the node is set and after close
            self._cancel_bound((self._node.is_leader(), self._node.leader()))
        changed, self._leadership_changed = self._leadership_changed, trio.Event()
        changed.set()

    # ---- followers of the store (_feed.py) -----------------------------------------------------

    def _adopt_follower(self, sock: Any, channel: Any, hello: dict[str, Any], unsent: bytes) -> None:  # any tick
        self._call_soon(self._feed.adopt, sock, channel, hello, unsent)

    def _feed_serving(self) -> tuple[bool, str | None]:
        """Whether followers may rely on this voter (it reaches a quorum and knows a leader)."""
        leader = self.node.leader()
        return self.node.status().has_quorum and leader is not None, leader

    @property
    def node(self) -> Consensus:
        if self._node is None or self._closed:
            raise StoreClosedError("the store is closed")
        return self._node

    # ---- proposals ---------------------------------------------------------------------------

    async def _submit_once(self, text: str) -> tuple[Any, int]:
        waiter = _Waiter()
        if not self._outbox and self._inflight.value == MAX_INFLIGHT_ENTRIES and self._last_entry_commands == 1:
            # Sequential writing (nothing queued or in flight, and the last entry carried one
            # command): propose at once, without a hop through the proposer task (~40 µs of
            # trio-thread CPU a write). Concurrent writers keep going through it so their proposals batch up;
            # sending directly whenever the window merely had room split concurrent bursts into
            # single-command entries (16 writers on 3 voters: 5 000/s → 3 000/s).
            self._inflight.acquire_nowait()
            self._send_entry([(text, waiter)], lone=True)
        else:
            self._outbox.append((text, waiter))
            self._outbox_ready.set()
        await waiter.done.wait()
        return waiter.result, waiter.reason

    async def _proposer_loop(self) -> None:
        """Group commit: while MAX_INFLIGHT_ENTRIES entries are in flight, proposals queue
        up and go out together as one log entry — one AppendEntries and one flush per member
        for all of them. A lone proposal goes out at once, so sequential latency is unchanged."""
        while True:
            await self._outbox_ready.wait()
            while True:
                with trio.move_on_after(self.config.request_timeout):
                    await self._inflight.acquire()
                    break
                self._reclaim_oldest_slot()
            batch: builtins.list[tuple[str, _Waiter]] = []
            size = 0
            while self._outbox and len(batch) < MAX_BATCH_COMMANDS and (not batch or size + len(self._outbox[0][0]) <= MAX_BATCH_BYTES):
                batch.append(self._outbox.pop(0))
                size += len(batch[-1][0])
            if not self._outbox:
                self._outbox_ready = trio.Event()
            self._send_entry(batch)

    def _send_entry(self, batch: builtins.list[tuple[str, _Waiter]], lone: bool = False) -> None:
        """Propose one log entry for `batch`; the caller holds a window slot for it (`lone`:
        nothing else is queued or in flight)."""
        text = batch[0][0] if len(batch) == 1 else _commands.encode_batch([t for t, _ in batch])
        self._last_entry_commands = len(batch)
        slot = _Slot(self._inflight)
        self._slots.append(slot)
        self.node.submit(text, lambda result, reason: self._call_soon(self._finish_entry, batch, slot, result, reason), lone)

    def _reclaim_oldest_slot(self) -> None:
        """No entry finished within a request timeout: PySyncObj dropped a callback."""
        while self._slots and self._slots[0].released:
            self._slots.popleft()
        if self._slots:
            log.warning("reclaiming a group-commit slot whose log entry never completed")
            self._slots.popleft().release()

    def _finish_entry(self, batch: builtins.list[tuple[str, _Waiter]], slot: _Slot, result: Any, reason: int) -> None:
        slot.release()
        while self._slots and self._slots[0].released:
            self._slots.popleft()
        if len(batch) == 1:
            batch[0][1].fill(result, reason)
            return
        results = result if reason == SUCCESS else [None] * len(batch)
        for (_, waiter), one in zip(batch, results, strict=True):
            waiter.fill(one, reason)

    async def _propose(self, command: dict[str, Any]) -> dict[str, Any]:
        """Propose until applied or the request timeout passes; raise on an error result."""
        self.node.disk.check_writable()  # a full data dir: fail now, naming it, not after the timeout
        if self.node.commands_held:
            raise UnavailableError("this member is handing the Raft leadership to another voter; retry (it leads within moments)")
        text = _commands.encode(command)
        pause, last_reason = RETRY_BACKOFF[0], None
        started = time.monotonic()
        # One cancel scope for both ends: the request timeout, and (while this member leads)
        # a step-down, which _fire_leadership cancels it for.
        with trio.move_on_after(self.config.request_timeout) as scope:
            if self.is_leader():
                self._bound[scope] = self._leadership_view()
            try:
                while True:
                    result, reason = await self._submit_once(text)
                    if reason == SUCCESS:
                        self._applied_writes += 1
                        self._apply_seconds += time.monotonic() - started
                        return raise_for_error(result)
                    if reason not in RETRYABLE:
                        raise StoreError(f"raft refused the command: {FAIL_NAMES.get(reason, reason)}")
                    last_reason = reason
                    await trio.sleep(pause)
                    pause = min(pause * 2, RETRY_BACKOFF[1])
            finally:
                self._bound.pop(scope, None)
        if trio.current_time() < scope.deadline:  # cancelled before the timeout: the step-down
            raise UnavailableError(
                "this member lost the Raft leadership (no majority answered it, or a newer term began) before the write committed; "
                "it may still apply — retrying it is safe"
            )
        self.node.disk.check_writable()  # the data dir filled up while this write waited
        why = FAIL_NAMES.get(last_reason, "no answer") if last_reason is not None else "no answer"
        raise UnavailableError(
            f"no leader with a quorum answered within {self.config.request_timeout:g}s ({why}); a write may still apply later — retrying it is safe"
        )

    async def _linearize(self) -> None:
        """Wait until local state includes every write committed before this call began.

        Concurrent reads share one barrier command through the log (PySyncObj has no
        ReadIndex); a read joins only a barrier that is proposed after it started.
        """
        waiter = self._next_barrier
        self._barrier_wanted.set()
        with trio.move_on_after(self.config.request_timeout + 1):
            await waiter.done.wait()
        if not waiter.done.is_set():
            raise UnavailableError(f"no quorum for a linearizable read within {self.config.request_timeout:g}s")
        if isinstance(waiter.result, Exception):
            raise waiter.result

    async def _barrier_loop(self) -> None:
        while True:
            await self._barrier_wanted.wait()
            self._barrier_wanted = trio.Event()
            batch, self._next_barrier = self._next_barrier, _Waiter()
            try:
                batch.fill(await self._propose({"op": "barrier"}), SUCCESS)
            except StoreError as exc:
                batch.fill(exc, SUCCESS)

    def _read_state(self, fn: Callable[[StateMachine], T]) -> T:
        return self.node.read(fn)

    async def _lease_expiry_loop(self) -> None:
        """On the leader only: revoke leases whose owners stopped renewing."""
        while True:
            await trio.sleep(LEASE_EXPIRY_PERIOD)
            if self._leader_since != math.inf:
                await self._expire_leases(time.time(), self._leader_since)

    # ---- leadership and membership ----------------------------------------------------------

    def is_leader(self) -> bool:
        return self.node.is_leader()

    def leader(self) -> str | None:
        """The Raft address of the current leader as this member knows it, or None."""
        return self.node.leader()

    async def wait_leader(self, timeout: float | None = None) -> str:
        """Wait until some leader is known; UnavailableError after `timeout` (default: request timeout)."""
        with trio.move_on_after(self.config.request_timeout if timeout is None else timeout):
            while True:
                changed = self._leadership_changed
                leader = self.leader()
                if leader is not None:
                    return leader
                await changed.wait()
        raise UnavailableError("no leader elected in time")

    def _leadership_view(self) -> tuple[bool, str | None]:
        """(leading?, leader). Proposals made while leading are bound to it, so that their
        callers learn of a step-down (check-quorum or a newer term) at once, not after the
        request timeout."""
        return self.is_leader(), self.leader()

    async def leadership_changes(self) -> AsyncIterator[LeadershipChange]:
        """The current leadership, then one item per change (gained, lost, new leader)."""
        last = None
        while True:
            changed = self._leadership_changed
            current = LeadershipChange(self.is_leader(), self.leader(), self.node.status().term)
            if (current.is_leader, current.leader) != last:
                last = (current.is_leader, current.leader)
                yield current
            await changed.wait()

    async def add_member(self, address: str, *, until_committed: bool = True) -> None:
        """Add a voter (one at a time; add it before starting it). Waits for commit, or with
        `until_committed` False only until the leader took the change (a refusal still
        raises): a lone voter needs that, as the change takes effect when appended and two
        voters commit nothing until the new one runs."""
        host, _ = parse_address(address, "member address")
        # As for the flags (StoreConfig): Raft traffic with a member off this host needs the
        # secret. Resolving a name may block, so off the loop.
        if not self.config.secret and not await trio.to_thread.run_sync(is_loopback, host):
            raise StoreConfigError(f"refusing non-loopback member address {address} without a cluster secret: set one on every member first")
        if until_committed:
            await self._membership(self.node.add_member, address)
            return
        # PySyncObj refuses (another change under way) while appending, on this thread: no wait.
        answered = await self._callback_result(lambda cb: self.node.add_member(address, cb), timeout=0.0)
        if answered is not None and answered[1] != SUCCESS:
            raise _failed(f"membership change for {address}", answered[1])

    async def remove_member(self, address: str) -> None:
        """Remove a voter. Waits for commit."""
        await self._membership(self.node.remove_member, address)

    async def transfer_leadership(self, to: str | None = None) -> str:
        """Hand leadership to `to` (or the most caught-up voter) before maintenance on this
        node; waits until a new leader is known and returns it. Only valid on the leader.

        Meanwhile this member takes no new proposals, its own or forwarded (they fail at once,
        safe to retry), as Raft's leadership transfer has it (thesis §3.10): PySyncObj goes on
        appending during its transfer, and an entry the target lacks makes the others refuse
        it their votes, so this member was elected again. The request is repeated while
        PySyncObj refuses it because the target has not acknowledged the last entry yet.
        """
        if to is not None:
            parse_address(to, "member address")
            if to not in self.statistics().voters:
                raise StoreError(f"cannot hand the leadership to {to}: not a voter")
        what = f"leadership transfer to {to or 'any voter'}"
        self.node.hold_commands(True)
        try:
            with trio.move_on_after(self.config.request_timeout):
                while True:
                    answered = await self._callback_result(lambda cb: self.node.transfer_leadership(to, cb))
                    if answered is None:
                        raise UnavailableError(f"{what} not confirmed within {self.config.request_timeout:g}s")
                    if answered[1] == SUCCESS:
                        break
                    if answered[1] != DENIED:
                        raise _failed(what, answered[1])
                    await trio.sleep(TRANSFER_RETRY_SECONDS)  # in-flight entries are still being acknowledged
                while True:
                    changed = self._leadership_changed
                    leader = self.leader()
                    if leader is not None and leader != self.config.listen and (to is None or leader == to):
                        return leader
                    await changed.wait()
        finally:
            self.node.hold_commands(False)
        raise UnavailableError(f"leadership did not move to {to or 'another voter'} in time")

    async def _membership(self, change: Callable[[str, Any], None], address: str) -> None:
        parse_address(address, "member address")
        await self._wait_callback(lambda cb: change(address, cb), f"membership change for {address}")

    async def _wait_callback(self, start: Callable[[Any], None], what: str) -> None:
        result = await self._callback_result(start)
        if result is None:
            raise UnavailableError(f"{what} not confirmed within {self.config.request_timeout:g}s")
        if result[1] != SUCCESS:
            raise _failed(what, result[1])

    async def _callback_result(self, start: Callable[[Any], None], timeout: float | None = None) -> tuple[Any, int] | None:
        """(result, fail reason) of a PySyncObj call that reports through a callback; None
        when it did not within `timeout` (default: the request timeout; 0: only an answer
        given while starting, on this thread)."""
        waiter = _Waiter()
        start(lambda result, reason: self._call_soon(waiter.fill, result, reason))
        with trio.move_on_after(self.config.request_timeout if timeout is None else timeout):
            await waiter.done.wait()
        return (waiter.result, waiter.reason) if waiter.done.is_set() else None

    def apply_latency(self) -> tuple[int, float]:
        """(writes applied, their summed seconds from proposal to applied result) since start."""
        return self._applied_writes, self._apply_seconds

    def statistics(self) -> StoreStatistics:
        node = self.node
        status = node.status()
        members = status.other_voters
        disk, leader = node.disk.problem, node.leader()
        connected = tuple(a for a, up in members if up)
        voters = tuple(sorted([a for a, _ in members] + ([self.config.listen] if self.config.listen else [])))
        started = self._started
        revision, keys, leases, cluster_id, commands = node.read(
            lambda f: (f.revision, f.key_count(), f.lease_count(), f.cluster_id, f.commands_applied)
        )
        return StoreStatistics(
            self_address=self.config.listen,
            role="readonly" if self.config.readonly else status.role,
            leader=leader,
            term=status.term,
            commit_index=status.commit_index,
            last_applied=status.last_applied,
            log_length=status.log_length,
            revision=revision,
            keys=keys,
            leases=leases,
            voters=voters,
            connected_voters=connected,
            readonly_members=status.readonly_members,
            has_quorum=status.has_quorum,
            fsync=self.config.fsync and self.config.data_dir is not None,
            cluster_id=cluster_id,
            wire_formats=status.wire_formats,
            followers=self._feed.followers,
            commands_applied=commands,
            disk_problem=None if disk is None else disk.message,
            disk_problem_since=None if disk is None else disk.since,
            unreachable_voters=tuple((a, status.down_since.get(a, started)) for a, up in members if not up),
            commit_blockers=commit_blockers(
                self_address=self.config.listen,
                voters=voters,
                leader=leader,
                connected_voters=connected,
                has_quorum=status.has_quorum,
                disk_problem=None if disk is None else disk.message,
            ),
        )


@asynccontextmanager
async def open_store(config: StoreConfig) -> AsyncIterator[Store]:
    """Start this member, yield its Store, and shut it down (sockets, files) on exit.

    Returns as soon as the member runs; use `wait_leader()` to wait for an election.
    """
    store = Store(config, trio.lowlevel.current_trio_token())
    store._node = await trio.to_thread.run_sync(RaftNode, config, store._on_applied, store._on_leadership)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store._feed.run)
            store._node.accept_followers(store._adopt_follower)
            nursery.start_soon(store._tick_loop)
            nursery.start_soon(store._proposer_loop)
            nursery.start_soon(store._barrier_loop)
            nursery.start_soon(store._lease_expiry_loop)
            try:
                yield store
            finally:
                nursery.cancel_scope.cancel()
    finally:
        store._closed = True
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store._node.close)

"""The only module that drives PySyncObj's SyncObj: the `Consensus` a Raft member offers.

RaftNode is where PySyncObj runs: it owns one SyncObj, the lock every use of it holds, and a
thread, and it decides who ticks. What raftstore adds to PySyncObj's behaviour sits beside it,
one concern per module, so that this file is only the driving: `_durability` (the journal on
disk), `_propagation` (what a commit sends), `_append_guard` (a follower's log truncation),
`_transport` (the wire); every reach into PySyncObj's private internals goes through
`_pysyncobj_compat`. `Store` sees none of it: it holds a `Consensus` (`_consensus`).

It knows nothing about trio: results and events reach plain callbacks, on whichever thread
ticked. Who ticks (see `RaftNode`): a proposal is appended and sent by the code that submits
it; while this member leads and an event loop has attached (`attach_loop`), that loop waits
on the raft sockets and ticks, so the answers that commit a write are read, and its result
delivered, on the loop's own thread; otherwise, and as a backstop whenever the loop has not
ticked for STALL_SECONDS, the node's thread ticks. Callbacks must never block.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.syncobj import SyncObjException

from . import _pysyncobj_compat as compat
from ._append_guard import install_append_guard
from ._config import StoreConfig
from ._consensus import FAIL_NAMES, NOT_LEADER, SUCCESS, Callback, ConsensusStatus
from ._crypto import AeadSealer
from ._disk_space import DataDirFullError, DiskSpace
from ._durability import align_journal_with_snapshot, make_durable
from ._errors import StoreConfigError
from ._fsm import StateMachine
from ._journal_check import JOURNAL, SNAPSHOT, JournalDamagedError, check_raft_dir
from ._poller import EpollPoller
from ._propagation import CommitPropagation, followers_hold_a_majority, keep_next_index_on_success
from ._transport import FramedTransport, MessageHandler

log = logging.getLogger("raftstore")

T = TypeVar("T")

TICK_SECONDS = 0.05  # longest wait between ticks
# An attached loop that leads ticks at least every TICK_SECONDS; when it has not ticked for
# this long (a long synchronous step on the loop, a blocked disk), the node's thread ticks
# every TICK_SECONDS instead until it does again, so heartbeats (every 0.1 s), answers to
# votes and check-quorum never wait for the loop (elections time out after 0.4-1.4 s).
STALL_SECONDS = 2 * TICK_SECONDS
SETTLE_SECONDS = 0.002  # longest a tick waits for the leader's journal sync under way
APPEND_ENTRIES_BYTES = 64 * 1024 * 1024  # bytes of entries per AppendEntries at most
# Check-quorum: a leader that has had no answer from a majority for this long steps down
# (PySyncObj's leaderFallbackTimeout, 30 s by default). About one election timeout
# (PySyncObj's 0.4-1.4 s), so that an isolated leader stops claiming leadership — in
# statistics, /info and /readyz, and for the writes waiting on it — by the time the majority
# elects another; heartbeats go out every 0.1 s, so a healthy follower answers ten times first.
LEADER_FALLBACK_SECONDS = 1.0
STEP_DOWN_RETRY_SECONDS = 1.0  # how often a leader whose data dir is full asks a follower to take over


class _ReplicatedStateMachine(compat.ConsumerBase):
    """Bridges PySyncObj's replication onto the pure StateMachine.

    Attributes set before SyncObjConsumer.__init__ are excluded from snapshots; `fsm` is the
    only replicated state.
    """

    def __init__(self, history_limit: int, on_applied: Callable[[], None]):
        self.lock = threading.Lock()
        self._on_applied = on_applied
        super().__init__()
        self.fsm = StateMachine(history_limit=history_limit)

    @replicated  # type: ignore[untyped-decorator]
    def apply(self, text: str) -> Any:
        with self.lock:
            result = self.fsm.apply(text)
        self._on_applied()
        return result

    def load_snapshot(self, load: Callable[[], None]) -> None:
        with self.lock:
            load()
        self._on_applied()


class RaftNode:
    """One Raft member, the `Consensus` of a voter or read-only member. Thread-safe: every
    call may come from any thread.

    Every use of the SyncObj holds `_lock`. Ticking (see the module docstring): `tick()` by
    an attached loop while this member leads, else the node's thread; `submit()` appends and
    sends a proposal itself, so no proposal waits for a tick.
    """

    def __init__(self, config: StoreConfig, on_applied: Callable[[], None], on_leadership: Callable[[], None]):
        self.config = config
        self._on_leadership = on_leadership
        self._replicated = _ReplicatedStateMachine(config.history_limit, on_applied)
        journal = dump = None
        self.disk = DiskSpace("")  # never fails without a data dir
        if config.data_dir is not None:
            data_dir = Path(config.data_dir)
            try:
                data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise StoreConfigError(f"cannot create data dir {data_dir}: {exc.strerror}") from None
            try:
                check_raft_dir(data_dir)  # before PySyncObj reads it: never serve a shortened history
            except JournalDamagedError as exc:
                log.error("refusing to start: %s", exc)
                raise
            journal, dump = str(data_dir / JOURNAL), str(data_dir / SNAPSHOT)
            self.disk = DiskSpace(str(data_dir))
        conf = SyncObjConf(
            password=None,  # the transport seals frames itself (AES-GCM, _crypto.AeadSealer)
            autoTick=False,
            appendEntriesUseBatch=False,  # with batching a sync write waits ~100 ms for the next heartbeat
            dynamicMembershipChange=True,
            journalFile=journal,
            fullDumpFile=dump,
            logCompactionMinEntries=config.compaction_min_entries,
            logCompactionMinTime=config.compaction_min_seconds,
            commandsWaitLeader=True,
            leaderFallbackTimeout=LEADER_FALLBACK_SECONDS,
            connectionRetryTime=0.5,  # default 5 s: a member started before its peers idled that long
            maxBindRetries=5,
            bindRetryTime=0.2,
            # PySyncObj sends an entry at least this big as pickled 'transmission' chunks
            # (unpickled by the follower after authentication): only a single transaction
            # above 64 MiB would; a value is at most 4 MiB and a group-commit batch 1 MiB.
            appendEntriesBatchSizeBytes=APPEND_ENTRIES_BYTES,
        )
        sealer = AeadSealer(config.secret) if config.secret else None
        self._transport: FramedTransport | None = None
        self._poller = EpollPoller()

        def make_transport(syncobj: SyncObj, self_node: Any, other_nodes: Any) -> FramedTransport:
            self._transport = FramedTransport(syncobj, self_node, other_nodes, poller=self._poller, sealer=sealer, newest_version=config.wire_format)
            return self._transport

        try:
            self._syncobj = SyncObj(config.listen, list(config.peers), conf, consumers=[self._replicated], transportClass=make_transport)
        except SyncObjException as exc:
            self._poller.close()
            raise StoreConfigError(f"cannot listen on raft address {config.listen}: {exc} (address in use?)") from None
        compat.drop_command_pipe(self._syncobj)
        install_append_guard(self._syncobj, self._transport)  # the transport make_transport made
        keep_next_index_on_success(self._syncobj, self._transport)
        self.commands_held = False  # see hold_commands
        cast(FramedTransport, self._transport).wrap_message_handler(self._refuse_forwarded_while_held)  # make_transport ran
        if dump is not None:
            align_journal_with_snapshot(self._syncobj, dump)
        self._flush: Callable[[], None] = lambda: None
        self._settled: Callable[[float], bool] = lambda wait: True
        self._sync_soon: Callable[[], None] = lambda: None
        self._probe_disk: Callable[[], None] = lambda: None
        self._release: Callable[[], None] = lambda: None
        if journal is not None:
            durable = make_durable(self._syncobj, dump, self.disk, config.fsync, self._poller)
            self._flush, self._settled, self._sync_soon = durable.flush, durable.settled, durable.sync_soon
            self._probe_disk, self._release = durable.probe, durable.close
            assert self._transport is not None
            self._transport.before_send = durable.before_send
        self._propagation = CommitPropagation(self._syncobj)
        self._lock = threading.RLock()  # every use of the SyncObj; reentrant for callbacks that propose
        self._leadership: tuple[bool, str | None] | None = None
        self._loop_attached = False
        self._last_tick = time.monotonic()
        self._next_hand_over = 0.0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._thread_loop, name="raftstore-tick", daemon=True)
        self._thread.start()

    # ---- ticking -------------------------------------------------------------------------

    def fileno(self) -> int:
        """A descriptor readable while a raft socket has an event: what a driving loop waits on."""
        return self._poller.fileno()

    def attach_loop(self, attached: bool = True) -> None:
        """An event loop will wait on `fileno()` and call `tick()` while this member leads
        (False: it stopped; the node's thread ticks on its own again)."""
        self._loop_attached = attached

    def loop_drives(self) -> bool:
        """Whether the attached loop, not the node's thread, should tick now."""
        return self._loop_attached and self.is_leader()

    def tick(self) -> float:
        """Handle what the sockets brought, commit, apply, run timers; returns the seconds the
        caller may wait on `fileno()` before ticking again. Blocks while a flush it needs runs."""
        with self._lock:
            self._tick_locked()
        return self._propagation.wait_time(TICK_SECONDS)

    def _tick_locked(self) -> bool:
        self._last_tick = time.monotonic()
        return self._guarded(self._tick_steps)

    def _tick_steps(self) -> None:
        self._probe_disk()  # first: a follower's ticks fail while appends do, and must still notice space return
        self._hand_over_if_disk_full()
        self._poller.poll(0.0)  # messages in: answers move match indexes, a follower appends and answers
        # PySyncObj's tick counts the leader's own copy of every entry it holds towards a
        # commit, so it runs once they are all on disk, or once the followers alone hold every
        # entry on a majority of the voters (then the leader's own copy changes nothing; its
        # sync goes on meanwhile). Neither yet: wait up to SETTLE_SECONDS for whichever comes
        # first, the next answer or the leader's sync (the helper wakes the poller when
        # done); it is usually about done when the followers' answers come, and waking again
        # for it costs more. After that the helper goes on and wakes the poller when done, so
        # a slow disk never holds the caller longer. Appends between ticks are bounded (a
        # leader's proposals by the store's in-flight window; a follower flushes before
        # answering), so the helper catches up.
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            if self._followers_hold_log():
                self._syncobj.doTick(0.0)  # commits the whole log without counting its own copy
                self._sync_soon()
                break
            if self._settled(0.0):
                self._commit_pass()
                self._sync_soon()  # what the tick appended (forwarded commands), sent already
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._poller.poll(remaining)  # an answer, or the helper's wake-up once synced
        self._propagation.propagate_if_due()

    def _hand_over_if_disk_full(self) -> None:
        """A leader that cannot write its data dir commits nothing more: ask the most caught-up
        follower to take over (Raft's TimeoutNow), so the cluster keeps committing without it
        while it waits for space (etcd's leader dies of this fault instead). Retried every
        STEP_DOWN_RETRY_SECONDS: PySyncObj denies it until a follower holds the whole log."""
        if self.disk.problem is None or not self._syncobj.otherNodes or not compat.is_leader(self._syncobj):
            return
        now = time.monotonic()
        if now < self._next_hand_over:
            return
        self._next_hand_over = now + STEP_DOWN_RETRY_SECONDS
        self._syncobj.transferLeadership(None, callback=self._handed_over)

    def _handed_over(self, result: Any, reason: int) -> None:
        if reason == SUCCESS:
            log.warning("data dir unwritable while leading: asked the most caught-up follower to take over the leadership")
        else:
            log.info("data dir unwritable while leading: no follower can take over yet (%s); retrying", FAIL_NAMES.get(reason, reason))

    def _followers_hold_log(self) -> bool:
        """Whether this leader's followers alone hold its whole log on a majority of the voters."""
        if not compat.is_leader(self._syncobj):
            return False
        return followers_hold_a_majority(compat.voter_match_indexes(self._syncobj), compat.last_log_index(self._syncobj))

    def _commit_pass(self) -> None:
        self._flush()  # raises a failed helper sync; else nothing is left to write
        self._syncobj.doTick(0.0)

    def _guarded(self, step: Callable[[], None]) -> bool:
        """Run a tick step as PySyncObj's own tick loop would: log a failure and go on (False)."""
        ok = False
        try:
            step()
            ok = True
        except DataDirFullError:  # logged once by DiskSpace; the next ticks go on, probing
            pass
        except Exception:
            log.exception("raft tick failed")
        leadership = (self.is_leader(), self.leader())
        if leadership != self._leadership:
            self._leadership = leadership
            self._on_leadership()
        return ok

    def _thread_loop(self) -> None:
        while not self._stopping.is_set():
            if self.loop_drives():  # the loop ticks; step in only when it stalls
                self._stopping.wait(TICK_SECONDS)
                if time.monotonic() - self._last_tick < STALL_SECONDS:
                    continue
            else:
                self._poller.wait(self._propagation.wait_time(TICK_SECONDS))
            if self._stopping.is_set():
                return
            with self._lock:
                ok = self._tick_locked()
            if not ok:
                self._stopping.wait(TICK_SECONDS)

    def close(self) -> None:
        """Stop ticking, close sockets and flush files. Blocks briefly; call from a worker
        thread, after the attached loop stopped ticking."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._thread.join()
        with self._lock:
            try:
                self._flush()  # also waits out a helper fdatasync, so the journal is not closed under it
            except Exception:
                log.exception("final journal flush failed")
            self._syncobj.destroy()
            self._release()
            self._poller.close()

    # ---- commands and reads --------------------------------------------------------------

    def submit(self, text: str, callback: Callback, lone: bool = False) -> None:
        """Propose an encoded command: appended and sent (a follower: forwarded) before this
        returns. `callback(result, fail_reason)` runs on the thread of the tick that applies it
        (alone: possibly this call). A `lone` proposal on a member without followers waits up to
        SETTLE_SECONDS for its sync, as a tick would, and commits at once: a sequential writer
        then costs one pass of the caller's loop instead of two (~10 % of a write's CPU);
        concurrent proposals are not lone, so the loop keeps reading requests during their syncs."""
        with self._lock:
            self._replicated.apply(text, callback=callback)  # queues it
            self._take_submitted(SETTLE_SECONDS if lone else 0.0)

    def _take_submitted(self, settle: float = 0.0) -> None:
        """Append (lead) or forward (follow) what replicated calls queued, as a tick would."""

        def take() -> None:
            compat.append_submitted(self._syncobj)
            if self._syncobj.otherNodes:
                self._sync_soon()  # the entry went out to the followers: sync the leader's copy meanwhile
            elif self._settled(settle):  # alone and synced (or no fsync): commit it now
                self._commit_pass()
            # else alone: the helper syncs the entry and wakes the poller for the tick that commits it

        self._guarded(take)

    def hold_commands(self, held: bool) -> None:
        """While held (a leadership transfer under way), commands other members forward are
        refused as NOT_LEADER, which they retry, so they reach the next leader; the caller
        refuses its own proposals the same way (Store.transfer_leadership)."""
        self.commands_held = held

    def _refuse_forwarded_while_held(self, handle: MessageHandler) -> MessageHandler:
        def refusing(node: Any, message: dict[str, Any]) -> None:
            if not self.commands_held or message.get("type") != "apply_command":
                handle(node, message)
            elif "request_id" in message and self._transport is not None:
                self._transport.send(node, {"type": "apply_command_response", "request_id": message["request_id"], "error": NOT_LEADER})

        return refusing

    def read(self, fn: Callable[[StateMachine], T]) -> T:
        """Run `fn` against local state under the apply lock. Keep `fn` short."""
        with self._replicated.lock:
            return fn(self._replicated.fsm)

    def replace_state(self, fsm: StateMachine) -> None:
        """Make `fsm` this member's whole state (seeding a new cluster from an image only:
        the log does not produce it, so `compact()` must persist it before anything else)."""
        self._replicated.load_snapshot(lambda: setattr(self._replicated, "fsm", fsm))

    def compact(self) -> None:
        """Ask PySyncObj for a snapshot of the applied state at its next tick."""
        self._syncobj.forceLogCompaction()

    def transfer_leadership(self, address: str | None, callback: Callback) -> None:
        with self._lock:
            self._syncobj.transferLeadership(address, callback=callback)

    def add_member(self, address: str, callback: Callback) -> None:
        with self._lock:
            self._syncobj.addNodeToCluster(address, callback=callback)
            self._take_submitted()

    def remove_member(self, address: str, callback: Callback) -> None:
        with self._lock:
            self._syncobj.removeNodeFromCluster(address, callback=callback)
            self._take_submitted()

    # ---- observability -------------------------------------------------------------------

    def is_leader(self) -> bool:
        return compat.is_leader(self._syncobj)

    def leader(self) -> str | None:
        leader = compat.last_known_leader(self._syncobj)
        return None if leader is None else str(getattr(leader, "id", leader))

    def accept_followers(self, adopt: Callable[..., None]) -> None:
        if self._transport is not None:
            self._transport.follower_handler = adopt

    def status(self) -> ConsensusStatus:
        transport = self._transport
        return consensus_status(
            self._raw_status(),
            wire_formats=() if transport is None else transport.connected_versions(),
            down_since={} if transport is None else transport.down_since(),
        )

    def _raw_status(self) -> dict[str, Any]:
        """PySyncObj's status dict; it iterates dicts a tick on another thread may change, so
        retry a racing read (no lock: a follower's thread holds it through its flushes)."""
        for _ in range(5):
            try:
                return dict(self._syncobj.getStatus())
            except RuntimeError:
                continue
        return {}


_ROLES: dict[int, Literal["follower", "candidate", "leader"]] = {0: "follower", 1: "candidate", 2: "leader"}
_PARTNER_PREFIX = "partner_node_status_server_"  # PySyncObj's status key per other voter; 2: connected


def consensus_status(raw: dict[str, Any], *, wire_formats: tuple[tuple[str, int], ...], down_since: dict[str, float]) -> ConsensusStatus:
    """PySyncObj's status dict (`SyncObj.getStatus()`) in the store's terms; missing keys read
    as a member that knows nothing yet."""
    return ConsensusStatus(
        role=_ROLES.get(int(raw.get("state", 0)), "follower"),
        term=int(raw.get("raft_term", 0)),
        commit_index=int(raw.get("commit_idx", 0)),
        last_applied=int(raw.get("last_applied", 0)),
        log_length=int(raw.get("log_len", 0)),
        other_voters=tuple(sorted((key[len(_PARTNER_PREFIX) :], value == 2) for key, value in raw.items() if key.startswith(_PARTNER_PREFIX))),
        readonly_members=int(raw.get("readonly_nodes_count", 0)),
        has_quorum=bool(raw.get("has_quorum", False)),
        wire_formats=wire_formats,
        down_since=down_since,
    )

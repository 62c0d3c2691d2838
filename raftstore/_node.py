"""The only module that drives PySyncObj: journal, snapshots, transport, secret, ticking.

RaftNode owns one SyncObj, the lock every use of it holds, and a thread. It knows nothing
about trio: results and events reach plain callbacks, on whichever thread ticked. Who ticks
(see `RaftNode`): a proposal is appended and sent by the code that submits it; while this
member leads and an event loop has attached (`attach_loop`), that loop waits on the raft
sockets and ticks, so the answers that commit a write are read, and its result delivered, on
the loop's own thread; otherwise, and as a backstop whenever the loop has not ticked for
STALL_SECONDS, the node's thread ticks. Callbacks must never block. Where it changes
PySyncObj's behaviour it goes through `_pysyncobj_compat`, the one module that names
PySyncObj's private internals.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.journal import LAST_RECORD_OFFSET_OFFSET
from pysyncobj.pickle import dumps as pickle_dumps
from pysyncobj.pickle import load as pickle_load
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.syncobj import SyncObjException

from . import _pysyncobj_compat as compat
from ._append_guard import install_append_guard
from ._config import StoreConfig
from ._crypto import AeadSealer
from ._disk_space import RESERVE_BYTES, DataDirFullError, DiskSpace
from ._errors import StoreConfigError
from ._fsm import StateMachine
from ._journal_check import JOURNAL, SNAPSHOT, JournalChecksums, JournalDamagedError, check_raft_dir
from ._poller import EpollPoller
from ._transport import FramedTransport, MessageHandler

log = logging.getLogger("raftstore")

T = TypeVar("T")
Callback = Callable[[Any, int], None]

SUCCESS = FAIL_REASON.SUCCESS
DENIED = FAIL_REASON.REQUEST_DENIED
# Failures after which the command certainly or possibly did not apply. Retrying is safe:
# writes carry request ids that the state machine deduplicates.
RETRYABLE = frozenset(
    {
        FAIL_REASON.QUEUE_FULL,
        FAIL_REASON.MISSING_LEADER,
        FAIL_REASON.DISCARDED,
        FAIL_REASON.NOT_LEADER,
        FAIL_REASON.LEADER_CHANGED,
        FAIL_REASON.UNKNOWN_OUTCOME,
    }
)
FAIL_NAMES = {v: k for k, v in vars(FAIL_REASON).items() if k.isupper()}

TICK_SECONDS = 0.05  # longest wait between ticks
# An attached loop that leads ticks at least every TICK_SECONDS; when it has not ticked for
# this long (a long synchronous step on the loop, a blocked disk), the node's thread ticks
# every TICK_SECONDS instead until it does again, so heartbeats (every 0.1 s), answers to
# votes and check-quorum never wait for the loop (elections time out after 0.4-1.4 s).
STALL_SECONDS = 2 * TICK_SECONDS
SETTLE_SECONDS = 0.002  # longest a tick waits for the leader's journal sync under way
PROPAGATION_DELAY = 0.002  # seconds a leader waits for a new entry to carry the commit index
APPEND_ENTRIES_BYTES = 64 * 1024 * 1024  # bytes of entries per AppendEntries at most
_RECORD_OVERHEAD = 24  # a journal record: size, index, term, command, size
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


def _drain(eventfd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        os.eventfd_read(eventfd)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def followers_hold_a_majority(match_indexes: Sequence[int], last_index: int) -> bool:
    """Whether the other voters alone, not counting the leader, are a majority of all voters
    holding every entry up to `last_index` (a leader's match indexes of its followers).

    Then the leader may commit its whole log before its own copy is on disk (Raft thesis
    10.2.1: the leader need not be part of the majority): followers flush before they
    answer, so every entry is durable on a majority without it. With 3 voters: both
    followers have acknowledged the last entry.
    """
    voters = len(match_indexes) + 1
    return sum(1 for index in match_indexes if index >= last_index) > voters / 2


class _JournalFlusher:
    """Gets the journal's appended bytes to the disk; on the leader, starting early.

    Journal writes happen under the node's tick lock only. `flush()` (under it) returns once
    every write made before the call is on disk. `start()` (under it, the leader right
    after sending a new entry to the followers) lets a helper thread begin that fdatasync at
    once, in parallel with the followers' round trip (started after the sends, not before:
    a helper woken earlier takes the GIL from the sender at its first socket write);
    `settled()` says whether every write is on disk without waiting (starting the helper if
    it is not), and then the helper calls `synced()` when its fdatasync is done, so whoever
    ticks can wait for that instead of blocking (an event loop must not). A failed fdatasync
    marks nothing durable: flush() raises and the next one tries again.

    fdatasync, not PySyncObj's mmap.flush(): the same pages reach the disk, but it releases
    the GIL while it waits, and it does not walk the whole (growing) mapping.
    """

    def __init__(self, fileno: Callable[[], int], synced: Callable[[], None]):
        self._fileno = fileno
        self._on_synced = synced
        self._cond = threading.Condition()
        self._written = 0  # generation: journal writes so far
        self._synced = 0  # every write up to this generation is on disk
        self._wanted = 0  # generation the helper is syncing; > _synced while it works
        self._error: Exception | None = None
        self._helper: threading.Thread | None = None
        self._awaited = False  # settled() said no: call _on_synced after the next sync

    def wrote(self) -> None:
        self._written += 1

    def start(self) -> None:
        with self._cond:
            if self._wanted <= self._synced < self._written:
                self._wanted = self._written
                if self._helper is None:
                    self._helper = threading.Thread(target=self._run, name="raftstore-fsync", daemon=True)
                    self._helper.start()
                self._cond.notify_all()

    def settled(self, wait: float = 0.0) -> bool:
        """Whether every write is on disk (or a failed sync waits to be raised by flush()),
        waiting up to `wait` seconds for the helper; if not, the helper goes on syncing them
        and calls `synced` when done."""
        self.start()
        with self._cond:
            self._cond.wait_for(lambda: self._synced >= self._written or self._error is not None, wait)
            done = self._synced >= self._written or self._error is not None
            self._awaited = not done
            return done

    def wait_idle(self) -> None:
        """Until no helper fdatasync runs (before the journal file may be reopened)."""
        with self._cond:
            while self._wanted > self._synced and self._error is None:
                self._cond.wait()

    def flush(self) -> None:
        self.wait_idle()
        with self._cond:
            error, self._error = self._error, None
            if error is not None:
                raise error
            if self._synced >= self._written:
                return
            target = self._written
        os.fdatasync(self._fileno())
        with self._cond:
            self._synced = max(self._synced, target)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._wanted <= self._synced:
                    self._cond.wait()
                target = self._wanted
            error: Exception | None = None
            try:
                os.fdatasync(self._fileno())
            except Exception as exc:  # never die with a sync pending: flush() would wait forever
                error = exc
            with self._cond:
                if error is None:
                    self._synced = max(self._synced, target)
                else:
                    self._error, self._wanted = error, self._synced
                self._cond.notify_all()
                awaited, self._awaited = self._awaited, False
            if awaited:  # only then: a sync done before anyone asked wakes nobody
                self._on_synced()


@dataclass(frozen=True)
class _Durable:
    """What _make_durable hands back: the ticks' flush, settled check and disk probe, the
    transport's before-send hook, and what close() must release."""

    flush: Callable[[], None]
    settled: Callable[[float], bool]
    sync_soon: Callable[[], None]
    before_send: Callable[[dict[str, Any]], None]
    probe: Callable[[], None]
    close: Callable[[], None]


def _make_durable(syncobj: SyncObj, snapshot: str | None, space: DiskSpace, fsync: bool, poller: EpollPoller) -> _Durable:
    """Group commit: the journal reaches the disk before PySyncObj acknowledges anything
    (with `fsync`; without it, the write path, disk-full handling and checksums stay, only the
    journal flushes go).

    PySyncObj appends into an mmap and never msyncs (see shared/raft-notes.md). Appends only
    mark the journal dirty; it is flushed once before any answer or vote leaves this member
    (a follower's entries are on disk before it acknowledges them) and before every tick
    (the leader counts its own copy towards a commit only inside a tick). On the leader the
    flush of a new entry starts while the entry is being sent (see _JournalFlusher). Term and
    vote are fsynced before a vote is sent. The journal stays allocated RESERVE_BYTES ahead of
    its end, so a full filesystem fails a write cleanly instead of with SIGBUS (_disk_space),
    and every record's checksum goes to `raft.journal.sums` before the record is written
    (JournalChecksums; the start-up check verifies them).
    """
    journal = compat.JournalFile.of(syncobj)
    synced_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # readable in `poller` once the helper synced
    poller.subscribe(synced_fd, lambda descr, event: _drain(descr), POLL_EVENT_TYPE.READ)
    flusher = _JournalFlusher(journal.fileno, lambda: os.eventfd_write(synced_fd, 1))
    sums = JournalChecksums(journal.path + ".sums")
    sums.rebuild([tuple(journal.journal[i]) for i in range(len(journal.journal))])
    (written_end,) = struct.unpack("<I", os.pread(journal.fileno(), 4, LAST_RECORD_OFFSET_OFFSET))  # where records end now
    failed_at = -1  # offset of the last journal write that failed

    def reserve(needed: int) -> bool:
        """Allocate the journal up to `needed` + RESERVE_BYTES and map it; False on ENOSPC."""
        mapped = journal.mapped_size()
        if needed + RESERVE_BYTES <= mapped:
            return True
        flusher.wait_idle()  # no helper fdatasync holds the descriptor while the file changes
        for target in (max(needed + RESERVE_BYTES, 2 * mapped), needed + RESERVE_BYTES):  # double, as PySyncObj does, if there is room
            try:
                os.posix_fallocate(journal.fileno(), 0, target)
            except OSError as exc:
                error = exc
                continue
            journal.grow_mapping(target)
            return True
        space.failed(journal.path, error)
        return False

    def write(offset: int, data: bytes) -> None:
        # pwrite, not a store into the mmap: on ext4 a page dirtied through the mapping makes
        # the next fdatasync commit the filesystem journal too (page_mkwrite updates the inode),
        # 0.8 ms against 0.16 ms here. The mapping shares the page cache, so PySyncObj's reads
        # through it see these bytes. The file grows here, never by PySyncObj's mapping stores.
        nonlocal written_end, failed_at
        needed = offset + len(data)
        if not reserve(needed) and needed > journal.mapped_size():
            failed_at = offset
            raise _full(journal.path)
        try:
            os.pwrite(journal.fileno(), data, offset)  # ENOSPC here only in holes an older raftstore left
        except OSError as exc:
            failed_at = offset
            space.failed(journal.path, exc)
            raise _full(journal.path) from None
        written_end = max(written_end, needed)
        flusher.wrote()

    def _full(path: str) -> DataDirFullError:
        return DataDirFullError(space.problem.message if space.problem else f"cannot write {path}")

    def add(command: bytes, idx: int, term: int) -> None:
        # Room for the whole record first: PySyncObj lists an entry before writing it, so a
        # failed write would leave its in-memory log ahead of the file.
        needed = written_end + _RECORD_OVERHEAD + len(command)
        if not reserve(needed) and needed > journal.mapped_size():
            raise _full(journal.path)
        nonlocal failed_at
        entries, failed_at = len(journal.journal), -1
        if not entries:  # PySyncObj emptied the journal (compaction rewrites it from the start)
            sums.start_over(idx)
        sums.record(idx, term, command)  # before the record: after a crash a record matches its slot or is absent
        try:
            journal.raw_add(command, idx, term)
        except DataDirFullError:  # a hole left by an older raftstore
            if failed_at != LAST_RECORD_OFFSET_OFFSET:  # the record itself did not reach the file (not only the header's end offset)
                journal.forget_entries_from(entries)
            raise

    def delete_entries_to(entry_to: int) -> None:
        # Compaction: the snapshot (written by PySyncObj's forked child without fsync) must
        # be on disk before the journal entries it replaces are dropped.
        if snapshot and os.path.isfile(snapshot):
            fsync_path(snapshot)
            fsync_path(os.path.dirname(snapshot) or ".")
        journal.raw_delete_entries_to(entry_to)

    def before_send(message: dict[str, Any]) -> None:
        # The leader may replicate entries before its own copy is durable (Raft thesis
        # 10.2.1): it counts itself towards a commit only in a tick, after the flush there
        # (or commits without counting itself, once the followers alone are a majority).
        if message.get("type") != "append_entries":
            flusher.flush()

    path = journal.meta_path

    def store_meta(meta: dict[str, Any]) -> None:
        # The commit index it records may cover entries the leader committed before its own
        # copy was on disk (followers holding a majority): put them there first, so that the
        # start-up check never finds the journal ending before it after a power loss. Inline,
        # not through the helper, which may be busy with a slow sync (at most once a second).
        if fsync:
            os.fdatasync(journal.fileno())
        try:
            with open(path + ".tmp", "wb") as f:
                f.write(pickle_dumps(meta))
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(path + ".tmp")
            space.failed(path, exc)
            raise _full(path) from None
        os.replace(path + ".tmp", path)
        fsync_path(os.path.dirname(path) or ".")

    def close() -> None:
        poller.unsubscribe(synced_fd)
        os.close(synced_fd)
        sums.close()

    def probe() -> None:
        if space.probe_due() and reserve(written_end) and space.has_free_space():
            space.cleared()

    journal.install(write=write, add=add, delete_entries_to=delete_entries_to, store_meta=store_meta)
    if not fsync:
        return _Durable(lambda: None, lambda wait: True, lambda: None, lambda message: None, probe, close)
    return _Durable(flusher.flush, flusher.settled, flusher.start, before_send, probe, close)


def _align_journal_with_snapshot(syncobj: SyncObj, snapshot: str) -> None:
    """Drop journal entries the snapshot already covers, so PySyncObj keeps the tail.

    PySyncObj truncates the journal only after its forked child has written the snapshot.
    A stop or crash between the two leaves a snapshot newer than the journal's head, and on
    load PySyncObj then *clears the whole journal* (it expects the journal to start with the
    snapshot's last two entries), losing every committed entry after the snapshot. Trimming
    the journal to start at those two entries first makes the load keep them.
    """
    journal = compat.journal(syncobj)
    if len(journal) < 2 or not os.path.isfile(snapshot):
        return
    try:
        with open(snapshot, "rb") as f, gzip.GzipFile(fileobj=f) as g:
            _, last, previous, _ = pickle_load(g)
    except Exception:  # PySyncObj reports an unreadable snapshot itself when it loads it
        return
    for i in range(len(journal) - 1):
        if tuple(journal[i]) == tuple(previous) and tuple(journal[i + 1]) == tuple(last):
            if i:
                log.info("snapshot is newer than the journal head: dropping %d covered journal entries", i)
                journal.deleteEntriesTo(i)
                journal.flush()
            return


class _CommitPropagation:
    """Spread the commit index to followers a little later, and only if nothing else does.

    With batching off, PySyncObj replicates each new entry at once (what we want) and then,
    after applying it, sends every follower another AppendEntries only to spread the new
    commit index. Under load the next entry carries it anyway, so that second message per
    write only costs the leader and both followers a pickle/encrypt/decrypt round on the
    critical path. Here the apply step marks the propagation pending instead; any
    AppendEntries sent clears it, and a tick sends one after PROPAGATION_DELAY if
    none went out (followers' reads and watches lag by at most that). PySyncObj's apply step
    only *returns* "send now"; the replacement returns False, so the batching flag (which
    PySyncObj also reads to wake the tick thread for every submitted command) stays as is.
    """

    def __init__(self, syncobj: SyncObj):
        self._syncobj = syncobj
        apply_entries = compat.private_method(syncobj, "applyLogEntries")
        send_entries = compat.private_method(syncobj, "sendAppendEntries")
        self.pending = False
        self.since = 0.0

        def apply_quietly() -> bool:
            applied = syncobj.raftLastApplied
            apply_entries()
            if syncobj.raftLastApplied != applied and compat.is_leader(syncobj) and not self.pending:
                self.pending, self.since = True, time.monotonic()
            return False

        def send_and_clear() -> None:
            self.pending = False
            send_entries()

        self._send = send_and_clear
        compat.override(syncobj, "applyLogEntries", apply_quietly)
        compat.override(syncobj, "sendAppendEntries", send_and_clear)

    def wait_time(self, idle: float) -> float:
        """How long the tick loop may wait for events before propagating."""
        if not self.pending:
            return idle
        return max(0.0, min(idle, self.since + PROPAGATION_DELAY - time.monotonic()))

    def propagate_if_due(self) -> None:
        """Send the commit index if no AppendEntries carried it within the delay."""
        if self.pending and time.monotonic() - self.since >= PROPAGATION_DELAY:
            if compat.is_leader(self._syncobj):
                self._send()
            else:
                self.pending = False


def _keep_next_index_on_success(syncobj: SyncObj, transport: Any) -> None:
    """A successful answer to an older AppendEntries must not move the leader's next index back.

    PySyncObj sets a follower's next index to the one in its answer whenever the match index
    grows. With more than one AppendEntries in flight (the next entry goes out before the
    slower follower's answer to the previous one arrives; group commit keeps two entries in
    flight; the commit-index propagation), an answer to an earlier message moves it back
    below entries already sent, and the next AppendEntries sends them again, and so on:
    traced here, a follower spent about a quarter of its CPU decoding (and the leader encoding,
    sealing and compressing, on the write's critical path) entries it already had. Raft's next
    index is a hint (the log check on prevLogIdx is the safety): on success keep the larger
    one, as pipelined Raft implementations (etcd's) do. A rejection (`reset`) still sets it, so
    a follower that lost messages (a dropped connection, a restart) is caught up as before.
    """
    next_index = compat.next_indexes(syncobj)

    def wrap(handle: MessageHandler) -> MessageHandler:
        def keep_on_success(node: Any, message: dict[str, Any]) -> None:
            if message.get("type") != "next_node_idx" or message.get("reset") or not message.get("success"):
                handle(node, message)
                return
            sent = next_index.get(node)
            handle(node, message)
            if sent is not None and next_index.get(node, sent) < sent:
                next_index[node] = sent

        return keep_on_success

    transport.wrap_message_handler(wrap)


class RaftNode:
    """One Raft member. Thread-safe: every call may come from any thread.

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
        install_append_guard(self._syncobj, self._transport)  # the transport make_transport made
        _keep_next_index_on_success(self._syncobj, self._transport)
        self.commands_held = False  # see hold_commands
        cast(FramedTransport, self._transport).wrap_message_handler(self._refuse_forwarded_while_held)  # make_transport ran
        if dump is not None:
            _align_journal_with_snapshot(self._syncobj, dump)
        self._flush: Callable[[], None] = lambda: None
        self._settled: Callable[[float], bool] = lambda wait: True
        self._sync_soon: Callable[[], None] = lambda: None
        self._probe_disk: Callable[[], None] = lambda: None
        self._release: Callable[[], None] = lambda: None
        if journal is not None:
            durable = _make_durable(self._syncobj, dump, self.disk, config.fsync, self._poller)
            self._flush, self._settled, self._sync_soon = durable.flush, durable.settled, durable.sync_soon
            self._probe_disk, self._release = durable.probe, durable.close
            assert self._transport is not None
            self._transport.before_send = durable.before_send
        self._propagation = _CommitPropagation(self._syncobj)
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

    def submit(self, text: str, callback: Callback) -> None:
        """Propose an encoded command: appended and sent (a follower: forwarded) before this
        returns. `callback(result, fail_reason)` runs on the thread of the tick that applies it
        (alone: possibly this call)."""
        with self._lock:
            self._replicated.apply(text, callback=callback)  # queues it
            self._take_submitted()

    def _take_submitted(self) -> None:
        """Append (lead) or forward (follow) what replicated calls queued, as a tick would."""

        def take() -> None:
            compat.append_submitted(self._syncobj)
            if self._syncobj.otherNodes:
                self._sync_soon()  # the entry went out to the followers: sync the leader's copy meanwhile
            elif self._settled(0.0):  # alone and nothing to sync (no fsync): commit it now
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
                self._transport.send(node, {"type": "apply_command_response", "request_id": message["request_id"], "error": FAIL_REASON.NOT_LEADER})

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

    def raw_status(self) -> dict[str, Any]:
        """PySyncObj's status dict; it iterates dicts a tick on another thread may change, so
        retry a racing read (no lock: a follower's thread holds it through its flushes)."""
        for _ in range(5):
            try:
                return dict(self._syncobj.getStatus())
            except RuntimeError:
                continue
        return {}

    def wire_formats(self) -> tuple[tuple[str, int], ...]:
        """(peer, wire format) per connected peer; read-only peers are named readonly-N."""
        return () if self._transport is None else self._transport.connected_versions()

    def down_since(self) -> dict[str, float]:
        """Voter address → wall-clock time since which this member has no link to it."""
        return {} if self._transport is None else self._transport.down_since()

    @staticmethod
    def member_lists(status: dict[str, Any]) -> Iterator[tuple[str, bool]]:
        """(address, connected) for every other voter in a raw status dict."""
        prefix = "partner_node_status_server_"
        for key, value in status.items():
            if key.startswith(prefix):
                yield key[len(prefix) :], value == 2

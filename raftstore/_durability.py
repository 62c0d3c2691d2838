"""Durability: what it takes for an acknowledged entry to survive a power loss.

PySyncObj appends its journal into an mmap and never flushes it, writes its meta file without
fsync, and lets a full filesystem kill the process with SIGBUS (see ../shared/raft-notes.md,
docs/raftstore.md "Durability policy" and "A full filesystem"). None of that is Raft: it is
how this one implementation keeps its files, so it lives apart from the node that drives
SyncObj (`_node.py`), which only asks, at the points Raft cares about, whether the journal is
on disk (`Durable.flush`, `settled`, `sync_soon`) and lets the transport flush before an answer
leaves (`before_send`). The patches into PySyncObj's journal go through `_pysyncobj_compat`.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pysyncobj import SyncObj
from pysyncobj.journal import LAST_RECORD_OFFSET_OFFSET
from pysyncobj.pickle import dumps as pickle_dumps
from pysyncobj.pickle import load as pickle_load
from pysyncobj.poller import POLL_EVENT_TYPE

from . import _pysyncobj_compat as compat
from ._disk_space import RESERVE_BYTES, DataDirFullError, DiskSpace
from ._journal_check import JournalChecksums
from ._poller import EpollPoller

log = logging.getLogger("raftstore")

_RECORD_OVERHEAD = 24  # a journal record: size, index, term, command, size


def _drain(eventfd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        os.eventfd_read(eventfd)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JournalFlusher:
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
class Durable:
    """What make_durable hands back: the ticks' flush, settled check and disk probe, the
    transport's before-send hook, and what close() must release."""

    flush: Callable[[], None]
    settled: Callable[[float], bool]
    sync_soon: Callable[[], None]
    before_send: Callable[[dict[str, Any]], None]
    probe: Callable[[], None]
    close: Callable[[], None]


def make_durable(syncobj: SyncObj, snapshot: str | None, space: DiskSpace, fsync: bool, poller: EpollPoller) -> Durable:
    """Group commit: the journal reaches the disk before PySyncObj acknowledges anything
    (with `fsync`; without it, the write path, disk-full handling and checksums stay, only the
    journal flushes go).

    PySyncObj appends into an mmap and never msyncs (see shared/raft-notes.md). Appends only
    mark the journal dirty; it is flushed once before any answer or vote leaves this member
    (a follower's entries are on disk before it acknowledges them) and before every tick
    (the leader counts its own copy towards a commit only inside a tick). On the leader the
    flush of a new entry starts while the entry is being sent (see JournalFlusher). Term and
    vote are fsynced before a vote is sent. The journal stays allocated RESERVE_BYTES ahead of
    its end, so a full filesystem fails a write cleanly instead of with SIGBUS (_disk_space),
    and every record's checksum goes to `raft.journal.sums` before the record is written
    (JournalChecksums; the start-up check verifies them).
    """
    journal = compat.JournalFile.of(syncobj)
    synced_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # readable in `poller` once the helper synced
    poller.subscribe(synced_fd, lambda descr, event: _drain(descr), POLL_EVENT_TYPE.READ)
    flusher = JournalFlusher(journal.fileno, lambda: os.eventfd_write(synced_fd, 1))
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
        return Durable(lambda: None, lambda wait: True, lambda: None, lambda message: None, probe, close)
    return Durable(flusher.flush, flusher.settled, flusher.start, before_send, probe, close)


def align_journal_with_snapshot(syncobj: SyncObj, snapshot: str) -> None:
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

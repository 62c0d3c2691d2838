"""A full data-dir filesystem: refuse writes with a clear error, never crash, recover by itself.

PySyncObj grows its journal by enlarging the file (sparse) and its mapping, then stores into
the mapping; on a full filesystem (measured on a full tmpfs) that store raises SIGBUS and kills
the process, and a supervisor restarting it crashes it again. raftstore therefore keeps
RESERVE_BYTES of the journal allocated ahead of its end (posix_fallocate, which fails cleanly
with ENOSPC) before the mapping grows, so an append always lands in allocated space. When the
reservation or the meta file cannot be written, `DiskSpace` records the problem: the store
refuses new proposals at once with DataDirFullError (a 503 naming ENOSPC in contivd) instead
of letting them time out, and the ticks probe every PROBE_SECONDS until the reservation
succeeds and MIN_FREE_BYTES are free again; then writes resume without a restart.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from dataclasses import dataclass

from ._errors import UnavailableError

log = logging.getLogger("raftstore")

RESERVE_BYTES = 8 * 1024 * 1024  # journal bytes kept allocated past the last record (a 4 MiB value fits)
MIN_FREE_BYTES = 1024 * 1024  # free space the data dir needs besides the reservation (meta file, snapshot)
PROBE_SECONDS = 0.5


class DataDirFullError(UnavailableError):
    """The member cannot write its data dir (filesystem full or out of quota). Nothing was
    proposed; writes succeed again once space is freed, without a restart."""


@dataclass(frozen=True)
class DiskProblem:
    message: str  # names the file and the errno, e.g. "cannot write /d/raft.journal: No space left on device (ENOSPC)"
    since: float  # wall-clock seconds


def describe(path: str, exc: OSError) -> str:
    """One line naming the file, the OS's reason and the errno symbol."""
    symbol = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return f"cannot write {path}: {exc.strerror or exc} ({symbol})"


class DiskSpace:
    """Whether this member can write its data dir; thread-safe (ticks write, trio reads)."""

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        self._lock = threading.Lock()
        self._problem: DiskProblem | None = None
        self._next_probe = 0.0

    def failed(self, path: str, exc: OSError) -> None:
        message = describe(path, exc)
        with self._lock:
            first = self._problem is None
            if first:
                self._problem = DiskProblem(message, time.time())
            self._next_probe = time.monotonic() + PROBE_SECONDS
        if first:
            log.error("data dir unwritable, refusing writes until space returns: %s", message)

    def cleared(self) -> None:
        with self._lock:
            problem, self._problem = self._problem, None
        if problem is not None:
            log.warning("data dir %s writable again after %.0fs: accepting writes", self.data_dir, time.time() - problem.since)

    @property
    def problem(self) -> DiskProblem | None:
        return self._problem

    def probe_due(self) -> bool:
        return self._problem is not None and time.monotonic() >= self._next_probe

    def has_free_space(self) -> bool:
        try:
            stat = os.statvfs(self.data_dir)
        except OSError:
            return False
        return stat.f_bavail * stat.f_frsize >= MIN_FREE_BYTES

    def check_writable(self) -> None:
        """Raise DataDirFullError while a write to the data dir is known to fail."""
        problem = self._problem
        if problem is not None:
            raise DataDirFullError(
                f"the data dir's filesystem is full: {problem.message} since {time.strftime('%H:%M:%S', time.gmtime(problem.since))} UTC; "
                "writes fail until space is freed, then resume without a restart"
            )

"""The write path under PySyncObj: journal flushing (the message codec: test_wire.py)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftstore._durability import JournalFlusher


@pytest.fixture
def journal_fd(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "journal", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)


def _counting_fdatasync(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return calls


def test_flush_syncs_only_what_was_written(journal_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_fdatasync(monkeypatch)
    flusher = JournalFlusher(lambda: journal_fd, lambda: None)
    flusher.flush()
    assert calls == []
    os.pwrite(journal_fd, b"entry", 0)
    flusher.wrote()
    flusher.flush()
    flusher.flush()
    assert calls == [journal_fd]


def test_a_flush_started_early_is_awaited_not_repeated(journal_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_fdatasync(monkeypatch)
    flusher = JournalFlusher(lambda: journal_fd, lambda: None)
    flusher.wrote()
    flusher.start()  # the helper thread syncs generation 1
    flusher.flush()  # waits for it
    assert calls == [journal_fd]
    flusher.wrote()
    flusher.start()
    flusher.wrote()  # written while the helper may be syncing: not covered by its sync
    flusher.flush()
    assert calls == [journal_fd] * 3  # the helper's two, then one inline for the last write


def test_a_failed_sync_marks_nothing_durable(journal_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = [True]
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        if failing[0]:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    flusher = JournalFlusher(lambda: journal_fd, lambda: None)
    flusher.wrote()
    flusher.start()  # fails on the helper thread
    with pytest.raises(OSError, match="Input/output"):
        flusher.flush()
    with pytest.raises(OSError, match="Input/output"):
        flusher.flush()  # still dirty: tried again inline, fails again
    failing[0] = False
    flusher.flush()  # now it reaches the disk


def test_a_helper_that_cannot_sync_reports_instead_of_hanging() -> None:
    def closed_journal() -> int:
        raise ValueError("I/O operation on closed file")

    flusher = JournalFlusher(closed_journal, lambda: None)
    flusher.wrote()
    flusher.start()
    with pytest.raises(ValueError, match="closed file"):
        flusher.flush()


def test_settled_starts_the_helper_instead_of_waiting_and_it_says_when_done(journal_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a tick on the event loop relies on: it never blocks on a sync, and is woken after one."""
    calls = _counting_fdatasync(monkeypatch)
    synced = threading.Event()
    flusher = JournalFlusher(lambda: journal_fd, synced.set)
    assert flusher.settled()  # nothing written
    flusher.wrote()
    if not flusher.settled():  # the helper syncs it (it may already have finished)
        assert synced.wait(10)
    synced.clear()
    flusher.wait_idle()
    assert flusher.settled()
    assert calls == [journal_fd]
    flusher.flush()  # nothing left to write
    assert calls == [journal_fd]
    flusher.wrote()
    flusher.start()  # a sync nobody waits for (the leader right after sending an entry)
    flusher.wait_idle()
    assert not synced.is_set()  # wakes nobody
    assert flusher.settled()


def test_a_failed_helper_sync_settles_so_that_flush_raises_it(journal_fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def fdatasync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    synced = threading.Event()
    flusher = JournalFlusher(lambda: journal_fd, synced.set)
    flusher.wrote()
    if not flusher.settled():
        assert synced.wait(10)  # the waiting tick is woken on failure too
    flusher.wait_idle()
    assert flusher.settled()
    with pytest.raises(OSError, match="Input/output"):
        flusher.flush()

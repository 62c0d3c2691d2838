"""A member without followers: a lone write commits in its submit when its sync is quick, waits
at most SETTLE_SECONDS for a slow one, and PySyncObj's command pipe stays unused."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftstore._commands import encode, txn_command
from raftstore._config import StoreConfig
from raftstore._node import SETTLE_SECONDS, RaftNode
from raftstore._types import Put
from tests.support.waiting import free_ports, wait_for


@pytest.fixture
def alone(tmp_path: Path) -> Iterator[RaftNode]:
    node = RaftNode(StoreConfig(listen=f"127.0.0.1:{free_ports(1)[0]}", data_dir=tmp_path / "n"), on_applied=lambda: None, on_leadership=lambda: None)
    try:
        wait_for(node.is_leader, 30, "the single member to lead")
        yield node
    finally:
        node.close()


def _submit(node: RaftNode, key: str, lone: bool) -> threading.Event:
    done = threading.Event()

    def finished(result: Any, reason: int) -> None:
        done.set()

    node.submit(encode(txn_command([], [Put(key, 1)], [])), finished, lone)
    return done


def test_a_lone_write_waits_at_most_the_settle_time_for_a_slow_disk(alone: RaftNode, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    real = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        release.wait(30)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    try:
        started = time.monotonic()
        done = _submit(alone, "/lone/slow", lone=True)
        held_for = time.monotonic() - started
        assert not done.is_set()  # not committed before its journal entry is on disk
        assert held_for < SETTLE_SECONDS + 0.5  # the caller's loop is not held for the disk
    finally:
        release.set()
    assert done.wait(30)  # the node's next tick commits it once the helper synced


def test_queued_commands_write_nothing_to_pysyncobjs_command_pipe(alone: RaftNode, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    real = os.write

    def counting_write(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real(fd, data)

    monkeypatch.setattr(os, "write", counting_write)
    events = [_submit(alone, f"/lone/k{i}", lone=False) for i in range(20)]
    assert all(e.wait(30) for e in events)
    assert b"o" not in writes  # PySyncObj's PipeNotifier wrote one b"o" per queued command

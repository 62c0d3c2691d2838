"""When a leader may commit before its own journal sync: only once the followers alone hold a
majority of the voters for every entry (Raft thesis 10.2.1), never by counting its own copy
while that copy is not on disk.

Three real RaftNodes on loopback with their journals fsynced; the leader's helper fdatasync
is held back (followers sync inline before answering, so they are not affected).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from raftstore import _pysyncobj_compat as compat
from raftstore._commands import encode, txn_command
from raftstore._config import StoreConfig
from raftstore._node import RaftNode
from raftstore._propagation import followers_hold_a_majority
from raftstore._types import Put
from tests.support.waiting import free_ports, wait_for


@pytest.mark.parametrize(
    ("match_indexes", "last_index", "expected"),
    [
        ((10, 10), 10, True),  # 3 voters: both followers hold the whole log
        ((10, 9), 10, False),  # only one follower: the leader's own copy would be needed
        ((11, 10), 10, True),
        ((), 10, False),  # alone: never without its own copy
        ((10,), 10, False),  # 2 voters: one follower is not a majority of two
        ((10, 10, 9, 3), 10, False),  # 5 voters: two followers are not three
        ((10, 10, 10, 3), 10, True),
    ],
)
def test_followers_hold_a_majority(match_indexes: tuple[int, ...], last_index: int, expected: bool) -> None:
    assert followers_hold_a_majority(match_indexes, last_index) is expected


class _HeldSync:
    """Holds back fdatasync of files under one directory on the leader's helper thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.directory: str | None = None
        self.release = threading.Event()
        self.held = threading.Event()  # a helper sync is waiting now
        real = os.fdatasync

        def fdatasync(fd: int) -> None:
            directory = self.directory
            if (
                directory is not None
                and threading.current_thread().name == "raftstore-fsync"
                and os.readlink(f"/proc/self/fd/{fd}").startswith(directory)
            ):
                self.held.set()
                self.release.wait(60)
            real(fd)

        monkeypatch.setattr(os, "fdatasync", fdatasync)

    def hold(self, directory: Path) -> None:
        self.release.clear()
        self.held.clear()
        self.directory = str(directory) + os.sep

    def let_go(self) -> None:
        self.directory = None
        self.release.set()


@pytest.fixture
def held_sync(monkeypatch: pytest.MonkeyPatch) -> Iterator[_HeldSync]:
    held = _HeldSync(monkeypatch)
    try:
        yield held
    finally:
        held.let_go()


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[list[RaftNode]]:
    ports = free_ports(3)
    addresses = [f"127.0.0.1:{port}" for port in ports]
    with ExitStack() as stack:
        nodes = []
        for i, address in enumerate(addresses):
            config = StoreConfig(listen=address, peers=tuple(a for a in addresses if a != address), data_dir=tmp_path / f"n{i}")
            node = RaftNode(config, on_applied=lambda: None, on_leadership=lambda: None)
            stack.callback(node.close)
            nodes.append(node)
        yield nodes


def _settled_leader(nodes: list[RaftNode]) -> RaftNode:
    """The leader, once both followers acknowledged and it committed its whole log."""

    def ready() -> RaftNode | None:
        leaders = [n for n in nodes if n.is_leader()]
        if len(leaders) != 1:
            return None
        leader = leaders[0]
        with leader._lock:
            syncobj = leader._syncobj
            last = compat.last_log_index(syncobj)
            if min(compat.voter_match_indexes(syncobj)) < last or syncobj.raftCommitIndex < last:
                return None
        return leader

    return wait_for(ready, 30, "a leader with its log committed and held by both followers")


def _write(leader: RaftNode) -> tuple[int, threading.Event, list[Any]]:
    """Propose one transaction on the leader; (its log index, done, [result, reason])."""
    done, outcome = threading.Event(), []

    def finished(result: Any, reason: int) -> None:
        outcome.extend([result, reason])
        done.set()

    leader.submit(encode(txn_command([], [Put("/leader-commit/k", 1)], [])), finished)
    with leader._lock:
        return compat.last_log_index(leader._syncobj), done, outcome


def _data_dir(node: RaftNode) -> Path:
    assert node.config.data_dir is not None
    return node.config.data_dir


def test_commits_without_its_own_sync_when_both_followers_answered(three_nodes: list[RaftNode], held_sync: _HeldSync) -> None:
    leader = _settled_leader(three_nodes)
    held_sync.hold(_data_dir(leader))
    index, done, outcome = _write(leader)
    assert done.wait(30), "the write never committed while the leader's own sync was held back"
    assert outcome[1] == 0  # FAIL_REASON.SUCCESS
    assert held_sync.held.is_set() and not held_sync.release.is_set()  # its own copy was still not on disk
    with leader._lock:
        assert leader._syncobj.raftCommitIndex >= index


def test_does_not_commit_with_one_follower_while_its_own_sync_is_held(three_nodes: list[RaftNode], held_sync: _HeldSync) -> None:
    leader = _settled_leader(three_nodes)
    stopped = next(n for n in three_nodes if n is not leader)
    stopped.close()  # one follower gone: the other and the leader's own copy make the majority
    held_sync.hold(_data_dir(leader))
    index, done, outcome = _write(leader)

    def follower_acknowledged() -> bool:
        with leader._lock:
            return max(compat.voter_match_indexes(leader._syncobj)) >= index

    wait_for(follower_acknowledged, 30, "the remaining follower's answer")
    wait_for(held_sync.held.is_set, 30, "the leader's helper sync to start")
    for _ in range(3):  # ticks that read every answer: none may commit
        leader.tick()
    with leader._lock:
        assert leader._syncobj.raftCommitIndex < index
    assert not done.is_set()
    held_sync.let_go()
    assert done.wait(30), "the write never committed after the leader's own sync finished"
    assert outcome[1] == 0

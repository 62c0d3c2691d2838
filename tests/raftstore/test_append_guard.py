"""A follower keeps the entries a stale or repeated AppendEntries already covers (raftstore/_append_guard.py).

A real PySyncObj follower is fed crafted AppendEntries through a transport that records its
answers instead of sending them; the guard is installed exactly as RaftNode installs it. The
same scenarios without the guard show PySyncObj 0.3.17 losing the entries (if a PySyncObj
upgrade fixes the handler, those tests fail: the guard can then go).
"""

from __future__ import annotations

import logging
import pickle
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.node import TCPNode
from pysyncobj.transport import Transport

from raftstore import _pysyncobj_compat as compat
from raftstore._append_guard import install_append_guard, trim_append_entries
from tests.support.raft_processes import Cluster, StoreProcess

SELF, LEADER, JOINER = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"  # nothing listens: the transport only records
NO_OP = bytes([1])  # PySyncObj's _COMMAND_TYPE.NO_OP: applying it changes nothing


class RecordingTransport(Transport):  # type: ignore[misc]  # pysyncobj is untyped
    """A transport that delivers nothing and keeps what the follower sends."""

    def __init__(self, syncobj: SyncObj, self_node: Any, other_nodes: Any):
        super().__init__(syncobj, self_node, other_nodes)
        self.sent: list[dict[str, Any]] = []

    def send(self, node: Any, message: dict[str, Any]) -> bool:
        self.sent.append(message)
        return True

    def deliver(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Hand `message` from the leader to the follower; its answer, if any."""
        before = len(self.sent)
        self._onMessageReceived(TCPNode(LEADER), message)
        return self.sent[-1] if len(self.sent) > before else None


class Follower:
    def __init__(self, guarded: bool):
        transports: list[RecordingTransport] = []

        def make_transport(syncobj: SyncObj, self_node: Any, other_nodes: Any) -> RecordingTransport:
            transports.append(RecordingTransport(syncobj, self_node, other_nodes))
            return transports[-1]

        # Elections far away: only the crafted messages move this member.
        conf = SyncObjConf(autoTick=False, dynamicMembershipChange=True, raftMinTimeout=1000, raftMaxTimeout=2000, connectionTimeout=2000)
        self.syncobj = SyncObj(SELF, [LEADER], conf, transportClass=make_transport)
        self.transport = transports[0]
        if guarded:
            install_append_guard(self.syncobj, self.transport)

    def append(self, prev: tuple[int, int], entries: list[tuple[bytes, int, int]], commit: int, term: int = 1) -> dict[str, Any] | None:
        return self.transport.deliver(
            {"type": "append_entries", "term": term, "prevLogIdx": prev[0], "prevLogTerm": prev[1], "entries": entries, "commit_index": commit}
        )

    def log(self) -> list[tuple[int, int]]:
        """(index, term) of every entry."""
        return [(entry[1], entry[2]) for entry in compat.journal(self.syncobj)]

    def apply(self) -> None:
        self.syncobj.doTick(0.0)


@contextmanager
def running(guarded: bool) -> Iterator[Follower]:
    made = Follower(guarded)
    try:
        yield made
    finally:
        made.syncobj.destroy()


@pytest.fixture
def follower() -> Iterator[Follower]:
    with running(guarded=True) as made:
        yield made


@pytest.fixture
def unguarded() -> Iterator[Follower]:
    with running(guarded=False) as made:
        yield made


def entries(first: int, last: int, term: int) -> list[tuple[bytes, int, int]]:
    return [(NO_OP, index, term) for index in range(first, last + 1)]


def answer(next_index: int, success: bool = True, reset: bool = False) -> dict[str, Any]:
    return {"type": "next_node_idx", "next_node_idx": next_index, "reset": reset, "success": success}


def applied_through_12(member: Follower) -> None:
    """Entries 2-10, then 11-12 (prev=10), all committed and applied."""
    assert member.append((1, 0), entries(2, 10, term=1), commit=10) == answer(11)
    assert member.append((10, 1), entries(11, 12, term=1), commit=12) == answer(13)
    member.apply()
    assert member.syncobj.raftLastApplied == 12


LOG_THROUGH_12 = [(1, 0)] + [(i, 1) for i in range(2, 13)]


@pytest.mark.parametrize("stale", [[], entries(11, 11, term=1)], ids=["heartbeat", "resend-of-11"])
def test_pysyncobj_alone_drops_committed_entries_on_a_stale_append(unguarded: Follower, stale: list[Any], caplog: pytest.LogCaptureFixture) -> None:
    """The bug the guard exists for, in PySyncObj 0.3.17 (if this fails after an upgrade, the
    handler was fixed upstream and the guard may go)."""
    applied_through_12(unguarded)
    with caplog.at_level(logging.CRITICAL):
        unguarded.append((10, 1), stale, commit=12)
    assert len(unguarded.log()) < len(LOG_THROUGH_12)
    assert "truncating already-applied log entries" in caplog.text


@pytest.mark.parametrize(
    "stale, next_index",
    [([], 11), (entries(11, 11, term=1), 12), (entries(11, 12, term=1), 13)],
    ids=["heartbeat", "resend-of-11", "resend-of-11-12"],
)
def test_a_stale_append_keeps_committed_entries_and_reports_what_it_matched(
    follower: Follower, stale: list[Any], next_index: int, caplog: pytest.LogCaptureFixture
) -> None:
    applied_through_12(follower)
    with caplog.at_level(logging.CRITICAL):
        reply = follower.append((10, 1), stale, commit=12)
    assert follower.log() == LOG_THROUGH_12
    assert reply == answer(next_index)  # what this message confirmed, not the local log end
    assert follower.syncobj.raftCommitIndex == 12
    assert "truncating" not in caplog.text


def test_unconfirmed_entries_are_kept_but_neither_committed_nor_reported(follower: Follower) -> None:
    """Entries 3-4 of an old term, uncommitted; a new leader's heartbeat at prev=2 with commit
    index 4 (its own 3-4, which may differ): commit stops at 2, the answer says 3."""
    follower.append((1, 0), entries(2, 4, term=1), commit=2)
    reply = follower.append((2, 1), [], commit=4, term=3)
    assert follower.log() == [(1, 0), (2, 1), (3, 1), (4, 1)]
    assert follower.syncobj.raftCommitIndex == 2
    assert reply == answer(3)


def test_a_conflicting_entry_still_truncates_from_the_conflict(follower: Follower) -> None:
    follower.append((1, 0), entries(2, 5, term=1), commit=2)
    reply = follower.append((2, 1), entries(3, 3, term=1) + entries(4, 4, term=2), commit=4, term=2)
    assert follower.log() == [(1, 0), (2, 1), (3, 1), (4, 2)]
    assert reply == answer(5)
    assert follower.syncobj.raftCommitIndex == 4


def test_entries_past_the_log_end_are_appended_after_the_held_ones(follower: Follower) -> None:
    follower.append((1, 0), entries(2, 3, term=1), commit=1)
    reply = follower.append((1, 0), entries(2, 5, term=1), commit=5)
    assert follower.log() == [(1, 0)] + [(i, 1) for i in range(2, 6)]
    assert reply == answer(6)
    assert follower.syncobj.raftCommitIndex == 5


def test_a_mismatching_prev_entry_is_still_refused(follower: Follower) -> None:
    follower.append((1, 0), entries(2, 3, term=1), commit=1)
    assert follower.append((3, 2), [], commit=1, term=2) == answer(3, success=False, reset=True)
    assert follower.append((7, 2), [], commit=1, term=2) == answer(4, success=False, reset=True)
    assert follower.log() == [(1, 0), (2, 1), (3, 1)]


def test_a_stale_heartbeat_keeps_a_membership_change(follower: Follower) -> None:
    """PySyncObj alone would also roll back the membership change among the dropped entries."""
    add_joiner = bytes([2]) + pickle.dumps(["add", JOINER, TCPNode(JOINER)])  # _COMMAND_TYPE.MEMBERSHIP
    follower.append((1, 0), [(add_joiner, 2, 1)], commit=2)
    follower.apply()
    assert JOINER in {node.id for node in follower.syncobj.otherNodes}
    assert follower.append((1, 0), [], commit=2) == answer(2)
    assert JOINER in {node.id for node in follower.syncobj.otherNodes}
    assert follower.log() == [(1, 0), (2, 1)]


def test_trim_leaves_other_messages_alone() -> None:
    terms = {1: 0, 2: 1}.get
    for message in (
        {"type": "request_vote", "term": 2},
        {"type": "append_entries", "term": 1, "serialized": b"x", "commit_index": 1},
        {"type": "append_entries", "term": 1, "prevLogIdx": 1, "prevLogTerm": 0, "transmission": "finish", "data": b"", "commit_index": 1},
    ):
        assert trim_append_entries(message, terms, 2) == (message, None)


@st.composite
def logs_and_message(draw: st.DrawFn) -> tuple[list[int], list[int], int, int, int]:
    """A follower's log and a leader's (terms of indexes 1..; they share a prefix, then the
    leader's differs from the first index where both hold an entry), an AppendEntries prev
    index inside the shared prefix, a number of entries from there, and a commit index."""
    terms = st.lists(st.integers(1, 4), max_size=6).map(sorted)
    shared = draw(terms)
    local_tail = [t + (shared[-1] if shared else 0) for t in draw(terms)]
    leader_tail = [t + (shared[-1] if shared else 0) for t in draw(terms)]
    if local_tail and leader_tail and local_tail[0] == leader_tail[0]:
        leader_tail[0] += 1
        leader_tail = [max(t, leader_tail[0]) for t in leader_tail]
    local, leader = [0, *shared, *local_tail], [0, *shared, *leader_tail]
    prev = draw(st.integers(1, len(shared) + 1))
    count = draw(st.integers(0, len(leader) - prev))
    return local, leader, prev, count, draw(st.integers(1, len(leader)))


def raft_append(local: list[int], new: list[tuple[int, int]]) -> list[int]:
    """Raft §5.3 on term lists: delete from the first conflict, then append what is missing."""
    result = list(local)
    for index, term in new:
        if index <= len(result) and result[index - 1] != term:
            del result[index - 1 :]
        if index > len(result):
            result.append(term)
    return result


@settings(max_examples=150, deadline=None)
@given(logs_and_message())
def test_every_append_follows_raft_on_a_real_follower(case: tuple[list[int], list[int], int, int, int]) -> None:
    """Whatever the follower holds past the leader's prev entry, the log, the answer and the
    commit index are Raft's: truncation only from a conflict, next index = prev + entries + 1,
    commit = min(leader commit, index of the last new entry)."""
    local, leader, prev, count, leader_commit = case
    with running(guarded=True) as member:
        member.append((1, 0), [(NO_OP, i, t) for i, t in enumerate(local[1:], 2)], commit=1, term=max(local))
        new = [(NO_OP, i, leader[i - 1]) for i in range(prev + 1, prev + count + 1)]
        reply = member.append((prev, leader[prev - 1]), new, commit=leader_commit, term=max(leader + local))
        assert [term for _, term in member.log()] == raft_append(local, [(i, t) for _, i, t in new])
        assert reply == answer(prev + count + 1)
        assert member.syncobj.raftCommitIndex == max(1, min(leader_commit, prev + count))


@pytest.mark.cluster
def test_no_member_truncates_under_write_load(cluster3: Cluster) -> None:
    """Three voters as processes, concurrent writers through every member: no follower logs
    PySyncObj's CRITICAL truncation of applied entries, and every acknowledged write is there."""
    acknowledged: list[str] = []
    errors: list[Exception] = []

    def write(member: StoreProcess, writer: int) -> None:
        for i in range(150):
            key = f"/load/{writer}/{i:04d}"
            try:
                member.call("put", key=key, value=i, timeout=30)
                acknowledged.append(key)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(member, n)) for n, member in enumerate(cluster3.members * 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors
    leader = cluster3.leader()
    stored = {kv["key"] for kv in leader.call("list", prefix="/load/")}
    assert set(acknowledged) <= stored
    for member in cluster3.members:
        assert "truncating" not in (member.data_dir / "stderr.log").read_text(errors="replace"), member.listen

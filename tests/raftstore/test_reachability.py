"""Which voters a member cannot reach, since when, and whether it can commit (issue 15 item 5),
with real member processes."""

from __future__ import annotations

import time

import pytest

from raftstore._types import commit_blockers
from tests.support.raft_processes import Cluster
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster

A, B, C = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"


@pytest.mark.parametrize(
    "leader, connected, has_quorum, disk, expected",
    [
        (A, (B,), True, None, ()),  # the leader with a majority
        (B, (B,), True, None, ()),  # a follower linked to the leader
        (B, (C,), True, None, ("it has no link to the leader 127.0.0.1:2",)),  # a majority, but cut off from the leader
        (None, (B, C), True, None, ("it knows no leader (an election is under way, or too few voters are reachable)",)),
        (A, (), False, None, ("it reaches 1 of 3 voters, a majority is 2",)),  # a leader alone
        (
            A,
            (B, C),
            True,
            "cannot write /d/raft.journal: No space left on device (ENOSPC)",
            ("its data dir is unwritable (cannot write /d/raft.journal: No space left on device (ENOSPC))",),
        ),
    ],
)
def test_commit_blockers(leader: str | None, connected: tuple[str, ...], has_quorum: bool, disk: str | None, expected: tuple[str, ...]) -> None:
    blockers = commit_blockers(self_address=A, voters=(A, B, C), leader=leader, connected_voters=connected, has_quorum=has_quorum, disk_problem=disk)
    assert blockers == expected


def test_unreachable_voters_are_listed_with_the_time_they_went_away(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    first, second = [m for m in cluster3.members if m is not leader]
    healthy = wait_for(lambda: not (s := leader.status())["commit_blockers"] and not s["unreachable_voters"] and s, 20, "every voter reachable")
    assert healthy["has_quorum"]

    before = time.time()
    first.kill()
    status = wait_for(lambda: (s := leader.status())["unreachable_voters"] and s, 20, "the killed voter to be reported")
    [(address, since)] = status["unreachable_voters"]
    assert address == first.listen and before - 1 <= since <= time.time()
    assert status["commit_blockers"] == [], "two of three voters still commit"

    second.kill()
    survivor = wait_for(lambda: len((s := leader.status())["unreachable_voters"]) == 2 and s, 20, "both killed voters reported")
    assert dict(survivor["unreachable_voters"])[first.listen] == since, "the first one's time is kept, not reset"
    assert "it reaches 1 of 3 voters, a majority is 2" in survivor["commit_blockers"] and not survivor["has_quorum"]

    first.start()
    back = wait_for(lambda: not (s := leader.status())["commit_blockers"] and s, 30, "a quorum again after a restart")
    assert [a for a, _ in back["unreachable_voters"]] == [second.listen]

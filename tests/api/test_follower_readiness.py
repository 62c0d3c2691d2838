"""/readyz of a follower of the store: not ready when it lags past the bounds, and why."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from contivd.api.health import FOLLOWER_MAX_LAG_REVISIONS, FOLLOWER_MAX_LAG_SECONDS, readiness_failures, store_view
from raftstore import StoreStatistics

FOLLOWING = StoreStatistics(
    self_address=None, role="store_follower", leader="198.18.0.1:9002", term=0, commit_index=0, last_applied=0, log_length=0,
    revision=500, keys=40, leases=0, voters=("198.18.0.1:9002", "198.18.0.2:9002", "198.18.0.3:9002"), connected_voters=("198.18.0.2:9002",),
    readonly_members=0, has_quorum=True, fsync=False, commit_blockers=(), feed_voter="198.18.0.2:9002", lag_revisions=0, lag_seconds=0.3,
)  # fmt: skip


class Statistics:
    """What readiness_failures reads of a store: its statistics."""

    def __init__(self, stats: StoreStatistics):
        self.stats = stats

    def statistics(self) -> StoreStatistics:
        return self.stats


def failures(stats: StoreStatistics) -> dict[str, str]:
    return readiness_failures(cast(Any, Statistics(stats)), None)


def test_a_follower_in_step_is_ready_and_says_whom_it_follows() -> None:
    assert failures(FOLLOWING) == {}
    assert store_view(FOLLOWING) == {"role": "follower", "revision": 500, "follows": "198.18.0.2:9002", "lag_revisions": 0, "lag_seconds": 0.3}


def test_a_follower_too_far_behind_or_silent_too_long_is_not_ready() -> None:
    behind = failures(replace(FOLLOWING, lag_revisions=FOLLOWER_MAX_LAG_REVISIONS + 1))
    assert list(behind) == ["follower_lag"] and f"{FOLLOWER_MAX_LAG_REVISIONS + 1} revisions behind" in behind["follower_lag"]
    silent = failures(replace(FOLLOWING, lag_seconds=FOLLOWER_MAX_LAG_SECONDS + 1))
    assert list(silent) == ["follower_lag"] and "last heard from one 6.0 s ago" in silent["follower_lag"]


def test_a_follower_of_no_serving_voter_cannot_commit() -> None:
    alone = replace(FOLLOWING, feed_voter=None, has_quorum=False, commit_blockers=("it follows no voter that reaches a quorum",))
    assert failures(alone)["store_commit"] == "this node cannot commit writes: it follows no voter that reaches a quorum"

"""The systemd STATUS= line: what an operator reads in `systemctl status contivd`."""

from __future__ import annotations

from datetime import UTC, datetime

from contivd.agent.service import AgentStatistics
from contivd.k8s import KubeStatusView
from contivd.main import status_line
from raftstore import StoreStatistics


def store(**changes: object) -> StoreStatistics:
    values: dict[str, object] = dict(
        self_address="198.18.0.1:9002", role="leader", leader="198.18.0.1:9002", term=3, commit_index=10, last_applied=10, log_length=10,
        revision=5, keys=7, leases=0, voters=("198.18.0.1:9002", "198.18.0.2:9002", "198.18.0.3:9002"), connected_voters=("198.18.0.2:9002",),
        readonly_members=1, has_quorum=True, fsync=True,
    )  # fmt: skip
    values.update(changes)
    return StoreStatistics(**values)  # type: ignore[arg-type]


def agent(**changes: object) -> AgentStatistics:
    values: dict[str, object] = dict(
        bridges=("contivVxlanBridge",), round=1, flows=214, groups=2, syncs=9, problems=(), last_error="", switch_connected=True, first_sync_done=True,
        last_sync_unix=datetime(2026, 1, 2, 14, 2, 11, tzinfo=UTC).timestamp(), last_sync_seconds=0.009, sync_failures=0,
    )  # fmt: skip
    values.update(changes)
    return AgentStatistics(**values)  # type: ignore[arg-type]


def test_leader_with_agent() -> None:
    assert status_line(store(), agent(), 12) == (
        "leader (term 3); leader 198.18.0.1:9002; 3 voters (2 up), 1 read-only; 12 endpoints on this node; last reconcile 14:02:11 UTC (9 ms, 214 flows)"
    )


def test_read_only_member_without_agent_and_no_leader() -> None:
    line = status_line(store(role="readonly", self_address=None, leader=None, connected_voters=()), None, 0)
    assert line == "read-only member (term 3); leader none; 3 voters (0 up), 1 read-only; 0 endpoints on this node"


def test_agent_before_its_first_reconcile_with_the_switch_down() -> None:
    line = status_line(store(), agent(last_sync_unix=0.0, first_sync_done=False, switch_connected=False), 0)
    assert line.endswith("; no reconcile yet; switch disconnected")


def test_the_watching_leader_says_how_the_kubernetes_watch_does() -> None:
    healthy = KubeStatusView(watching=True, problems={}, services=4)
    assert status_line(store(), None, 0, healthy).endswith("; 0 endpoints on this node; kubernetes: 4 services")
    failing = KubeStatusView(watching=True, problems={"services": "the API server is unreachable: refused"}, services=4)
    assert status_line(store(), None, 0, failing).endswith("; kubernetes: 4 services; kubernetes services: the API server is unreachable: refused")
    assert "kubernetes" not in status_line(store(role="follower"), None, 0, KubeStatusView(watching=False, problems={}, services=0))
    unusable = KubeStatusView(watching=False, problems={"kubeconfig": "kubeconfig /etc/k cannot be used"}, services=0)
    assert status_line(store(role="follower"), None, 0, unusable).endswith("; kubernetes kubeconfig: kubeconfig /etc/k cannot be used")


def test_a_follower_says_whom_it_follows_and_how_far_behind_it_is() -> None:
    follower = store(
        role="store_follower", self_address=None, term=0, readonly_members=0, revision=120, feed_voter="198.18.0.2:9002",
        lag_revisions=3, lag_seconds=0.42,
    )  # fmt: skip
    assert status_line(follower, None, 2) == (
        "follower of the store (revision 120, 3 behind, last heard 0.4 s ago); follows 198.18.0.2:9002; leader 198.18.0.1:9002; 2 endpoints on this node"
    )
    assert "follows no voter" in status_line(store(role="store_follower", self_address=None, feed_voter=None), None, 0)


def test_a_voter_says_how_many_followers_it_feeds() -> None:
    assert "; 3 voters (2 up), 1 read-only, 7 followers fed here; " in status_line(store(followers=7), None, 0)

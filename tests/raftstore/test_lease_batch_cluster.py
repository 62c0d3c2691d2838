"""Followers' lease keepalives coalesced by their voters (`_lease_batch.py`), with real
processes: one Raft command per voter and window instead of one per keepalive, each follower
still answered for its own lease, leases still expiring when not renewed, and each keepalive
proposed alone while a voter speaks only the previous wire format."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import pytest

from tests.support.raft_processes import Cluster, StoreProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster


def start_followers(cluster: Cluster, count: int) -> list[StoreProcess]:
    followers = [StoreProcess(None, cluster.addresses, cluster.root / f"f{i}", cluster.secret, follow=f"f{i}") for i in range(count)]
    cluster.extra.extend(followers)
    for follower in followers:
        follower.start(wait_ready=False)
    for follower in followers:
        follower._ready.get(timeout=30)
    for follower in followers:
        wait_for(lambda f=follower: f.status()["feed_voter"] and f.status()["has_quorum"], 20, "every follower to follow a serving voter")  # type: ignore[misc]
    return followers


def keepalive_round(calls: list[tuple[StoreProcess, int]]) -> list[dict[str, Any]]:
    """Every keepalive sent at once (each follower renews concurrently), then every answer."""
    pending = [member._send({"op": "keepalive", "lease": lease}) for member, lease in calls]
    try:
        return [q.get(timeout=20) for q in pending]
    except queue.Empty:
        raise AssertionError("a keepalive got no answer within 20 s") from None


def commands_applied(cluster: Cluster) -> int:
    return int(cluster.leader().status()["commands_applied"])


def test_followers_keepalives_cost_one_command_per_voter_and_window(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 3)
    try:
        cluster.start()
        followers = start_followers(cluster, 20)
        leases = [f.call("grant", ttl=60) for f in followers]
        for follower, lease in zip(followers, leases, strict=True):
            follower.call("put", key=f"/nodes/{follower.follow}", value={"lease": lease}, lease=lease)
        assert all(v == 3 for m in cluster.members for _, v in m.status()["wire_formats"])
        before = commands_applied(cluster)
        rounds, answers = 10, []
        for _ in range(rounds):
            answers += keepalive_round(list(zip(followers, leases, strict=True)) + [(followers[0], 987654)])
        spent = commands_applied(cluster) - before
        keepalives = rounds * (len(followers) + 1)
        print(f"{keepalives} keepalives from {len(followers)} followers: {spent} commands applied on the leader")
        gone = answers[len(followers) :: len(followers) + 1]
        renewed = [a for a in answers if a not in gone]
        assert all(a["ok"] for a in renewed), [a for a in renewed if not a["ok"]][:3]
        assert all(not a["ok"] and a["error"] == "LeaseNotFoundError" for a in gone), gone[:3]
        assert spent <= keepalives / 4, f"{spent} commands for {keepalives} keepalives"

        # A short lease renewed through the batches lives on; one nobody renews expires, and so
        # does the first once its follower is gone.
        held, dropped = followers[1], followers[2]
        kept_lease, lost_lease = held.call("grant", ttl=2), dropped.call("grant", ttl=2)
        held.call("put", key="/short/held", value=1, lease=kept_lease)
        dropped.call("put", key="/short/dropped", value=1, lease=lost_lease)
        held.call("hold_lease", lease=kept_lease, ttl=2)
        leader = cluster.leader()
        wait_for(lambda: leader.call("get", key="/short/dropped") is None, 20, "the lease nobody renews to expire")
        renewals_since = commands_applied(cluster)
        wait_for(lambda: commands_applied(cluster) >= renewals_since + 6, 20, "six more renewals of the held lease")
        assert leader.call("get", key="/short/held") is not None, "a lease renewed through batches must not expire"
        held.kill()
        wait_for(lambda: leader.call("get", key="/short/held") is None, 20, "the lease of the killed follower to expire")
    finally:
        cluster.close()


def test_with_a_voter_on_the_previous_wire_format_each_keepalive_is_its_own_command(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 3)
    cluster.members[0].extra = ("--wire-format", "2")  # the release before the batched command
    try:
        cluster.start()
        followers = start_followers(cluster, 6)
        leases = [f.call("grant", ttl=60) for f in followers]
        before = commands_applied(cluster)
        rounds = 5
        for _ in range(rounds):
            answers = keepalive_round(list(zip(followers, leases, strict=True)))
            assert all(a["ok"] for a in answers), answers
        spent = commands_applied(cluster) - before
        print(f"{rounds * len(followers)} keepalives, a voter on wire format 2: {spent} commands applied on the leader")
        assert spent >= rounds * len(followers)
    finally:
        cluster.close()

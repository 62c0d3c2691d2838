"""Followers of the store (`serve --follow`): fed by a voter, not Raft members; real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.raft_processes import Cluster, RemoteError, StoreProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster


def keys_of(image: dict[str, Any]) -> tuple[int, list[Any]]:
    """What a follower mirrors exactly: the revision and every key record (the lease table
    stays with the voters)."""
    return image["revision"], image["keys"]


def voter_of(follower: StoreProcess, cluster: Cluster) -> StoreProcess:
    address = wait_for(lambda: follower.status()["feed_voter"], 10, "the follower to follow a voter")
    return next(m for m in cluster.members if m.listen == address)


def same_state(follower: StoreProcess, voter: StoreProcess) -> bool:
    wanted = keys_of(voter.call("image"))
    follower.call("sync")
    return bool(keys_of(follower.call("image", timeout=10)) == wanted)


def test_followers_hold_the_voters_state_and_write_through_them(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    voter = next(m for m in cluster3.members if m is not leader)
    leader.call("put", key="/f/before", value={"n": 0})
    followers = [cluster3.add_follower("alpha"), cluster3.add_follower("beta")]
    one, two = followers
    assert one.call("get", key="/f/before")["value"] == {"n": 0}, "the state from before it started"
    voter.call("put", key="/f/via-voter", value=1)
    revision = one.call("put", key="/f/via-follower", value=2)
    assert one.call("get", key="/f/via-follower", stale=True)["mod_revision"] == revision, "read-your-writes"
    txn = two.call(
        "txn", **{"if": [{"key": "/f/via-voter", "check": "mod_revision", "value": 0}], "then": [], "else": [{"op": "delete", "key": "/f/via-voter"}]}
    )
    assert txn["succeeded"] is False and txn["results"] == [1]
    lease = two.call("grant", ttl=30)
    two.call("put", key="/f/leased", value=3, lease=lease)
    assert leader.call("get", key="/f/leased")["lease"] == lease
    two.call("revoke", lease=lease)
    with pytest.raises(RemoteError, match="LeaseNotFoundError"):
        one.call("keepalive", lease=lease)
    assert one.call("delete_prefix", prefix="/f/via") == 1
    for follower in followers:
        assert same_state(follower, leader), "a follower's keys and revision equal the voters'"
        status = follower.status()
        assert status["role"] == "store_follower" and status["lag_revisions"] == 0 and status["leader"] == leader.listen
    assert sum(m.status()["followers"] for m in cluster3.members) == 2
    assert leader.status()["readonly_members"] == 0, "followers are not Raft members"


def test_followers_keep_off_the_leader_while_another_voter_feeds_them(cluster3: Cluster) -> None:
    followers = [cluster3.add_follower(f"kappa{i}") for i in range(4)]
    leader = cluster3.leader()

    def fed_by_others(leader: StoreProcess) -> bool:
        return leader.status()["followers"] == 0 and sum(m.status()["followers"] for m in cluster3.members) == len(followers)

    wait_for(lambda: fed_by_others(leader), 20, "every follower to follow a voter that does not lead")
    target = voter_of(followers[0], cluster3)
    wait_for(lambda: leader.call("transfer_leadership", to=target.listen) or True, 20, "the leadership transfer to be accepted")
    wait_for(lambda: cluster3.leader() is target, 20, "the followed voter to lead")
    wait_for(lambda: fed_by_others(target), 20, "the new leader's followers to move to another voter")
    assert followers[0].call("put", key="/k/after", value=1, timeout=30) > 0


def test_a_voter_killed_under_watching_and_writing_followers_loses_and_repeats_nothing(cluster3: Cluster) -> None:
    followers = [cluster3.add_follower(f"node{i}") for i in range(2)]
    watches = [f.watch("/w/", start_revision=1) for f in followers]
    acknowledged: list[tuple[int, int]] = []
    revisions_seen: list[list[int]] = [[], []]
    stop = threading.Event()

    def write(index: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                followers[index].call("put", key=f"/w/{index}/{i:05d}", value=i, timeout=15)
                acknowledged.append((index, i))
            except (RemoteError, TimeoutError):
                pass  # unavailable during the move: retried under a new key, never counted
            revisions_seen[index].append(followers[index].status()["revision"])
            i += 1

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(acknowledged) > 40, 30, "writes before the kill")
        victim = voter_of(followers[0], cluster3)
        victim.kill()
        count = len(acknowledged)
        wait_for(lambda: len(acknowledged) > count + 40, 30, "writes after the kill")
        assert followers[0].status()["feed_voter"] != victim.listen, "it moved to another voter"
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    for seen in revisions_seen:
        assert seen == sorted(seen), "a follower's revision never goes back"
    survivor = cluster3.leader()
    stored = {kv["key"] for kv in survivor.call("list", prefix="/w/")}
    assert {f"/w/{i}/{n:05d}" for i, n in acknowledged} <= stored, "no acknowledged write lost"
    for follower, watch in zip(followers, watches, strict=True):
        assert wait_for(lambda: same_state(follower, survivor), 20, "the follower to catch up")
        events = []
        while len(events) < len(stored):
            events.append(watch.get(timeout=10)["event"])
        assert [e["type"] for e in events] == ["put"] * len(stored), "every change once, no resync needed"
        assert sorted(e["key"] for e in events) == sorted(stored), "nothing twice, nothing missing"
        assert [e["revision"] for e in events] == sorted(e["revision"] for e in events), "in revision order"


def test_a_restarted_follower_starts_over_and_a_partitioned_voter_loses_its_followers(cluster3: Cluster) -> None:
    follower = cluster3.add_follower("gamma")
    for i in range(20):
        cluster3.leader().call("put", key=f"/r/{i}", value=i)
    follower.kill()
    follower.start()
    assert wait_for(lambda: same_state(follower, cluster3.leader()), 20, "the restarted follower to hold the state")
    voter = voter_of(follower, cluster3)
    assert voter.proc is not None
    os.kill(voter.proc.pid, signal.SIGSTOP)  # cut off: silent, as behind a partition
    try:
        wait_for(lambda: follower.status()["feed_voter"] not in (None, voter.listen), 20, "the follower to leave the silent voter")
        revision = follower.call("put", key="/r/during", value="cut off", timeout=30)
        assert follower.call("get", key="/r/during", stale=True)["mod_revision"] == revision
    finally:
        os.kill(voter.proc.pid, signal.SIGCONT)
    assert wait_for(lambda: same_state(follower, cluster3.leader()), 20, "the follower to stay in step")


def test_a_follower_cut_off_longer_than_the_history_resumes_from_an_image(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 3)
    for member in cluster.members:
        member.extra = ("--history", "20")
    try:
        cluster.start()
        leader = cluster.leader()
        follower = cluster.add_follower("delta")
        leader.call("put", key="/h/first", value=0)
        watch = follower.watch("/h/", start_revision=1)
        assert watch.get(timeout=10)["event"]["key"] == "/h/first"
        wait_for(lambda: follower.status()["revision"] >= 1, 10, "the follower to hold the first write")
        voter = voter_of(follower, cluster)
        assert follower.proc is not None
        os.kill(follower.proc.pid, signal.SIGSTOP)
        try:
            voter.kill()  # its link is gone; the others' history moves past the follower's revision
            leader = cluster.leader()
            for i in range(60):
                leader.call("put", key=f"/h/{i:03d}", value=i)
        finally:
            os.kill(follower.proc.pid, signal.SIGCONT)
        assert wait_for(lambda: same_state(follower, leader), 30, "the follower to catch up")
        event = watch.get(timeout=10)["event"]
        assert event["type"] == "resync", "an image, replayed to its watch as a resync"
        keys = {kv["key"] for kv in event["kvs"]}
        while len(keys) < 61:  # the image's voter may apply the last write a moment after the leader: it follows as an event
            keys.add(watch.get(timeout=10)["event"]["key"])
        assert keys == {"/h/first", *(f"/h/{i:03d}" for i in range(60))}
    finally:
        cluster.close()


def test_a_follower_with_the_wrong_secret_gets_nothing_and_harms_nothing(cluster3: Cluster) -> None:
    stranger = StoreProcess(None, cluster3.addresses, cluster3.root / "stranger", secret="not-the-cluster-secret", follow="stranger").start()
    cluster3.extra.append(stranger)
    cluster3.leader().call("put", key="/s/secret", value="hidden")
    time.sleep(2)  # several connection attempts
    status = stranger.status()
    assert status["feed_voter"] is None and status["keys"] == 0
    with pytest.raises(RemoteError, match="UnavailableError"):
        stranger.call("put", key="/s/forged", value=1, timeout=30)
    assert all(m.status()["followers"] == 0 for m in cluster3.members)
    assert cluster3.leader().call("get", key="/s/forged") is None
    assert cluster3.leader().call("put", key="/s/after", value=1) > 0, "the cluster still commits"


def test_the_follower_path_never_imports_pysyncobj() -> None:
    code = (
        "import sys, raftstore\n"
        "from raftstore import FollowerConfig, FollowerStore, open_follower, MemoryStore\n"
        "import raftstore._serve, raftstore._cli\n"
        "assert 'pysyncobj' not in sys.modules, sorted(m for m in sys.modules if 'pysyncobj' in m)\n"
        "from raftstore import Store\n"
        "assert 'pysyncobj' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr


def test_a_voter_that_loses_its_quorum_stops_serving_its_followers(cluster3: Cluster) -> None:
    follower = cluster3.add_follower("epsilon")
    cluster3.leader().call("put", key="/q/before", value=1)
    wait_for(lambda: follower.status()["revision"] >= 1, 10, "the follower to hold the write")
    voter = voter_of(follower, cluster3)
    others = [m for m in cluster3.members if m is not voter]
    for other in others:
        assert other.proc is not None
        os.kill(other.proc.pid, signal.SIGSTOP)  # the followed voter is alive, alone: no quorum, no leader
    try:
        wait_for(lambda: voter.status()["leader"] is None, 20, "the lone voter to know no leader")
        wait_for(lambda: not follower.status()["has_quorum"], 10, "the follower to see its voter does not serve")
        status = follower.status()
        assert status["commit_blockers"] and status["feed_voter"] in (None, voter.listen)
        assert follower.call("get", key="/q/before", stale=True)["value"] == 1, "stale reads go on"
        with pytest.raises(RemoteError, match="UnavailableError"):
            follower.call("put", key="/q/during", value=2, timeout=30)
    finally:
        for other in others:
            assert other.proc is not None
            os.kill(other.proc.pid, signal.SIGCONT)
    wait_for(lambda: follower.status()["has_quorum"], 20, "the follower to follow a serving voter again")
    assert follower.call("put", key="/q/after", value=3, timeout=30) > 1

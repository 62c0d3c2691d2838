"""`contivd ctl cluster voter add|remove` with real `contivd` processes on loopback.

A single-voter cluster (what `restore` and `recover` leave) grows back to three voters and
then survives the loss of its first node, which the others remove; wrong requests are refused
with the status and message an operator needs, and change nothing.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.control.test_backup import NET, answers, contivd, create_endpoint, new_node, ok
from tests.support.contivd_nodes import ContivdCluster, ContivdProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster

VOTERS = "/api/v1/cluster/voters/"


def voters(node: ContivdProcess) -> list[str]:
    info = node.info()
    return [] if info is None else list(info["cluster"]["voters"])


def ctl(node: ContivdProcess, *args: str) -> str:
    done = contivd("ctl", "--server", f"unix:{node.socket}", "cluster", "voter", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def allocated(answer: httpx.Response) -> str | None:
    """The address a createEndpoint answer allocated; None while the cluster elects a leader (503)."""
    return str(answer.json()["EndpointConfig"]["ipAddress"]) if answer.status_code == 200 else None


def add_and_start(through: ContivdProcess, joiner: ContivdProcess) -> None:
    said = ctl(through, "add", joiner.raft)
    assert f"added voter {joiner.raft}" in said and joiner.raft in said.splitlines()[0]
    joiner.peers = [v for v in voters(through) if v != joiner.raft]
    assert f"--peers {','.join(joiner.peers)}" in said, "the next step names the peers to start it with"
    joiner.start()


def test_a_single_voter_grows_to_three_and_survives_losing_its_first_node(tmp_path: Path) -> None:
    cluster = ContivdCluster(tmp_path, 1)
    first = cluster.nodes[0]
    second, third = new_node(tmp_path, "second", []), new_node(tmp_path, "third", [])
    try:
        cluster.start(90)
        ok(first, "/api/v1/networks/default:pods/", NET)
        before = create_endpoint(first, "before")

        add_and_start(first, second)
        wait_for(
            lambda: answers(second, lambda: second.endpoint_addresses().get("before") == before), 90, "the second voter to catch up", interval=0.2
        )
        add_and_start(second, third)  # through a follower: forwarded to the leader
        everyone = sorted([first.raft, second.raft, third.raft])
        for node in (first, second, third):
            wait_for(lambda n=node: answers(n, lambda: voters(n) == everyone), 90, f"{node.name} to know three voters", interval=0.2)  # type: ignore[misc]
        wait_for(lambda: answers(third, lambda: third.endpoint_addresses().get("before") == before), 90, "the third voter to catch up", interval=0.2)

        first.kill()  # for good: two of three voters still commit
        after = wait_for(lambda: answers(second, lambda: allocated(second.post_endpoint("after"))), 60, "a write without the first node")
        wait_for(
            lambda: answers(third, lambda: third.endpoint_addresses().get("after") == after), 60, "the third voter to replicate it", interval=0.2
        )
        said = ctl(third, "remove", first.raft)
        assert said.strip() == f"removed voter {first.raft}; voters now: {', '.join(sorted([second.raft, third.raft]))}"
        wait_for(lambda: voters(second) == voters(third) == sorted([second.raft, third.raft]), 30, "both to drop the first node")
        assert create_endpoint(third, "later") not in (before, after)
    finally:
        cluster.close()
        for node in (second, third):
            node.kill()


def test_wrong_voter_changes_are_refused_with_the_reason_and_change_nothing(tmp_path: Path) -> None:
    cluster = ContivdCluster(tmp_path, 1)
    node = cluster.nodes[0]
    try:
        cluster.start(90)
        refusals = [
            (node.post(f"{VOTERS}not-an-address/", {}), 400, "must be host:port"),
            (node.post(f"{VOTERS}{node.raft}/", {}), 409, "is already a voter"),
            (node.delete(f"{VOTERS}127.0.0.1:1/"), 404, "127.0.0.1:1 is not a voter"),
            (node.delete(f"{VOTERS}{node.raft}/"), 409, "is the Raft leader: stop contivd on that node first"),
        ]
        for answer, status, message in refusals:
            assert answer.status_code == status, answer.text
            assert message in answer.json()["error"]
        assert voters(node) == [node.raft]
        refused = contivd("ctl", "--server", f"unix:{node.socket}", "cluster", "voter", "remove", node.raft)
        assert refused.returncode != 0 and "is the Raft leader" in refused.stderr, refused.stderr
        assert voters(node) == [node.raft]
        ok(node, "/api/v1/networks/default:pods/", NET)  # the cluster still commits
    finally:
        cluster.close()

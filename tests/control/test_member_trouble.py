"""What a node says when members go away or its disk fills (issue 15 items 4 and 5): /readyz,
`contivd ctl cluster status` and the status page's model name the unreachable members, since
when, and whether this node can commit; a full data dir answers writes with a 503 naming ENOSPC."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.control.test_api_cluster import NET as PODS
from tests.support.contivd_nodes import ContivdCluster, ContivdProcess
from tests.support.ctl_runner import invoke
from tests.support.disk import fill
from tests.support.waiting import wait_for

NET = {"tenantName": "default", "networkName": "full", "encap": "vxlan", "subnet": "198.18.7.0/24", "gateway": "198.18.7.254"}


def readyz(node: ContivdProcess) -> httpx.Response:
    return node.get("/readyz")


def status_model(node: ContivdProcess) -> dict[str, Any]:
    cluster: dict[str, Any] = node.get("/status/api/snapshot").json()["cluster"]
    return cluster


def test_unreachable_members_and_lost_commit_ability_are_reported_three_ways(cluster3: ContivdCluster) -> None:
    leader = cluster3.leader()
    first, second = cluster3.followers()
    assert readyz(leader).json()["raft"] == {"can_commit": True, "commit_blockers": [], "unreachable": []}

    before = time.time()
    first.kill()
    raft = wait_for(lambda: (r := readyz(leader).json()["raft"])["unreachable"] and r, 20, "/readyz to name the killed member")
    [gone] = raft["unreachable"]
    assert gone["address"] == first.raft and before - 1 <= datetime.fromisoformat(gone["since"]).timestamp() <= time.time()
    assert raft["can_commit"] and readyz(leader).status_code == 200, "two of three voters still commit: still ready"
    model = wait_for(lambda: (m := status_model(leader))["unreachable"] and m, 20, "the status model to name it (it is cached briefly)")
    assert model["canCommit"] and [(u["name"], u["raftAddress"]) for u in model["unreachable"]] == [(first.name, first.raft)]
    assert {m["name"]: m["unreachableSince"] is not None for m in model["members"]} == {leader.name: False, first.name: True, second.name: False}
    text = invoke(["ctl", "--server", leader.url, "cluster", "status"]).stdout
    assert "Can commit: yes\n" in text and f"Unreachable: {first.name} ({first.raft}) since " in text

    second.kill()
    answer = wait_for(lambda: (a := readyz(leader)).status_code == 503 and a, 30, "/readyz to report that this node cannot commit")
    failing = answer.json()["failing"]
    assert "it reaches 1 of 3 voters, a majority is 2" in failing["store_commit"], failing
    assert {u["address"] for u in answer.json()["raft"]["unreachable"]} == {first.raft, second.raft}
    model = wait_for(lambda: not (m := status_model(leader))["canCommit"] and m, 20, "the status model to say this node cannot commit")
    assert any("a majority is 2" in b for b in model["commitBlockers"])
    text = invoke(["ctl", "--server", leader.url, "cluster", "status"]).stdout
    assert "Can commit: NO: " in text and first.name in text.split("Unreachable: ")[1].splitlines()[0]


def test_a_full_data_dir_answers_writes_with_503_naming_enospc_and_recovers(tmp_path: Path, small_filesystem: Path) -> None:
    cluster = ContivdCluster(tmp_path, 1)
    node = cluster.nodes[0]
    node.extra = ("--data-dir", str(small_filesystem))  # the later --data-dir wins; the log stays outside the full filesystem
    try:
        cluster.start(60)
        filler = fill(small_filesystem, 0)
        answer = wait_for(
            lambda: (a := node.post("/api/v1/networks/default:full/", NET)).status_code == 503 and a,
            30,
            "a write refused on the full disk",
            interval=0.5,
        )
        assert "ENOSPC" in answer.json()["error"] and str(small_filesystem) in answer.json()["error"], answer.text
        assert answer.headers.get("retry-after") == "1"
        contiv = node.post("/api/v1/networks/default:full/", NET, headers={"Accept": "*/*"})
        assert contiv.status_code == 500 and "ENOSPC" in contiv.text, "Contiv's contract for other clients (shared Decision 1)"
        ready = readyz(node).json()
        assert "ENOSPC" in ready["failing"]["store_commit"], ready
        assert node.get("/api/v1/networks/default:full/").status_code in (404, 503), "nothing half-written"
        time.sleep(2)
        assert node.alive(), node.log_text()

        filler.unlink()
        created = wait_for(
            lambda: (a := node.post("/api/v1/networks/default:full/", NET)).status_code == 200 and a, 30, "writes to succeed again", interval=0.5
        )
        assert created.json()["key"] == "default:full"
        wait_for(lambda: readyz(node).status_code == 200, 30, "ready again without a restart")
        assert node.alive() and node.log_text().count("data dir unwritable") == 1, node.log_text()
    finally:
        cluster.close()


def test_contivd_refuses_to_start_on_a_damaged_journal_naming_the_file(tmp_path: Path) -> None:
    cluster = ContivdCluster(tmp_path, 1)
    node = cluster.nodes[0]
    try:
        cluster.start(60)
        assert node.post("/api/v1/networks/default:full/", NET).status_code == 200
        time.sleep(1.5)  # the member records its commit index once a second
        node.kill()
        journal = node.data_dir / "raft" / "raft.journal"
        end = int.from_bytes(journal.read_bytes()[36:40], "little")  # where PySyncObj's header says the records end
        os.truncate(journal, end - 7)
        node.start()
        assert node.proc is not None
        assert node.proc.wait(timeout=60) == 1
        log = node.log_text()
        assert f"refusing to start: {journal} is truncated" in log and f"Error: cannot start the store member: {journal} is truncated" in log, log
        assert "Traceback" not in log.split("refusing to start")[1], log
    finally:
        cluster.close()


@pytest.mark.cluster
def test_every_node_sigkilled_during_create_endpoint_streams_keeps_every_acknowledged_endpoint(cluster3: ContivdCluster) -> None:
    assert cluster3.nodes[0].post("/api/v1/networks/default:pods/", PODS).status_code == 200
    acknowledged: dict[str, str] = {}
    stop = threading.Event()

    def stream(node: ContivdProcess) -> None:
        i = 0
        with node.socket_client(timeout=10, headers={"Accept": "application/json"}) as client:
            while not stop.is_set():
                ep = f"{node.name}-{i}"
                body = {"TenantName": "default", "NetworkName": "pods", "EndpointID": ep, "ConfigEP": {"Container": ep}}
                try:
                    answer = client.post("/plugin/createEndpoint", json=body)
                    if answer.status_code == 200:
                        acknowledged[ep] = answer.json()["EndpointConfig"]["ipAddress"]
                except httpx.HTTPError:
                    pass  # the node died under the request: not acknowledged
                i += 1

    threads = [threading.Thread(target=stream, args=(n,), daemon=True) for n in cluster3.nodes]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(acknowledged) >= 60, 60, "endpoints acknowledged before the crash")
        for node in cluster3.nodes:  # the streams are still writing
            node.kill()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    for node in cluster3.nodes:
        node.log.close()
    cluster3.start(60)  # every node restarts from its data dir
    stored = cluster3.nodes[0].endpoint_addresses()
    lost = {ep: ip for ep, ip in acknowledged.items() if stored.get(ep) != ip}
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged endpoints lost or changed: {list(lost)[:5]}"
    assert len(set(stored.values())) == len(stored), "no address is used twice"
    oper = cluster3.nodes[0].get("/api/v1/inspect/networks/default:pods/").json()["Oper"]
    assert oper["allocatedAddressesCount"] == len(stored), "no address allocated without an endpoint"

"""Backup, restore and quorum-loss recovery with real `contivd` processes on loopback.

`contivd ctl cluster snapshot save` against a 3-node cluster, `contivd restore` into a new data
dir, `contivd run` on it (every object and endpoint served, writes accepted, a read-only member
joins); damaged files refused; `contivd recover` on the survivor of a cluster that lost two of
three voters for good.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.contivd_nodes import SECRET, ContivdCluster, ContivdProcess
from tests.support.waiting import free_ports, wait_for

pytestmark = pytest.mark.cluster

NET = {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": "198.18.0.0/20", "gateway": "198.18.15.254"}
COLLECTIONS = ("tenants", "networks", "endpointGroups", "policys", "rules", "netprofiles", "serviceLBs", "appProfiles", "globals")


def contivd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
    env["CONTIVD_CLUSTER_SECRET"] = SECRET
    return subprocess.run([sys.executable, "-m", "contivd", *args], capture_output=True, text=True, env=env, timeout=180)


def ok(node: ContivdProcess, path: str, body: Any) -> Any:
    answer = node.post(path, body)
    assert answer.status_code == 200, (path, answer.text)
    return answer.json()


def create_endpoint(node: ContivdProcess, ep: str, group: str = "") -> str:
    answer = node.post_endpoint(ep, group)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["EndpointConfig"]["ipAddress"])


def populate(cluster: ContivdCluster) -> dict[str, str]:
    """Configuration objects of several kinds and endpoints created through every node."""
    node = cluster.nodes[0]
    ok(node, "/api/v1/networks/default:pods/", NET)
    ok(node, "/api/v1/policys/default:web-in/", {"tenantName": "default", "policyName": "web-in"})
    rule = {"tenantName": "default", "policyName": "web-in", "ruleId": "1", "direction": "in", "protocol": "tcp", "port": 80, "action": "allow"}
    ok(node, "/api/v1/rules/default:web-in:1/", rule)
    ok(node, "/api/v1/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "pods", "policies": ["web-in"]})
    acked = {}
    for i in range(30):
        ep = f"ep{i}"
        acked[ep] = create_endpoint(cluster.nodes[i % 3], ep, "web" if i % 2 else "")
    return acked


def served(node: ContivdProcess) -> dict[str, Any]:
    """What the API answers about every object and endpoint (not node-local fields)."""
    view: dict[str, Any] = {c: node.get(f"/api/v1/{c}/").json() for c in COLLECTIONS}
    ofnet = node.get("/debug/ofnet").json()
    view["endpoints"], view["rules"] = ofnet["EndpointDb"], ofnet["PolicyDb"]
    view["pods"] = node.get("/api/v1/inspect/networks/default:pods/").json()["Oper"]
    return view


def new_node(root: Path, name: str, peers: list[str], *extra: str, follower: bool = False) -> ContivdProcess:
    raft_port, api_port = free_ports(2)
    node = ContivdProcess(name, root, f"127.0.0.1:{raft_port}", api_port, peers, follower=follower)
    node.extra = extra
    return node


def answers(node: ContivdProcess, check: Callable[[], bool]) -> bool:
    """`check()` once the node's API is up; False while it starts (connection refused)."""
    try:
        return node.alive() and check()
    except httpx.HTTPError:
        return False


def wait_serving(node: ContivdProcess, what: str) -> None:
    wait_for(lambda: answers(node, lambda: node.get("/api/v1/networks/default:pods/").status_code == 200), 90, what, interval=0.2)


def wait_replicated(node: ContivdProcess, ep: str, address: str) -> None:
    wait_for(lambda: answers(node, lambda: node.endpoint_addresses().get(ep) == address), 90, f"{node.name} to replicate {ep}", interval=0.2)


def serves_everything_alone_then_accepts_a_member(
    node: ContivdProcess, joiner: ContivdProcess, before: dict[str, Any], acked: dict[str, str]
) -> None:
    """`node` (a new single-voter cluster) serves what the old cluster served, takes a write
    that allocates a fresh address, and a new follower of the store holds it."""
    node.start()
    wait_serving(node, f"{node.name} to serve")
    assert served(node) == before
    assert node.endpoint_addresses() == acked
    info = node.info()
    assert info is not None and info["current-state"] == "leader" and info["cluster"]["voters"] == [node.raft]
    assert info["cluster"]["cluster_id"], "a seeded cluster has its own identity"
    fresh = create_endpoint(node, "after")
    assert fresh not in acked.values(), "the IPAM state knows every address in use"
    joiner.start()
    wait_replicated(joiner, "after", fresh)


def test_snapshot_from_a_cluster_restores_into_a_new_cluster_that_serves_it_all(tmp_path: Path) -> None:
    cluster = ContivdCluster(tmp_path / "old", 3)
    restored = new_node(tmp_path, "restored", [])
    joiner = new_node(tmp_path, "joiner", [restored.raft], follower=True)
    try:
        cluster.start(90)
        acked = populate(cluster)
        before = served(cluster.nodes[0])
        backup = tmp_path / "backup" / "store.snap"
        backup.parent.mkdir()
        admin = cluster.nodes[0].mint_token("backup-admin")  # the follower sends the client on to the leader's TCP API
        saved = contivd("ctl", "--server", cluster.followers()[0].url, "--token", admin, "cluster", "snapshot", "save", str(backup))
        assert saved.returncode == 0, saved.stderr
        assert "revision" in saved.stdout and "keys" in saved.stdout
        assert stat.S_IMODE(backup.stat().st_mode) == 0o600
        assert [p.name for p in backup.parent.iterdir()] == ["store.snap"], "no temporary file is left behind"
        cluster.close()  # the old cluster is gone; the restore must not need it

        args = ["restore", str(backup), "--data-dir", str(restored.data_dir), "--node-name", "restored", "--raft-listen", restored.raft]
        done = contivd(*args)
        assert done.returncode == 0, done.stderr
        assert "new single-voter cluster" in done.stdout
        again = contivd(*args)
        assert again.returncode != 0 and "not empty" in again.stderr, "a restore never overwrites a data dir"

        serves_everything_alone_then_accepts_a_member(restored, joiner, before, acked)
        assert served(joiner) == served(restored)
    finally:
        cluster.close()
        for node in (restored, joiner):
            node.kill()


def test_a_truncated_or_corrupted_snapshot_is_refused_naming_the_fault(tmp_path: Path) -> None:
    cluster = ContivdCluster(tmp_path / "old", 1)
    try:
        cluster.start(90)
        ok(cluster.nodes[0], "/api/v1/networks/default:pods/", NET)
        backup = tmp_path / "store.snap"
        assert contivd("ctl", "--server", f"unix:{cluster.nodes[0].socket}", "cluster", "snapshot", "save", str(backup)).returncode == 0
    finally:
        cluster.close()
    data = backup.read_bytes()
    truncated, corrupted, foreign = tmp_path / "truncated.snap", tmp_path / "corrupted.snap", tmp_path / "foreign.snap"
    truncated.write_bytes(data[: len(data) // 2])
    corrupted.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    foreign.write_bytes(b"SQLite format 3\x00" + data[16:])
    for path, fault in ((truncated, "is truncated"), (corrupted, "is corrupted: SHA-256 checksum mismatch"), (foreign, "is not a contivd snapshot")):
        target = tmp_path / f"dir-{path.stem}"
        refused = contivd("restore", str(path), "--data-dir", str(target), "--raft-listen", f"127.0.0.1:{free_ports(1)[0]}")
        assert refused.returncode == 1 and fault in refused.stderr and str(path) in refused.stderr, refused.stderr
        assert not target.exists(), "nothing is written for a refused file"


def test_recover_turns_the_survivor_of_a_lost_quorum_into_a_cluster_keeping_every_acknowledged_write(tmp_path: Path) -> None:
    cluster = ContivdCluster(tmp_path, 3)
    joiner = new_node(tmp_path, "joiner", [], follower=True)
    try:
        cluster.start(90)
        acked = populate(cluster)
        before = served(cluster.nodes[0])
        survivor = cluster.followers()[0]
        for node in cluster.nodes:
            if node is not survivor:
                node.kill()  # SIGKILL, for good
        assert survivor.stop() == 0

        flags = ["--data-dir", str(survivor.data_dir), "--raft-listen", survivor.raft]
        recovered = contivd("recover", *flags)
        assert recovered.returncode == 0, recovered.stderr
        assert "journal entries" in recovered.stdout and "kept revision" in recovered.stdout
        assert list(survivor.data_dir.glob("raft.before-recover-*")), "the old raft files are kept aside"

        joiner.peers = [survivor.raft]
        # Started with its old --peers: the recovered member list wins over them.
        serves_everything_alone_then_accepts_a_member(survivor, joiner, before, acked)
    finally:
        cluster.close()
        joiner.kill()

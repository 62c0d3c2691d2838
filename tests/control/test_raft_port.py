"""The Raft port on loopback is not a way into the store for local users (issue 26).

A Raft listener without a cluster secret takes any process that connects for a read-only
member, and the leader applies the writes its members send: on a default single-node install
every local user could write a token record or a network into the store through it. A node
without a configured secret now runs with its own (generated once, 0600 in the data dir), and
a node with peers must be given one. These tests start real nodes and attack them as a local
process would.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from raftstore import StoreConfig, UnavailableError, open_store
from tests.support.contivd_nodes import ContivdProcess
from tests.support.waiting import free_ports, wait_for

pytestmark = pytest.mark.cluster


PWNED = "/contiv.io/state/pwned"


def _read_as_member(raft: str, secret: str, key: str) -> object:
    async def read() -> object:
        async with open_store(StoreConfig(listen=None, peers=(raft,), secret=secret, request_timeout=10.0)) as store:
            kv = await store.get(key)  # linearizable: through the leader
            return None if kv is None else kv.value

    return trio.run(read)


def _write_as_member(raft: str, secret: str | None) -> int | None:
    """What a local process gets by joining the node's Raft port as a read-only member and
    writing: the revision written, or None when no leader took the write."""

    async def attack() -> int:
        async with open_store(StoreConfig(listen=None, peers=(raft,), secret=secret, request_timeout=3.0)) as store:
            return await store.put(PWNED, {"by": "a local user"})

    try:
        return trio.run(attack)
    except* UnavailableError:
        pass
    return None


def test_a_node_without_a_configured_secret_takes_no_member_without_it(tmp_path: Path) -> None:
    raft_port, api_port = free_ports(2)
    node = ContivdProcess("lone", tmp_path, f"127.0.0.1:{raft_port}", api_port, [], secret=None).start()
    try:
        wait_for(node.ready, 30, "the node to be ready")
        secret_file = node.data_dir / "cluster-secret"
        assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
        generated = secret_file.read_text().strip()
        assert len(generated) >= 32

        assert _write_as_member(node.raft, None) is None  # the node drops the unauthenticated member's frames
        assert _write_as_member(node.raft, "a-guessed-secret") is None
        assert "failed authentication" in node.log_text()
        assert node.get("/api/v1/inspect/tenants/default/").status_code == 200  # the node still serves
        # With the node's secret (root's, in its data dir) a member joins: the attempts above wrote nothing.
        assert _read_as_member(node.raft, generated, PWNED) is None

        assert node.stop() == 0
        node.start()  # a restart keeps the same secret
        wait_for(node.ready, 30, "the restarted node to be ready")
        assert secret_file.read_text().strip() == generated
    finally:
        node.kill()


def test_a_node_with_peers_needs_a_configured_secret(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
    for member in (["--peers", "127.0.0.1:1"], ["--peers", "127.0.0.1:1", "--readonly"]):
        answer = subprocess.run(
            [sys.executable, "-m", "contivd", "check-config", "--data-dir", str(tmp_path), *member],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        assert answer.returncode == 2, answer.stdout
        assert "needs --cluster-secret, the same on every node" in answer.stderr

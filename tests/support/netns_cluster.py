"""Three (or more) `contivd run` voters, each in its own network namespace, on one Linux bridge.

The bridge lives in a fabric namespace that also holds the address clients use
(`CLIENT_ADDRESS`), so a partition cut with iptables inside a node's namespace can isolate
it from its peers while clients still reach it. Addresses are in 198.18.0.0/15 and exist only
inside these namespaces; names start with `cdf-` and a random tag. Used by the partition
tests (tests/faults) and benchmarks/fault_bench.py. Everything is removed on exit, processes
by PID, even when the body fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import terminate

SECRET = "faults-cluster-secret"
SUBNET_PREFIX = "198.18.77"  # nodes are .1, .2, …; the clients' address is .254
CLIENT_ADDRESS = f"{SUBNET_PREFIX}.254"
API_PORT, RAFT_PORT = 9100, 9101  # each namespace has its own ports, so fixed ones are safe
TREE = Path(__file__).resolve().parents[2]  # this checkout: the nodes and the driver run its code


def tree_env() -> dict[str, str]:
    """The environment without CONTIVD_* settings, with this checkout first on the import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TREE), env.get("PYTHONPATH", "")]))
    return env


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=30)


@dataclass
class NetnsNode:
    """One voter: its namespace, address, data dir and process."""

    name: str
    ns: str
    host: str
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{API_PORT}"  # off loopback contivd serves TLS only

    @property
    def ca_file(self) -> Path:
        """The cluster CA the node writes once the store has one (docs/operations.md, TLS)."""
        return self.data_dir / "tls" / "ca.crt"

    @property
    def raft(self) -> str:
        return f"{self.host}:{RAFT_PORT}"

    def start(self, peers: list[str]) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = ["ip", "netns", "exec", self.ns, sys.executable, "-m", "contivd", "run", "--node-name", self.name,
                "--data-dir", str(self.data_dir), "--api-listen", f"{self.host}:{API_PORT}", "--raft-listen", self.raft,
                "--peers", ",".join(peers), "--control-ip", self.host, "--datapath", "none", "--api-socket", "run/api.sock"]  # fmt: skip
        env = tree_env()
        env["CONTIVD_CLUSTER_SECRET"] = SECRET
        with open(self.data_dir / "contivd.log", "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)

    def stop(self) -> None:
        terminate(self.proc)

    def log_text(self) -> str:
        path = self.data_dir / "contivd.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@dataclass
class NetnsCluster:
    fabric_ns: str
    nodes: list[NetnsNode]

    def run_in_fabric(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run a command from the clients' side of the bridge, with this checkout on the import path."""
        return subprocess.run(["ip", "netns", "exec", self.fabric_ns, *args], capture_output=True, text=True, timeout=timeout, env=tree_env())

    def partition_rounds(self, rounds: list[tuple[str, float]], clients: int = 6, client_timeout: float = 4.0, settle: float = 3.0) -> dict[str, Any]:
        """Run tests/support/partition_driver.py against the nodes: one round per (mode, seconds)
        with the leader cut off; returns its figures (see the driver)."""
        config = {
            "nodes": [{"name": n.name, "ns": n.ns, "url": n.url, "host": n.host} for n in self.nodes],
            "rounds": [{"mode": mode, "seconds": seconds} for mode, seconds in rounds],
            "clients": clients,
            "client_timeout": client_timeout,
            "settle": settle,
            "secret": SECRET,
            "ca_files": [str(n.ca_file) for n in self.nodes],
        }
        budget = 300 + sum(seconds + settle + 60 for _, seconds in rounds)
        done = self.run_in_fabric(sys.executable, "-m", "tests.support.partition_driver", json.dumps(config), timeout=budget)
        if done.returncode != 0 or not done.stdout.strip():
            logs = "\n".join(f"--- {n.name} ---\n{n.log_text()}" for n in self.nodes)
            raise AssertionError(f"the partition driver failed ({done.returncode}): {done.stderr[-3000:]}\n{logs}")
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return figures


@contextmanager
def netns_cluster(root: Path, size: int = 3) -> Iterator[NetnsCluster]:
    """`size` voters on one bridge, started (not yet waited for); everything is torn down on exit."""
    tag = uuid.uuid4().hex[:6]
    fabric = f"cdf-{tag}-f"
    nodes = [NetnsNode(f"n{i + 1}", f"cdf-{tag}-n{i + 1}", f"{SUBNET_PREFIX}.{i + 1}", root / f"n{i + 1}") for i in range(size)]
    created: list[str] = []
    try:
        sh("ip", "netns", "add", fabric)
        created.append(fabric)
        sh("ip", "-n", fabric, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", fabric, "addr", "add", f"{CLIENT_ADDRESS}/24", "dev", "br0")
        for link in ("br0", "lo"):
            sh("ip", "-n", fabric, "link", "set", link, "up")
        for index, node in enumerate(nodes):
            sh("ip", "netns", "add", node.ns)
            created.append(node.ns)
            sh("ip", "link", "add", "eth0", "netns", node.ns, "type", "veth", "peer", "name", f"p{index}", "netns", fabric)
            sh("ip", "-n", fabric, "link", "set", f"p{index}", "master", "br0", "up")
            sh("ip", "-n", node.ns, "addr", "add", f"{node.host}/24", "dev", "eth0")
            for link in ("eth0", "lo"):
                sh("ip", "-n", node.ns, "link", "set", link, "up")
        for node in nodes:
            node.start([other.raft for other in nodes if other is not node])
        yield NetnsCluster(fabric, nodes)
    finally:
        for node in nodes:
            node.stop()
        for ns in created:
            sh("ip", "netns", "del", ns, check=False)

"""Where a node's memory goes: resident memory (VmRSS) growth per import, in order, in a fresh
process; the total for what a `--datapath none` follower of the store imports and for what a
voter (OVS datapath, netmaster, Kubernetes watch) imports; and the RSS of a running
single-node `contivd run --datapath none` voter, idle, with its CPU over the idle window.

Each line's growth is what that import added on top of every line above it: a package is
charged to the first line that pulls it in. The follower's list and the modules it must not
load are tests/support/footprint.py's (the same lists tests/daemon/test_follower_imports.py
checks). A follower list that pulls a heavy module shows it under `follower_loads_heavy`.

Usage: python3 benchmarks/rss_imports.py [--quick] [--runs N] [--no-node]
--quick: one run of the import ladder, a 3 s idle window. The last line printed is one JSON
object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.contivd_nodes import running_cluster  # noqa: E402
from tests.support.footprint import FOLLOWER_MODULES, FOLLOWER_MUST_NOT_LOAD, VOTER_MODULES, loaded  # noqa: E402

# After the voter's modules: what the leader adds in Kubernetes mode (lightkube, imported when
# the watch builds its client).
LEADER_K8S_MODULES = ("lightkube.config.kubeconfig", "httpx2")

# The child: imports each step's modules in order, printing VmRSS (kB) after each as a JSON line.
CHILD = r"""
import importlib, json, sys
def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
print(json.dumps(["python", rss_kb()]), flush=True)
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
    if name == "raftstore":
        importlib.import_module("raftstore").open_follower  # the follower path
    print(json.dumps([name, rss_kb()]), flush=True)
print(json.dumps(["@modules", sorted(sys.modules)]), flush=True)
"""


def ladder(modules: tuple[str, ...]) -> tuple[list[tuple[str, int]], list[str]]:
    """RSS (kB) after Python starts and after each import, and the modules loaded at the end."""
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", CHILD, json.dumps(list(modules))],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise SystemExit(f"importing failed:\n{done.stderr}")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    return [(name, kb) for name, kb in rows[:-1]], rows[-1][1]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def running_voter(idle_seconds: float) -> dict[str, float]:
    """A single-node `contivd run --datapath none` (a voter and the leader), once ready: its RSS
    and its CPU over `idle_seconds` of no requests."""
    with tempfile.TemporaryDirectory(prefix="rss-imports-") as tmp, running_cluster(Path(tmp), 1) as cluster:
        proc = cluster.nodes[0].proc
        assert proc is not None
        time.sleep(1.0)  # the post-ready work (first status line, registration refresh) settles
        start_cpu, started = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(idle_seconds)  # the measured window: nothing asks the node anything
        idle_pct = (cpu_seconds(proc.pid) - start_cpu) / (time.monotonic() - started) * 100
        return {"voter_node_rss_mb": rss_kb(proc.pid) / 1024, "voter_node_idle_cpu_pct": idle_pct}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of the import ladder, 3 s idle window")
    parser.add_argument("--runs", type=int, default=None, help="ladder runs (median per line); default 3, 1 with --quick")
    parser.add_argument("--no-node", action="store_true", help="skip the running node")
    args = parser.parse_args()
    runs = args.runs or (1 if args.quick else 3)

    order = FOLLOWER_MODULES + VOTER_MODULES + LEADER_K8S_MODULES
    ladders = []
    for _ in range(runs):
        rows, modules = ladder(order)
        ladders.append([kb for _, kb in rows])
    names = [name for name, _ in rows]
    after = [statistics.median(column) / 1024 for column in zip(*ladders, strict=True)]
    follower_rows = 1 + len(FOLLOWER_MODULES)
    voter_rows = follower_rows + len(VOTER_MODULES)

    _, follower_modules = ladder(FOLLOWER_MODULES)
    heavy = loaded(set(follower_modules), FOLLOWER_MUST_NOT_LOAD)

    print(f"{'import (in order)':45} {'RSS after MB':>12} {'growth MB':>10}")
    previous = 0.0
    for i, (name, mb) in enumerate(zip(names, after, strict=True)):
        if i == follower_rows:
            print(f"{'= a --datapath none follower imports':45} {after[follower_rows - 1]:12.1f}")
        if i == voter_rows:
            print(f"{'= a voter (OVS datapath) imports':45} {after[voter_rows - 1]:12.1f}")
        print(f"{name:45} {mb:12.1f} {mb - previous:+10.1f}")
        previous = mb
    print(f"{'= the leader in Kubernetes mode imports':45} {after[-1]:12.1f}")
    print(f"follower list loads what it must not: {', '.join(heavy) or 'nothing'}")

    figures: dict[str, Any] = {
        "runs": runs,
        "python_rss_mb": round(after[0], 1),
        "follower_imports_rss_mb": round(after[follower_rows - 1], 1),
        "voter_imports_rss_mb": round(after[voter_rows - 1], 1),
        "leader_k8s_imports_rss_mb": round(after[-1], 1),
        "follower_loads_heavy": heavy,
        "growth_mb": {name: round(mb - prev, 1) for name, mb, prev in zip(names[1:], after[1:], after[:-1], strict=True)},
    }
    if not args.no_node:
        node = running_voter(3.0 if args.quick else 10.0)
        print(
            f"running single-node voter (--datapath none): RSS {node['voter_node_rss_mb']:.1f} MB, idle CPU {node['voter_node_idle_cpu_pct']:.2f} %"
        )
        figures.update({k: round(v, 2) for k, v in node.items()})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

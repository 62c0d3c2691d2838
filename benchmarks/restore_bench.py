"""Backup and restore at 100,000 endpoints (10,000 with --quick).

The store is built by contivd's real netmaster on a MemoryStore (one /14 VXLAN network, every
endpoint created as a pod start creates it), written as a backup file exactly as the leader
streams it, then:

- restore_s_100k: `contivd restore FILE --data-dir …` as a process, start to exit (read, end
  mark and checksum, decode, seed a single-voter cluster: election, snapshot written and fsynced);
- serving_s_100k: `contivd run` on the restored dir, start until its API lists the network's
  endpoints with every one present;
- save_s_100k: `contivd ctl cluster snapshot save` from that node (stream, fsync, full check).

With --quick the keys end in _10k. The last line is one JSON object.

    python3 benchmarks/restore_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

import httpx  # noqa: E402
import trio  # noqa: E402

from contivd.netmaster.service import Netmaster  # noqa: E402
from raftstore import MemoryStore, encode_image  # noqa: E402
from tests.support.contivd_nodes import SECRET, ContivdProcess  # noqa: E402
from tests.support.waiting import free_ports, wait_for  # noqa: E402

NETWORK = {"tenantName": "default", "networkName": "bench", "encap": "vxlan", "subnet": "198.18.0.0/15", "gateway": "198.19.255.254"}


async def build_backup(path: Path, endpoints: int) -> int:
    store = MemoryStore()
    netmaster = Netmaster(store, "node0")
    await netmaster.ensure_defaults()
    await netmaster.put_object("networks", "default:bench", NETWORK)
    for i in range(endpoints):
        name = f"ep{i}"
        await netmaster.create_endpoint_at(
            {"TenantName": "default", "NetworkName": "bench", "EndpointID": name, "ConfigEP": {"Container": name, "Host": "node0"}}
        )
    image = await store.export_image()
    with open(path, "wb") as out:
        for chunk in encode_image(image, "benchmark"):
            out.write(chunk)
    return len(image.keys)


def contivd(*args: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
    env["CONTIVD_CLUSTER_SECRET"] = SECRET
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "contivd", *args], capture_output=True, text=True, env=env, timeout=1800)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"contivd {' '.join(args)} failed: {done.stderr[-2000:]}")
    return elapsed


def endpoint_count(node: ContivdProcess) -> int:
    try:
        answer = httpx.get(node.url + "/api/v1/inspect/networks/default:bench/", timeout=120)
    except httpx.HTTPError:
        return 0
    return len(answer.json()["Oper"].get("endpoints", [])) if answer.status_code == 200 else 0


def run(root: Path, endpoints: int) -> dict[str, Any]:
    suffix = "100k" if endpoints == 100_000 else f"{endpoints // 1000}k"
    backup = root / "store.snap"
    started = time.perf_counter()
    keys = trio.run(build_backup, backup, endpoints)
    built_s = time.perf_counter() - started
    raft_port, api_port = free_ports(2)
    node = ContivdProcess("restored", root, f"127.0.0.1:{raft_port}", api_port, [])
    restore_s = contivd("restore", str(backup), "--data-dir", str(node.data_dir), "--raft-listen", node.raft)
    try:
        started = time.perf_counter()
        node.start()
        wait_for(lambda: endpoint_count(node) == endpoints, 600, f"the restored node to serve {endpoints} endpoints", interval=0.5)
        serving_s = time.perf_counter() - started
        save_s = contivd("ctl", "--server", f"unix:{node.socket}", "cluster", "snapshot", "save", str(root / "again.snap"))  # root on the node
    finally:
        node.kill()
    return {
        "endpoints": endpoints,
        "keys": keys,
        "backup_mb": round(backup.stat().st_size / 1e6, 1),
        "build_s": round(built_s, 1),
        f"restore_s_{suffix}": round(restore_s, 2),
        f"serving_s_{suffix}": round(serving_s, 2),
        f"save_s_{suffix}": round(save_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 endpoints instead of 100,000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="restore-bench-") as tmp:
        figures = run(Path(tmp), 10_000 if args.quick else 100_000)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

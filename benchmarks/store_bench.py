"""raftstore vs etcd, side by side in one run, on loopback.

For 1 and 3 voters: sequential puts, 16-concurrent puts and sequential 10-key transactions,
with throughput and p50/p99 latency. raftstore members run as `python -m raftstore serve`
processes driven over their JSON-lines channel; etcd (Debian's etcd-server, started here) is
driven through the `etcd3` gRPC client. Both fsync their logs (raftstore's default).
The last line printed is one JSON object with every figure.

    python3 benchmarks/store_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")  # etcd3's generated code needs it

from raftstore.testing import Cluster, free_ports, wait_for  # noqa: E402

CONCURRENCY = 16
TXN_KEYS = 10


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(op: Callable[[int], None], count: int, workers: int) -> dict[str, float]:
    """Run `op(i)` for i in range(count) over `workers` threads; throughput and latency."""
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(indices: range) -> None:
        mine = []
        for i in indices:
            start = time.perf_counter()
            op(i)
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    per = count // workers
    threads = [threading.Thread(target=worker, args=(range(w * per, (w + 1) * per),)) for w in range(workers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return {
        "per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


def workload(put: Callable[[str, str], None], txn: Callable[[list[str]], None], n: int, tag: str) -> dict[str, dict[str, float]]:
    value = "x" * 100
    results = {
        "seq": measure(lambda i: put(f"/bench/{tag}/seq/{i}", value), n, 1),
        "conc": measure(lambda i: put(f"/bench/{tag}/conc/{i}", value), n, CONCURRENCY),
        "txn": measure(lambda i: txn([f"/bench/{tag}/txn/{i}/{k}" for k in range(TXN_KEYS)]), max(n // 4, 50), 1),
    }
    return results


# ---- raftstore ---------------------------------------------------------------------------


def bench_raftstore(root: Path, voters: int, n: int) -> dict[str, dict[str, float]]:
    cluster = Cluster(root / f"raftstore{voters}", voters)
    try:
        cluster.start()
        leader = cluster.leader()
        value = "x" * 100

        def put(key: str, v: str) -> None:
            leader.call("put", key=key, value=v)

        def txn(keys: list[str]) -> None:
            leader.call("txn", **{"then": [{"op": "put", "key": k, "value": value} for k in keys]})

        return workload(put, txn, n, f"r{voters}")
    finally:
        cluster.close()


# ---- etcd --------------------------------------------------------------------------------


def etcd_cluster(root: Path, members: int) -> Iterator[list[str]]:
    """Start `members` etcd processes on loopback; yields their client URLs; kills them after."""
    ports = free_ports(2 * members)
    names = [f"e{i}" for i in range(members)]
    peers = ",".join(f"{names[i]}=http://127.0.0.1:{ports[2 * i + 1]}" for i in range(members))
    procs = []
    try:
        for i, name in enumerate(names):
            data = root / f"etcd{members}-{name}"
            args = [
                "etcd", "--name", name, "--data-dir", str(data),
                "--listen-client-urls", f"http://127.0.0.1:{ports[2 * i]}",
                "--advertise-client-urls", f"http://127.0.0.1:{ports[2 * i]}",
                "--listen-peer-urls", f"http://127.0.0.1:{ports[2 * i + 1]}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{ports[2 * i + 1]}",
                "--initial-cluster", peers, "--initial-cluster-state", "new", "--log-level", "error",
            ]  # fmt: skip
            log = open(root / f"etcd{members}-{name}.log", "wb")
            procs.append(subprocess.Popen(args, stdout=log, stderr=log))
        yield [f"127.0.0.1:{ports[2 * i]}" for i in range(members)]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def bench_etcd(root: Path, members: int, n: int) -> dict[str, dict[str, float]]:
    import etcd3

    for endpoints in etcd_cluster(root, members):
        clients = [etcd3.client(host=e.split(":")[0], port=int(e.split(":")[1])) for e in endpoints]

        def leader_client() -> object:
            for c in clients:
                try:
                    leader = c.status().leader
                except Exception:  # noqa: BLE001 - not up yet
                    continue
                if leader is not None:
                    return clients[int(leader.name[1:])]  # members are named e0, e1, … in endpoint order
            return None

        client = wait_for(leader_client, 30, "etcd to elect a leader")
        value = "x" * 100

        def put(key: str, v: str) -> None:
            client.put(key, v)

        def txn(keys: list[str]) -> None:
            client.transaction(compare=[], success=[client.transactions.put(k, value) for k in keys], failure=[])

        return workload(put, txn, n, f"e{members}")
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer operations: finishes in under a minute")
    args = parser.parse_args()
    if shutil.which("etcd") is None:
        sys.exit("etcd is not installed: apt-get install etcd-server (packaging/deps.sh does)")
    n = 400 if args.quick else 3000
    root = Path(tempfile.mkdtemp(prefix="store-bench-"))
    figures: dict[str, float] = {}
    try:
        for voters in (1, 3):
            for system, run in (("raftstore", bench_raftstore), ("etcd", bench_etcd)):
                result = run(root, voters, n)
                prefix = "" if system == "raftstore" else "etcd_"
                for kind, label in (("seq", "put"), ("conc", "put16"), ("txn", "txn")):
                    r = result[kind]
                    print(f"{system:9} voters={voters} {label:5} {r['per_s']:9.1f}/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms")
                    figures[f"{prefix}{label}_per_s_{voters}"] = r["per_s"]
                    figures[f"{prefix}{label}_p50_ms_{voters}"] = r["p50_ms"]
                    figures[f"{prefix}{label}_p99_ms_{voters}"] = r["p99_ms"]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for label in ("put", "put16", "txn"):
        for voters in (1, 3):
            figures[f"ratio_{label}_{voters}"] = round(figures[f"{label}_per_s_{voters}"] / figures[f"etcd_{label}_per_s_{voters}"], 2)
    figures["quick"] = args.quick
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

"""raftstore vs etcd, side by side in one run, on loopback.

For 1 and 3 voters: sequential puts, 16-concurrent puts and sequential 10-key transactions,
with throughput and p50/p99 latency. raftstore's leader runs in this process and is driven
through the embedded async API, as contivd's netmaster uses it; the other voters are
`python -m raftstore serve` processes. etcd (Debian's etcd-server, started here) is driven
through the `etcd3` gRPC client (`pip install 'etcd3>=0.12'`, the `bench` extra), on the
installed protobuf's native runtime (see `import_etcd3`). Both fsync their logs (raftstore's default); raftstore also
encrypts its traffic with the cluster secret (etcd runs plain HTTP here).
The last line printed is one JSON object with every figure.

    python3 benchmarks/store_bench.py [--quick] [--wire-format N]

`wire_format` in the figures is the Raft wire format every raftstore member spoke
(raftstore/_wire.py; `--wire-format` pins an older one on all of them).
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

import trio  # noqa: E402

from raftstore import Put, StoreConfig, open_store  # noqa: E402
from raftstore._wire import CURRENT_VERSION, WIRE_VERSIONS  # noqa: E402
from tests.support.raft_processes import SECRET, StoreProcess  # noqa: E402
from tests.support.waiting import free_ports, wait_for  # noqa: E402

CONCURRENCY = 16
TXN_KEYS = 10
VALUE = "x" * 100
Results = dict[str, dict[str, float]]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(latencies: list[float], elapsed: float) -> dict[str, float]:
    return {
        "per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


def measure(op: Callable[[int], object], count: int, workers: int) -> dict[str, float]:
    """Run blocking `op(i)` for i in range(count) over `workers` threads."""
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(indices: range) -> None:
        mine = []
        try:
            for i in indices:
                start = time.perf_counter()
                op(i)
                mine.append(time.perf_counter() - start)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
        with lock:
            latencies.extend(mine)

    per = count // workers
    threads = [threading.Thread(target=worker, args=(range(w * per, (w + 1) * per),)) for w in range(workers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return summarize(latencies, time.perf_counter() - started)


async def measure_async(op: Callable[[int], Awaitable[object]], count: int, workers: int) -> dict[str, float]:
    """Run `await op(i)` for i in range(count) over `workers` trio tasks."""
    latencies: list[float] = []
    per = count // workers

    async def worker(indices: range) -> None:
        for i in indices:
            start = time.perf_counter()
            await op(i)
            latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for w in range(workers):
            nursery.start_soon(worker, range(w * per, (w + 1) * per))
    return summarize(latencies, time.perf_counter() - started)


# ---- raftstore -----------------------------------------------------------------------------


async def bench_raftstore_async(root: Path, voters: int, n: int, wire_format: int) -> Results:
    """The leader runs here, the other voters as separate processes."""
    addresses = [f"127.0.0.1:{p}" for p in free_ports(voters)]
    pin = ("--wire-format", str(wire_format))
    others = [
        StoreProcess(a, [b for b in addresses if b != a], root / f"raftstore{voters}-{i}", extra=pin).start(wait_ready=False)
        for i, a in enumerate(addresses[1:], 1)
    ]
    config = StoreConfig(
        listen=addresses[0], peers=tuple(addresses[1:]), secret=SECRET, data_dir=root / f"raftstore{voters}-0", wire_format=wire_format
    )
    try:
        async with open_store(config) as store:
            leader = await store.wait_leader(timeout=20)
            if leader != addresses[0]:
                current = others[addresses.index(leader) - 1]

                # Denied while this member has not acknowledged the leader's last entry yet (a
                # race with the first entries after the election): wait_for asks again.
                def transfer() -> bool:
                    current.call("transfer_leadership", to=addresses[0])
                    return True

                await trio.to_thread.run_sync(lambda: wait_for(transfer, 20, "a leadership transfer to the benchmark's member"))
            with trio.fail_after(20):
                async for change in store.leadership_changes():
                    if change.is_leader:
                        break
            tag = f"r{voters}"
            return {
                "seq": await measure_async(lambda i: store.put(f"/bench/{tag}/seq/{i}", VALUE), n, 1),
                "conc": await measure_async(lambda i: store.put(f"/bench/{tag}/conc/{i}", VALUE), n, CONCURRENCY),
                "txn": await measure_async(
                    lambda i: store.txn(success=[Put(f"/bench/{tag}/txn/{i}/{k}", VALUE) for k in range(TXN_KEYS)]),
                    max(n // 4, 50),
                    1,
                ),
            }
    finally:
        for process in others:
            process.kill()


def bench_raftstore(root: Path, voters: int, n: int, wire_format: int = CURRENT_VERSION) -> Results:
    return trio.run(bench_raftstore_async, root, voters, n, wire_format)


# ---- etcd ----------------------------------------------------------------------------------


def etcd_cluster(root: Path, members: int) -> Iterator[list[str]]:
    """Start `members` etcd processes on loopback; yields their client endpoints; kills them after."""
    ports = free_ports(2 * members)
    names = [f"e{i}" for i in range(members)]
    peers = ",".join(f"{names[i]}=http://127.0.0.1:{ports[2 * i + 1]}" for i in range(members))
    procs = []
    try:
        for i, name in enumerate(names):
            client_url, peer_url = f"http://127.0.0.1:{ports[2 * i]}", f"http://127.0.0.1:{ports[2 * i + 1]}"
            args = [
                "etcd", "--name", name, "--data-dir", str(root / f"etcd{members}-{name}"),
                "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", peers, "--initial-cluster-state", "new", "--log-level", "error",
            ]  # fmt: skip
            log = open(root / f"etcd{members}-{name}.log", "wb")
            procs.append(subprocess.Popen(args, stdout=log, stderr=log))
        yield [f"127.0.0.1:{ports[2 * i]}" for i in range(members)]
    finally:
        for p in procs:
            p.kill()
            p.wait()


ETCDRPC_MODULES = ("kv_pb2", "auth_pb2", "rpc_pb2")  # in dependency order


def serialized_file_descriptor(generated_source: str) -> bytes:
    """The `serialized_pb=_b('…')` argument of an old protoc module's FileDescriptor call."""
    for node in ast.walk(ast.parse(generated_source)):
        if isinstance(node, ast.keyword) and node.arg == "serialized_pb" and isinstance(node.value, ast.Call):
            return str(ast.literal_eval(node.value.args[0])).encode("latin1")
    raise ValueError("no serialized_pb in the generated module")


def import_etcd3() -> Any:
    """etcd3 on the installed protobuf's native (upb) runtime, not its pure-Python one.

    etcd3 0.12's generated `etcdrpc` modules build their descriptors field by field, which
    protobuf >= 4 accepts only with PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python; that runtime
    costs the client ~0.15 ms per put and ~1.1 ms per 10-key transaction here, time that would
    be counted against etcd. So the same modules are rebuilt from the file descriptors they
    carry, as current protoc output builds them, and put in sys.modules before etcd3 loads.
    """
    from google.protobuf import descriptor_pool
    from google.protobuf.internal import builder

    spec = importlib.util.find_spec("etcd3")
    if spec is None or spec.origin is None:
        sys.exit("etcd3 is not installed: pip install 'etcd3>=0.12' (the bench extra)")
    generated = Path(spec.origin).parent / "etcdrpc"
    for name in ETCDRPC_MODULES:
        module = types.ModuleType(f"etcd3.etcdrpc.{name}")
        descriptor = descriptor_pool.Default().AddSerializedFile(serialized_file_descriptor((generated / f"{name}.py").read_text()))
        builder.BuildMessageAndEnumDescriptors(descriptor, module.__dict__)
        builder.BuildTopDescriptorsAndMessages(descriptor, module.__name__, module.__dict__)
        sys.modules[module.__name__] = module
    import etcd3

    return etcd3


def bench_etcd(root: Path, members: int, n: int) -> Results:
    etcd3 = import_etcd3()

    for endpoints in etcd_cluster(root, members):
        clients = [etcd3.client(host=e.split(":")[0], port=int(e.split(":")[1])) for e in endpoints]

        def leader_client() -> object:
            """The leader's client, once every member answers and they agree on the leader."""
            try:
                leaders = {c.status().leader.name for c in clients}
            except Exception:  # noqa: BLE001 - not up yet
                return None
            if len(leaders) != 1:
                return None
            return clients[int(leaders.pop()[1:])]  # members are named e0, e1, … in endpoint order

        client = wait_for(leader_client, 30, "etcd to elect a leader")
        tag = f"e{members}"
        return {
            "seq": measure(lambda i: client.put(f"/bench/{tag}/seq/{i}", VALUE), n, 1),
            "conc": measure(lambda i: client.put(f"/bench/{tag}/conc/{i}", VALUE), n, CONCURRENCY),
            "txn": measure(
                lambda i: client.transaction(
                    compare=[],
                    success=[client.transactions.put(f"/bench/{tag}/txn/{i}/{k}", VALUE) for k in range(TXN_KEYS)],
                    failure=[],
                ),
                max(n // 4, 50),
                1,
            ),
        }
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer operations: finishes in under a minute")
    parser.add_argument("--wire-format", type=int, choices=WIRE_VERSIONS, default=CURRENT_VERSION, help="raft wire format of every raftstore member")
    args = parser.parse_args()
    if shutil.which("etcd") is None:
        sys.exit("etcd is not installed: apt-get install etcd-server (packaging/deps.sh does)")
    n = 400 if args.quick else 3000
    root = Path(tempfile.mkdtemp(prefix="store-bench-"))
    figures: dict[str, float | bool] = {}
    try:
        for voters in (1, 3):
            for system, run in (("raftstore", functools.partial(bench_raftstore, wire_format=args.wire_format)), ("etcd", bench_etcd)):
                result = run(root, voters, n)
                prefix = "" if system == "raftstore" else "etcd_"
                for kind, label in (("seq", "put"), ("conc", "put16"), ("txn", "txn")):
                    r = result[kind]
                    print(f"{system:9} voters={voters} {label:5} {r['per_s']:9.1f}/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms")
                    for stat in ("per_s", "p50_ms", "p99_ms"):
                        figures[f"{prefix}{label}_{stat}_{voters}"] = r[stat]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for label in ("put", "put16", "txn"):
        for voters in (1, 3):
            ours, theirs = figures[f"{label}_per_s_{voters}"], figures[f"etcd_{label}_per_s_{voters}"]
            figures[f"ratio_{label}_{voters}"] = round(float(ours) / float(theirs), 2)
    figures["quick"] = args.quick
    figures["wire_format"] = args.wire_format
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

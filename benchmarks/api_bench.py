"""createEndpoint through the REST API, on 1 node and on 3 nodes, in one run.

Each run starts real `contivd run --datapath none` processes on loopback (with a cluster
secret), creates one /16 network, then creates endpoints: sequentially (latency) and from 32
concurrent clients (throughput). On 3 nodes the clients spread over all nodes, as every
node's CNI server calls its local API: followers forward to the leader. The last line printed
is one JSON object with every figure.

    python3 benchmarks/api_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

import trio  # noqa: E402

from contivd.http.forwarder import ForwardingClient  # noqa: E402
from tests.support.contivd_nodes import ContivdCluster  # noqa: E402

CONCURRENCY = 32
NETWORK = {"tenantName": "default", "networkName": "bench", "encap": "vxlan", "subnet": "198.18.0.0/16", "gateway": "198.18.255.254"}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def create_endpoints(urls: list[str], names: list[str], concurrency: int) -> dict[str, float]:
    latencies: list[float] = []
    pending = iter(names)
    targets = itertools.cycle(urls)

    http = ForwardingClient(timeout=60)  # contivd's own keep-alive client: cheap enough not to skew the figures

    async def client(url: str) -> None:
        for name in pending:
            body = json.dumps({"TenantName": "default", "NetworkName": "bench", "EndpointID": name, "ConfigEP": {"Container": name}})
            start = time.perf_counter()
            status, _, text = await http.request(
                "POST", url, "/plugin/createEndpoint", {"Content-Type": "application/json", "Accept": "application/json"}, body.encode()
            )
            latencies.append(time.perf_counter() - start)
            if status != 200:
                raise RuntimeError(f"createEndpoint {name}: {status} {text[:200]!r}")

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(client, next(targets))
    elapsed = time.perf_counter() - started
    await http.aclose()
    return {
        "per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


def bench(root: Path, size: int, count: int) -> dict[str, dict[str, float]]:
    cluster = ContivdCluster(root / f"cluster{size}", size)
    try:
        cluster.start(timeout=60)
        answer = cluster.nodes[0].post("/api/v1/networks/default:bench/", NETWORK)
        assert answer.status_code == 200, answer.text
        urls = [n.url for n in cluster.nodes]
        sequential = trio.run(create_endpoints, urls, [f"s{i}" for i in range(count // 4)], 1)
        concurrent = trio.run(create_endpoints, urls, [f"c{i}" for i in range(count)], CONCURRENCY)
        return {"seq": sequential, "conc": concurrent}
    finally:
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer endpoints: finishes in under a minute")
    args = parser.parse_args()
    count = 600 if args.quick else 4000
    figures: dict[str, float | bool] = {}
    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        for size in (1, 3):
            result = bench(Path(tmp), size, count)
            for kind, label in (("seq", "create_ep_seq"), ("conc", "create_ep")):
                r = result[kind]
                print(f"{size} node(s) {label:14} {r['per_s']:8.1f}/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms")
                figures[f"{label}_per_s_{size}"] = r["per_s"]
                figures[f"{label}_p50_ms_{size}"] = r["p50_ms"]
                figures[f"{label}_p99_ms_{size}"] = r["p99_ms"]
    figures["quick"] = args.quick
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

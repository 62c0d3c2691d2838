"""createEndpoint through the REST API, on 1 node and on 3 nodes (plain HTTP and TLS), in one run.

Each run starts real `contivd run --datapath none` processes on loopback (with a cluster
secret), creates one /16 network, then creates endpoints: sequentially (latency) and from 32
concurrent clients (throughput). On 3 nodes the clients spread over all nodes, as every
node's CNI server calls its local API: followers forward to the leader. The TLS run serves
every listener with TLS (`--tls always`, the cluster CA's certificates) and forwards over it:
`ratio_tls_vs_plain_3` is its concurrent createEndpoint/s over the plain run's, and
`tls_first_request_ms` the p50 of a new connection's TLS handshake plus its first request
(`plain_first_request_ms` the same without TLS). The last line printed is one JSON object
with every figure.

    python3 benchmarks/api_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import ssl
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

import trio  # noqa: E402

from contivd.http.forwarder import ForwardingClient  # noqa: E402
from tests.support.contivd_nodes import ContivdCluster  # noqa: E402

CONCURRENCY = 32
FIRST_REQUESTS = 50  # fresh connections timed for *_first_request_ms
NETWORK = {"tenantName": "default", "networkName": "bench", "encap": "vxlan", "subnet": "198.18.0.0/16", "gateway": "198.18.255.254"}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def create_endpoints(urls: list[str], names: list[str], concurrency: int, tls: ssl.SSLContext | None) -> dict[str, float]:
    latencies: list[float] = []
    pending = iter(names)
    targets = itertools.cycle(urls)

    http = ForwardingClient(timeout=60, ssl_context=tls)  # contivd's own keep-alive client: cheap enough not to skew the figures

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


async def first_requests(url: str, tls: ssl.SSLContext | None) -> float:
    """p50 ms of connect (+ TLS handshake) + one GET on a fresh connection each time."""
    samples = []
    for _ in range(FIRST_REQUESTS):
        http = ForwardingClient(timeout=60, ssl_context=tls)
        start = time.perf_counter()
        status, _, text = await http.request("GET", url, "/version", {"Accept": "application/json"}, b"")
        samples.append(time.perf_counter() - start)
        await http.aclose()
        if status != 200:
            raise RuntimeError(f"GET /version: {status} {text[:200]!r}")
    return round(percentile(samples, 0.5) * 1000, 2)


def bench(root: Path, size: int, count: int, tls: bool = False) -> dict[str, dict[str, float]]:
    cluster = ContivdCluster(root / f"cluster{size}{'-tls' if tls else ''}", size, tls=tls)
    try:
        cluster.start(timeout=60)
        answer = cluster.nodes[0].post("/api/v1/networks/default:bench/", NETWORK)
        assert answer.status_code == 200, answer.text
        urls = [n.url for n in cluster.nodes]
        context = ssl.create_default_context(cafile=cluster.nodes[0].ca_file) if tls else None
        if context is not None:
            context.set_alpn_protocols(["http/1.1"])
        first = trio.run(first_requests, urls[0], context)
        sequential = trio.run(create_endpoints, urls, [f"s{i}" for i in range(count // 4)], 1, context)
        concurrent = trio.run(create_endpoints, urls, [f"c{i}" for i in range(count)], CONCURRENCY, context)
        return {"seq": sequential, "conc": concurrent, "first": {"ms": first}}
    finally:
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer endpoints: finishes in under a minute")
    args = parser.parse_args()
    count = 600 if args.quick else 4000
    figures: dict[str, float | bool] = {}
    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        for size, tls in ((1, False), (3, False), (3, True)):
            result = bench(Path(tmp), size, count, tls)
            suffix = f"{size}_tls" if tls else str(size)
            for kind, label in (("seq", "create_ep_seq"), ("conc", "create_ep")):
                r = result[kind]
                print(f"{size} node(s){' TLS' if tls else ''} {label:14} {r['per_s']:8.1f}/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms")
                figures[f"{label}_per_s_{suffix}"] = r["per_s"]
                figures[f"{label}_p50_ms_{suffix}"] = r["p50_ms"]
                figures[f"{label}_p99_ms_{suffix}"] = r["p99_ms"]
            if size == 3:
                figures["tls_first_request_ms" if tls else "plain_first_request_ms"] = result["first"]["ms"]
    figures["ratio_tls_vs_plain_3"] = round(figures["create_ep_per_s_3_tls"] / figures["create_ep_per_s_3"], 3)
    figures["quick"] = args.quick
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

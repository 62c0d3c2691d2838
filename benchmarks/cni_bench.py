"""CNI ADD and DEL as a container runtime sees them: the `contiv` plugin process, end to end.

Starts one real node (`contivd run --datapath ovs --ovs managed`, in its own network namespace,
as the CNI tests do), creates a /16 network, then for N pod namespaces (100; `--quick`: 30):
ADD one after another (latency), DEL one after another, then ADD and DEL all of them again
from 8 concurrent callers (pods/s). `add_*`/`del_*` latencies are the plugin process's wall
time, what a runtime sees: Python start-up, the socket round trip, contivd's work (endpoint
through the leader, veth, namespace set-up, OVS port, flows pushed). `server_*` repeat the
sequential ADD/DEL by writing the plugin's request straight to the socket: contivd's share.
Also reports the plugin's start-up alone (VERSION). Needs root and Open vSwitch. The last
line printed is one JSON object with every figure.

    python3 benchmarks/cni_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cni.plugin import exchange  # noqa: E402
from cni.protocol import Request  # noqa: E402
from tests.cni.harness import Outcome, Pod, create_network, netconf, run_plugin, socket_of  # noqa: E402
from tests.nodes import Node, wait_until  # noqa: E402

CONCURRENCY = 8


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(call: Callable[[], Outcome]) -> float:
    started = time.perf_counter()
    out = call()
    elapsed = time.perf_counter() - started
    if out.status:
        raise RuntimeError(f"plugin call failed: {out.output}")
    return elapsed


def direct(node: Node, command: str, pod: Pod) -> Outcome:
    """The plugin's request written straight to contivd's socket (no plugin process)."""
    exchange(str(socket_of(node)), Request(command, netconf(node, network="bench"), pod.container, pod.netns, "eth0"))
    return Outcome(0, None)  # exchange raises CniError on failure


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 pods instead of 100: well under two minutes")
    count = 30 if parser.parse_args().quick else 100
    root = Path(tempfile.mkdtemp(prefix="cni-bench-"))
    node = Node(root)
    pods: list[Pod] = []
    try:
        node.create_namespace()
        node.start("--cni-socket", "cni.sock", "--log-level", "warning")
        wait_until(lambda: node.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 60, "the node's API", node)
        create_network(node, "bench", "198.18.0.0/16", "198.18.255.254")
        wait_until(lambda: run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0, 60, "the CNI server", node)
        pods = [Pod().create() for _ in range(count)]
        startup = [timed(lambda: run_plugin("VERSION", {"cniVersion": "1.0.0"})) for _ in range(20)]
        adds = [timed(lambda p=pod: p.add(node, network="bench")) for pod in pods]
        dels = [timed(lambda p=pod: p.delete(node)) for pod in pods]
        server_adds = [timed(lambda p=pod: direct(node, "ADD", p)) for pod in pods]
        server_dels = [timed(lambda p=pod: direct(node, "DEL", p)) for pod in pods]
        started = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(lambda p: timed(lambda: p.add(node, network="bench")), pods))
        add_elapsed = time.perf_counter() - started
        started = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(lambda p: timed(lambda: p.delete(node)), pods))
        del_elapsed = time.perf_counter() - started
    finally:
        for pod in pods:
            pod.remove()
        node.stop()
        shutil.rmtree(root, ignore_errors=True)
    figures = {
        "pods": count,
        "plugin_startup_p50_ms": ms(percentile(startup, 0.5)),
        "add_p50_ms": ms(percentile(adds, 0.5)),
        "add_p99_ms": ms(percentile(adds, 0.99)),
        "del_p50_ms": ms(percentile(dels, 0.5)),
        "del_p99_ms": ms(percentile(dels, 0.99)),
        "server_add_p50_ms": ms(percentile(server_adds, 0.5)),
        "server_add_p99_ms": ms(percentile(server_adds, 0.99)),
        "server_del_p50_ms": ms(percentile(server_dels, 0.5)),
        "server_del_p99_ms": ms(percentile(server_dels, 0.99)),
        "sequential_pods_per_s": round(count / sum(adds), 1),
        "pods_per_s": round(count / add_elapsed, 1),
        "concurrent_dels_per_s": round(count / del_elapsed, 1),
        "concurrency": CONCURRENCY,
    }
    print(f"{count} pods on one node: ADD p50 {figures['add_p50_ms']} ms (contivd {figures['server_add_p50_ms']} ms), p99 {figures['add_p99_ms']} ms")
    print(f"DEL p50 {figures['del_p50_ms']} ms (contivd {figures['server_del_p50_ms']} ms); plugin start-up {figures['plugin_startup_p50_ms']} ms")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

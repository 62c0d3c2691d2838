"""Benchmark Kubernetes Services in the datapath: three contivd nodes in Kubernetes mode (each in
its namespace with its own OVS, joined by a fabric namespace, as in tests/nodes.py), the leader
watching the test API server (tests/support/k8s_apiserver.py, in node 1's namespace).

* ``cold_<N>_services_s``: the API server starts already holding N Services × 10 ready
  endpoints (EndpointSlices), the nodes idle and waiting for it; the time until every node's
  bridge holds a select group for each of them (the agents' pushed group counts, polled from
  their APIs every 50 ms). ``agent_rss_mb_<N>_services``: the resident memory of a follower's
  contivd process (store replica + node agent) then, beside its RSS before (``..._idle``).
* ``svc_to_flows_p50_ms`` / ``_p99_ms``: with those N Services in place, a new Service and its
  EndpointSlice are posted to the API server and the time until the Service's VIP flow shows up
  on all three bridges is taken from ``ovs-ofctl monitor`` on each (events, no polling).
* ``endpoint_removal_p50_ms`` / ``_p99_ms``: an endpoint of an affinity Service turns not ready;
  the time until its endpoint_dnat flow is deleted on all three bridges. The agent sends the
  group modification (the backend out of the select group) before that flow deletion, so this
  bounds the group change from above.

Usage: python3 benchmarks/k8s_bench.py [--quick] [--services N]   (root; Open vSwitch installed)
The last line printed is one JSON object with every figure (``cold_1000_services_s`` and
``agent_rss_mb_1000_services`` name the default size whatever N is, for comparison across runs).
"""

from __future__ import annotations

import argparse
import json
import ssl
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks.datapath_bench import _client_in  # noqa: E402
from tests.nodes import Node, cluster_of_nodes, sh  # noqa: E402
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text  # noqa: E402
from tests.support.kube_objects import endpoint_slice, service  # noqa: E402
from tests.support.service_pods import processes  # noqa: E402
from tests.support.waiting import free_ports  # noqa: E402

SERVICE_CIDR = "198.18.96.0/20"  # 4096 cluster IPs
ENDPOINTS = 10
POST = "import httpx,sys; httpx.post(sys.argv[1], timeout=10).raise_for_status()"


def cluster_ip(index: int) -> str:
    return f"198.18.{96 + index // 250}.{1 + index % 250}"


def backend(index: int) -> str:
    """Backend addresses (no pods behind them: flows do not need any), 198.19.160.0/19."""
    return f"198.19.{160 + (index // 250) % 32}.{1 + index % 250}"


def objects(count: int) -> list[dict[str, Any]]:
    """`count` Services with one TCP port each and an EndpointSlice of ENDPOINTS ready backends."""
    out: list[dict[str, Any]] = []
    for k in range(count):
        name = f"svc{k}"
        out.append(service("bench", name, cluster_ip(k), port=80))
        out.append(endpoint_slice("bench", f"{name}-1", name, [backend(k * ENDPOINTS + j) for j in range(ENDPOINTS)], 8080))
    return out


class Monitor:
    """`ovs-ofctl monitor` on one node's bridge: when each (event, token) of a flow event was first seen."""

    def __init__(self, node: Node):
        mgmt = node.data / "ovs" / "contivVxlanBridge.mgmt"
        control = mgmt.with_name("k8s-bench-monitor.ctl")  # ovs-ofctl monitor needs a unixctl socket of its own
        self.proc = subprocess_in(node.ns, "ovs-ofctl", "-O", "OpenFlow13", f"--unixctl={control}", "monitor", f"unix:{mgmt}", "watch:!initial")
        self.seen: dict[tuple[str, str], float] = {}
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.perf_counter()
            event = "DELETED" if "event=DELETED" in line else "ADDED"
            with self.changed:
                for token in line.replace(" ", ",").split(","):
                    self.seen.setdefault((event, token), now)
                self.changed.notify_all()

    def wait(self, event: str, token: str, timeout: float = 30) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: (event, token) in self.seen, timeout):
                raise RuntimeError(f"no {event} flow with {token} within {timeout} s")
            return self.seen[(event, token)]


def subprocess_in(namespace: str, *command: str) -> Any:
    import subprocess

    return subprocess.Popen(["ip", "netns", "exec", namespace, *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def rss_mb(node: Node) -> float:
    assert node.proc is not None  # `ip netns exec` execs the interpreter: the same PID
    for line in Path(f"/proc/{node.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def percentiles(prefix: str, latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        f"{prefix}_p50_ms": statistics.median(ordered) * 1000,
        f"{prefix}_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        f"{prefix}_max_ms": ordered[-1] * 1000,
    }


def run(count: int, changes: int, keep: Path | None = None) -> dict[str, Any]:
    """The figures; with `keep`, the nodes' data directories (logs included) are made there and
    kept, for finding where the time of a slow change went."""
    with tempfile.TemporaryDirectory(prefix="k8s-bench-") as tmp, processes() as running:
        root = Path(tmp) if keep is None else keep
        relay_port, empty_port, full_port = free_ports(3)
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{relay_port}", TOKEN))
        preload = root / "objects.json"
        preload.write_text(json.dumps(objects(count)))
        with cluster_of_nodes(root, 3, "--kubeconfig", str(kubeconfig), "--service-cidr", SERVICE_CIDR) as nodes:
            first = nodes[0]
            fabric = first.fabric_ns
            assert fabric is not None
            sh("ip", "-n", fabric, "addr", "add", "198.19.0.254/24", "dev", "ctl")  # the benchmark's seat on the control network
            # Two API servers in node 1's namespace: an empty one the leader watches first, and
            # one holding every Service (its history compacted, as after an API server restart).
            running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(empty_port))
            running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(full_port), str(preload))
            sh("ip", "netns", "exec", first.ns, sys.executable, "-c", POST, f"http://127.0.0.1:{full_port}/_test/compact")
            relay = running.start(first.ns, sys.executable, "-m", "tests.support.tcp_relay", first.host, str(relay_port), str(empty_port))
            client = _client_in(fabric, first)  # from here on this thread's sockets live in the fabric
            agents = [
                httpx.Client(
                    base_url=n.url(n.agent),
                    headers={"Authorization": f"Bearer {n.token}"},
                    timeout=10,
                    verify=ssl.create_default_context(cafile=n.ca_file),
                )
                for n in nodes
            ]
            wait_watching(client, nodes)
            warm_up(client, first.host, relay_port)
            wait_programmed(agents, 0, 60)
            follower = next(n for n in nodes if client.get(n.url() + "/info").json().get("current-state") == "follower")
            figures: dict[str, Any] = {"services": count, "endpoints_per_service": ENDPOINTS, "agent_rss_mb_idle": rss_mb(follower)}
            # Cold start: the leader's watch is cut and finds the full server (410, relist).
            started = time.perf_counter()
            move(relay, full_port)
            wait_programmed(agents, count, 300)
            figures["cold_1000_services_s"] = time.perf_counter() - started
            figures["agent_rss_mb_1000_services"] = rss_mb(follower)
            print(f"{count} services x {ENDPOINTS} endpoints on 3 nodes from a cold start: {figures['cold_1000_services_s']:.1f} s", flush=True)
            monitors = [Monitor(node) for node in nodes]
            try:
                api = httpx.Client(base_url=f"http://{first.host}:{relay_port}", timeout=10)
                figures.update(service_latencies(api, monitors, count, changes))
                figures.update(removal_latencies(api, monitors, count + changes, max(5, changes // 2)))
            finally:
                for monitor in monitors:
                    monitor.proc.kill()
                    monitor.proc.wait()
            client.close()
            return figures


def move(relay: Any, port: int) -> None:
    relay.stdin.write(f"{port}\n")
    relay.stdin.flush()
    assert relay.stdout.readline().strip() == "moved"


def warm_up(client: httpx.Client, host: str, port: int) -> None:
    """One event on each watch of the empty server. The leader's reflector resets its retry
    backoff only on an event (it grew while no API server answered yet): without one, the cut
    below would wait out up to 15 s of backoff instead of measuring the datapath."""
    headless = service("warm-up", "none", "None")
    orphan = endpoint_slice("warm-up", "none-1", "none", [], 8080)
    for obj in (headless, orphan):
        client.post(f"http://{host}:{port}/_test/apply", json=obj).raise_for_status()
    time.sleep(1)  # the events reach the leader's reflector (nothing observable changes: headless, no Service)


def wait_watching(client: httpx.Client, nodes: list[Node], timeout: float = 60) -> None:
    """Until every node is ready: the leader's Service watch in sync, every agent synced."""
    urls = [node.url() + "/readyz" for node in nodes]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(client.get(url).status_code == 200 for url in urls):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the nodes were not ready within {timeout} s: {[client.get(url).text for url in urls]}")


def wait_programmed(agents: list[httpx.Client], groups: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = [agent.get("/inspect/driver").json() for agent in agents]
        except httpx.HTTPError:
            states = []
        if states and all(state["vxlan"]["connected"] and state["vxlan"]["groups"] >= groups and state["syncs"] for state in states):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the nodes did not hold {groups} service groups within {timeout} s")


def note_slow(what: str, wall: float, latency: float) -> None:
    """Changes slower than the 300 ms target, with their wall-clock start (to find them in the nodes' logs)."""
    if latency > 0.3:
        stamp = time.strftime("%H:%M:%S", time.localtime(wall)) + f",{int(wall * 1000) % 1000:03d}"
        print(f"slow: {what} posted at {stamp}, {latency * 1000:.0f} ms", file=sys.stderr, flush=True)


def service_latencies(api: httpx.Client, monitors: list[Monitor], first: int, changes: int) -> dict[str, float]:
    latencies = []
    for k in range(first, first + changes):
        port = 20000 + k
        name = f"svc{k}"
        started, wall = time.perf_counter(), time.time()
        api.post("/_test/apply", json=endpoint_slice("bench", f"{name}-1", name, [backend(k * ENDPOINTS)], 8080)).raise_for_status()
        api.post("/_test/apply", json=service("bench", name, cluster_ip(k), port=port)).raise_for_status()
        latencies.append(max(monitor.wait("ADDED", f"tp_dst={port}") for monitor in monitors) - started)
        note_slow(f"Service {name}", wall, latencies[-1])
    result = percentiles("svc_to_flows", latencies)
    print(f"Service -> flows on 3 nodes: p50 {result['svc_to_flows_p50_ms']:.1f} ms, p99 {result['svc_to_flows_p99_ms']:.1f} ms", flush=True)
    return result


def removal_latencies(api: httpx.Client, monitors: list[Monitor], first: int, changes: int) -> dict[str, float]:
    """Affinity Services of 2 endpoints; the second turns not ready: its endpoint_dnat flow goes."""
    affinity = {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}}
    latencies = []
    for k in range(first, first + changes):
        name, port = f"svc{k}", 20000 + k
        addresses = [backend(k * ENDPOINTS), backend(k * ENDPOINTS + 1)]
        api.post("/_test/apply", json=endpoint_slice("bench", f"{name}-1", name, addresses, 8080)).raise_for_status()
        api.post("/_test/apply", json=service("bench", name, cluster_ip(k), port=port, **affinity)).raise_for_status()
        gone = f"reg0={int.from_bytes(bytes(int(o) for o in addresses[1].split('.')), 'big'):#x}"
        for monitor in monitors:
            monitor.wait("ADDED", gone)
        started, wall = time.perf_counter(), time.time()
        api.post("/_test/apply", json=endpoint_slice("bench", f"{name}-1", name, addresses[:1], 8080, not_ready=addresses[1:])).raise_for_status()
        latencies.append(max(monitor.wait("DELETED", gone) for monitor in monitors) - started)
        note_slow(f"endpoint removal of {name}", wall, latencies[-1])
    result = percentiles("endpoint_removal", latencies)
    print(
        f"endpoint removal -> out of the group on 3 nodes: p50 {result['endpoint_removal_p50_ms']:.1f} ms, p99 {result['endpoint_removal_p99_ms']:.1f} ms",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 Services and 20 changes instead of 1000 and 100")
    parser.add_argument("--services", type=int, help="Services present from the cold start (default 1000; --quick: 100)")
    parser.add_argument("--keep", type=Path, help="make the nodes' data directories (logs, OVS databases) here and keep them")
    args = parser.parse_args()
    count = args.services if args.services is not None else (100 if args.quick else 1000)
    figures = run(count, 20 if args.quick else 100, args.keep)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

"""Benchmark Kubernetes Services in the datapath: three contivd nodes in Kubernetes mode (each in
its namespace with its own OVS, joined by a fabric namespace, as in tests/support/nodes.py), the leader
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

``--real`` measures the same through the REAL kube-apiserver (../shared/kube-apiserver, via
tests/support/kube_real.py) beside the test server's figures, in one run, the real ones prefixed
``real_``: the nodes watch an empty control plane first, then the relay in front of it moves to a
second one (same token and certificate) loaded with the N Services (no selector) and their
hand-made EndpointSlices, its etcd compacted and its kube-apiserver restarted (a fresh watch
cache: the resumed watch gets 410 and relists, as after a real restart). Changes are written
through the official client. ``leader_rss_mb_*``: the leader's RSS — with Kubernetes mode
watching the empty plane (``real_leader_rss_mb_idle``), with the N Services, and of a leader of
three nodes without Kubernetes mode (``leader_rss_mb_no_k8s``); ``real_leader_rss_ratio`` is the
first over the last (target ≤ 1.2).

Usage: python3 benchmarks/k8s_bench.py [--quick] [--services N] [--real]   (root; Open vSwitch installed)
The last line printed is one JSON object with every figure (``cold_1000_services_s`` and
``agent_rss_mb_1000_services`` name the default size whatever N is, for comparison across runs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks.datapath_bench import _client_in  # noqa: E402
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text  # noqa: E402
from tests.support.kube_objects import endpoint_slice, service  # noqa: E402
from tests.support.kube_real import ControlPlane, apply_object, control_plane, ensure_namespace, real_cluster, unavailable  # noqa: E402
from tests.support.nodes import Node, cluster_of_nodes, leader_of, sh, wait_until  # noqa: E402
from tests.support.service_pods import processes  # noqa: E402
from tests.support.waiting import free_ports  # noqa: E402

SERVICE_CIDR = "198.18.96.0/20"  # 4096 cluster IPs
ENDPOINTS = 10
SETTLE = 1.0  # seconds for a posted event to reach the leader, or for a process's RSS to settle
POST = "import httpx,sys; httpx.post(sys.argv[1], timeout=10).raise_for_status()"
Apply = Callable[[dict[str, Any]], None]  # writes one object (Service, EndpointSlice) to the API server the nodes watch


def cluster_ip(index: int) -> str:
    """From 198.18.97.1: a real API server gives its range's first address to its own Service."""
    return f"198.18.{97 + index // 250}.{1 + index % 250}"


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
    """The figures through the test API server; with `keep`, the nodes' data directories (logs
    included) are made there and kept, for finding where the time of a slow change went."""
    with tempfile.TemporaryDirectory(prefix="k8s-bench-") as tmp, processes() as running:
        root = Path(tmp) if keep is None else keep
        relay_port, empty_port, full_port = free_ports(3)
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{relay_port}", TOKEN))
        preload = root / "objects.json"
        preload.write_text(json.dumps(objects(count)))
        with cluster_of_nodes(root, 3, "--kubeconfig", str(kubeconfig), "--service-cidr", SERVICE_CIDR) as nodes:
            first = nodes[0]
            # Two API servers in node 1's namespace: an empty one the leader watches first, and
            # one holding every Service (its history compacted, as after an API server restart).
            running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(empty_port))
            running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(full_port), str(preload))
            sh("ip", "netns", "exec", first.ns, sys.executable, "-c", POST, f"http://127.0.0.1:{full_port}/_test/compact")
            relay = running.start(first.ns, sys.executable, "-m", "tests.support.tcp_relay", first.host, str(relay_port), str(empty_port))
            client, agents = node_clients(nodes)  # from here on this thread's sockets live in the fabric
            api = httpx.Client(base_url=f"http://{first.host}:{relay_port}", timeout=10)

            def apply(obj: dict[str, Any]) -> None:
                api.post("/_test/apply", json=obj).raise_for_status()

            return measure(nodes, client, agents, apply, lambda: move(relay, full_port), count, changes)


def run_real(count: int, changes: int, keep: Path | None = None) -> dict[str, Any]:
    """The same figures through the real kube-apiserver (see the module's docstring); with
    `keep`, the control planes' and nodes' directories are made in keep/real and kept."""
    with tempfile.TemporaryDirectory(prefix="k8s-bench-real-") as tmp:
        root = Path(tmp) if keep is None else keep / "real"
        with (
            control_plane(root / "empty", SERVICE_CIDR) as empty,
            control_plane(root / "full", SERVICE_CIDR, identity_of=empty) as full,
            ThreadPoolExecutor(max_workers=1) as in_root,
        ):
            in_root.submit(time.sleep, 0).result()  # its thread starts now, in the root namespace, where the API servers are
            started = time.perf_counter()
            load_real(full, count)
            print(f"{count} Services and EndpointSlices written to the real API server in {time.perf_counter() - started:.1f} s", flush=True)
            full.compact_etcd()
            full.down()
            full.up()  # a fresh watch cache: the nodes' resumed watches get 410, as after a real restart
            ensure_namespace(empty, "warm-up")
            with real_cluster(empty, root, 3) as cluster:
                client, agents = node_clients(cluster.nodes)
                watched = [empty]  # the plane the relay points the nodes at

                def apply(obj: dict[str, Any]) -> None:
                    in_root.submit(apply_object, watched[0], obj).result()

                def load() -> None:
                    cluster.point_relay_at(full.port)
                    watched[0] = full

                return measure(cluster.nodes, client, agents, apply, load, count, changes)


def load_real(plane: ControlPlane, count: int) -> None:
    """The Services (no selector) and their hand-made EndpointSlices, written 8 at a time."""
    ensure_namespace(plane, "bench")
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in pool.map(lambda obj: apply_object(plane, obj), objects(count)):
            pass


def node_clients(nodes: list[Node]) -> tuple[httpx.Client, list[httpx.Client]]:
    """A client of the nodes' APIs from the fabric namespace (the calling thread moves there for
    good: run it in a thread of its own, see in_thread), and one per agent over its root-only
    socket (the agent's TCP port answers the netmaster's signed calls only)."""
    fabric = nodes[0].fabric_ns
    assert fabric is not None
    sh("ip", "-n", fabric, "addr", "add", "198.19.0.254/24", "dev", "ctl")  # the benchmark's seat on the control network
    client = _client_in(fabric, nodes[0])
    agents = [httpx.Client(transport=httpx.HTTPTransport(uds=str(n.agent_socket)), base_url="http://agent", timeout=10) for n in nodes]
    return client, agents


def measure(
    nodes: list[Node], client: httpx.Client, agents: list[httpx.Client], apply: Apply, load: Callable[[], None], count: int, changes: int
) -> dict[str, Any]:
    """The figures, from nodes watching an empty API server: `load` moves them to the full one
    (the cold start: the leader's cut watch gets 410 and relists); changes are written with `apply`."""
    wait_watching(client, nodes)
    warm_up(apply)
    wait_programmed(agents, 0, 60)
    baseline = programmed_groups(agents)  # the control plane's own Service (`kubernetes`), if any
    role = {n.name: client.get(n.url() + "/info").json().get("current-state") for n in nodes}
    leader = next(n for n in nodes if role[n.name] == "leader")
    follower = next(n for n in nodes if role[n.name] == "follower")
    figures: dict[str, Any] = {"services": count, "endpoints_per_service": ENDPOINTS}
    figures |= {"agent_rss_mb_idle": rss_mb(follower), "leader_rss_mb_idle": rss_mb(leader)}
    started = time.perf_counter()
    load()
    wait_programmed(agents, baseline + count, 300)
    figures["cold_1000_services_s"] = time.perf_counter() - started
    figures |= {"agent_rss_mb_1000_services": rss_mb(follower), "leader_rss_mb_1000_services": rss_mb(leader)}
    print(f"{count} services x {ENDPOINTS} endpoints on 3 nodes from a cold start: {figures['cold_1000_services_s']:.1f} s", flush=True)
    monitors = [Monitor(node) for node in nodes]
    try:
        figures.update(service_latencies(apply, monitors, count, changes))
        figures.update(removal_latencies(apply, monitors, count + changes, max(5, changes // 2)))
    finally:
        for monitor in monitors:
            monitor.proc.kill()
            monitor.proc.wait()
    client.close()
    return figures


def leader_rss_without_kubernetes() -> float:
    """The leader's RSS in three nodes without Kubernetes mode, once ready and settled."""
    with tempfile.TemporaryDirectory(prefix="k8s-bench-off-") as tmp, cluster_of_nodes(Path(tmp), 3) as nodes:
        leader: Node = wait_until(lambda: leader_of(nodes), 60, "a leader", nodes[0])
        wait_until(lambda: leader.api_call("GET", "/readyz")[0] == 200, 60, "the leader ready", leader)
        time.sleep(SETTLE)
        return rss_mb(leader)


def move(relay: Any, port: int) -> None:
    relay.stdin.write(f"{port}\n")
    relay.stdin.flush()
    assert relay.stdout.readline().strip() == "moved"


def warm_up(apply: Apply) -> None:
    """One event on each watch of the empty server. The leader's reflector resets its retry
    backoff only on an event (it grew while no API server answered yet): without one, the cut
    below would wait out up to 15 s of backoff instead of measuring the datapath."""
    apply(service("warm-up", "none", "None"))
    apply(endpoint_slice("warm-up", "none-1", "none", [], 8080))
    time.sleep(SETTLE)  # the events reach the leader's reflector (nothing observable changes: headless, no Service)


def wait_watching(client: httpx.Client, nodes: list[Node], timeout: float = 60) -> None:
    """Until every node is ready: the leader's Service watch in sync, every agent synced."""
    urls = [node.url() + "/readyz" for node in nodes]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(client.get(url).status_code == 200 for url in urls):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the nodes were not ready within {timeout} s: {[client.get(url).text for url in urls]}")


def programmed_groups(agents: list[httpx.Client]) -> int:
    """The fewest service groups any node's bridge holds."""
    return min(int(agent.get("/inspect/driver").json()["vxlan"]["groups"]) for agent in agents)


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


def service_latencies(apply: Apply, monitors: list[Monitor], first: int, changes: int) -> dict[str, float]:
    latencies = []
    for k in range(first, first + changes):
        port = 20000 + k
        name = f"svc{k}"
        started, wall = time.perf_counter(), time.time()
        apply(endpoint_slice("bench", f"{name}-1", name, [backend(k * ENDPOINTS)], 8080))
        apply(service("bench", name, cluster_ip(k), port=port))
        latencies.append(max(monitor.wait("ADDED", f"tp_dst={port}") for monitor in monitors) - started)
        note_slow(f"Service {name}", wall, latencies[-1])
    result = percentiles("svc_to_flows", latencies)
    print(f"Service -> flows on 3 nodes: p50 {result['svc_to_flows_p50_ms']:.1f} ms, p99 {result['svc_to_flows_p99_ms']:.1f} ms", flush=True)
    return result


def removal_latencies(apply: Apply, monitors: list[Monitor], first: int, changes: int) -> dict[str, float]:
    """Affinity Services of 2 endpoints; the second turns not ready: its endpoint_dnat flow goes."""
    affinity = {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}}
    latencies = []
    for k in range(first, first + changes):
        name, port = f"svc{k}", 20000 + k
        addresses = [backend(k * ENDPOINTS), backend(k * ENDPOINTS + 1)]
        apply(endpoint_slice("bench", f"{name}-1", name, addresses, 8080))
        apply(service("bench", name, cluster_ip(k), port=port, **affinity))
        gone = f"reg0={int.from_bytes(bytes(int(o) for o in addresses[1].split('.')), 'big'):#x}"
        for monitor in monitors:
            monitor.wait("ADDED", gone)
        started, wall = time.perf_counter(), time.time()
        apply(endpoint_slice("bench", f"{name}-1", name, addresses[:1], 8080, not_ready=addresses[1:]))
        latencies.append(max(monitor.wait("DELETED", gone) for monitor in monitors) - started)
        note_slow(f"endpoint removal of {name}", wall, latencies[-1])
    result = percentiles("endpoint_removal", latencies)
    print(
        f"endpoint removal -> out of the group on 3 nodes: p50 {result['endpoint_removal_p50_ms']:.1f} ms, p99 {result['endpoint_removal_p99_ms']:.1f} ms",
        flush=True,
    )
    return result


def in_thread(work: Callable[[], Any]) -> Any:
    """`work` in a thread of its own: node_clients moves its thread into a fabric namespace for good."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(work).result()


ROWS = (  # --real's side-by-side table: (figure, key; the real one is prefixed real_)
    ("cold start, all 3 nodes programmed (s)", "cold_1000_services_s"),
    ("Service -> flows on 3 nodes, p50 (ms)", "svc_to_flows_p50_ms"),
    ("Service -> flows on 3 nodes, p99 (ms)", "svc_to_flows_p99_ms"),
    ("endpoint removal, p50 (ms)", "endpoint_removal_p50_ms"),
    ("endpoint removal, p99 (ms)", "endpoint_removal_p99_ms"),
    ("leader RSS, watching an empty server (MB)", "leader_rss_mb_idle"),
    ("leader RSS with the Services (MB)", "leader_rss_mb_1000_services"),
    ("follower RSS with the Services (MB)", "agent_rss_mb_1000_services"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 Services and 20 changes instead of 1000 and 100")
    parser.add_argument("--services", type=int, help="Services present from the cold start (default 1000; --quick: 100)")
    parser.add_argument("--keep", type=Path, help="make the nodes' data directories (logs, OVS databases) here and keep them")
    parser.add_argument("--real", action="store_true", help="also through the real kube-apiserver (../shared/kube-apiserver), side by side")
    args = parser.parse_args()
    if args.real and unavailable():
        raise SystemExit(f"--real: {unavailable()}")
    count = args.services if args.services is not None else (100 if args.quick else 1000)
    changes = 20 if args.quick else 100
    figures: dict[str, Any] = in_thread(lambda: run(count, changes, args.keep))
    if args.real:
        real: dict[str, Any] = in_thread(lambda: run_real(count, changes, args.keep))
        figures |= {f"real_{key}": value for key, value in real.items() if key not in ("services", "endpoints_per_service")}
        figures["leader_rss_mb_no_k8s"] = in_thread(leader_rss_without_kubernetes)
        figures["real_leader_rss_ratio"] = figures["real_leader_rss_mb_idle"] / figures["leader_rss_mb_no_k8s"]
        print(f"{'figure':44} {'test server':>12} {'real':>12}")
        for label, key in ROWS:
            print(f"{label:44} {figures[key]:12.1f} {figures['real_' + key]:12.1f}")
        print(
            f"leader RSS without Kubernetes mode {figures['leader_rss_mb_no_k8s']:.1f} MB; with it (real, idle) x{figures['real_leader_rss_ratio']:.2f}"
        )
    print(json.dumps({key: round(value, 2) if isinstance(value, float) else value for key, value in figures.items()}))


if __name__ == "__main__":
    main()

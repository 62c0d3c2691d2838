"""Routing mode's BGP advertisement: how soon an endpoint's /32 reaches the top-of-rack router.

One contivd node (`--fwd-mode routing`, its own network namespace, managed OVS) peers with
Debian's FRR (zebra + bgpd) in a router namespace, as tests/bgp/test_routing.py sets them up.
"Visible on the ToR" means installed in the router's kernel by zebra: a monitor in the router's
namespace timestamps each RTM_NEWROUTE/RTM_DELROUTE of a /32 (netlink events, no polling), a
driver in the node's namespace timestamps each API call (both wall clock, one machine).

* cold start: `--cold` endpoints (default 1 000; `--quick`: 200) are created while the node has no
  Bgp object, then the Bgp object is created: seconds until the router holds all their /32s
  (the session's set-up, ExaBGP's start and the whole advertisement);
* endpoint → route: with the session up, `--eps` more endpoints (default 200; `--quick`: 30) are
  created one at a time, `--gap` seconds apart; per endpoint, ms from the start of the
  createEndpoint call to the route in the router's kernel: p50, p99; also split into the API
  call itself (api_create_*) and from its answer to the route (api_answer_to_route_*).

Prints a summary; the last line is one JSON object: ep_to_route_p50_ms, ep_to_route_p99_ms,
cold_1000_routes_s (null unless --cold is 1 000: then cold_routes_s and cold_routes say what
was measured). Needs root, Open vSwitch and frr. Removes what it creates (both namespaces, the
node and its OVS, the router's daemons, by PID) also on failure.

    python3 benchmarks/bgp_bench.py [--quick] [--cold 1000] [--eps 200] [--gap 0.2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.frr import TorRouter, frr_missing  # noqa: E402
from tests.support.nodes import Node, sh, wait_until  # noqa: E402

TOR_IP, ROUTER_IP = "198.18.1.1", "198.18.1.2"
TOR_AS, NODE_AS = 65000, 65001
SUBNET = "198.18.64.0/18"  # room for 16 000 endpoints
TOR_CONFIG = f"""router bgp {TOR_AS}
 bgp router-id {TOR_IP}
 no bgp ebgp-requires-policy
 neighbor {ROUTER_IP} remote-as {NODE_AS}
 neighbor {ROUTER_IP} timers 3 9
 neighbor {ROUTER_IP} timers connect 1
"""

MONITOR = """
import sys, time
from pyroute2 import IPRoute
with IPRoute() as ipr:
    ipr.bind()
    print("ready", flush=True)
    while True:
        for msg in ipr.get():
            if msg["event"] in ("RTM_NEWROUTE", "RTM_DELROUTE") and msg.get("dst_len") == 32 and msg.get_attr("RTA_DST"):
                print(msg["event"], msg.get_attr("RTA_DST"), repr(time.time()), flush=True)
"""

DRIVER = """
import httpx, json, sys, time
socket, count, gap, host = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
h = {"Accept": "application/json"}
with httpx.Client(transport=httpx.HTTPTransport(uds=socket), timeout=30) as client:  # the node's API socket: root, no token
    for i in range(count):
        name = f"{sys.argv[5]}{i}"
        body = {"TenantName": "default", "NetworkName": "pods", "EndpointID": name, "ConfigEP": {"Container": name, "Host": host}}
        started = time.time()
        r = client.post("http://contivd/plugin/createEndpoint", json=body, headers=h)
        r.raise_for_status()
        print(r.json()["EndpointConfig"]["ipAddress"], repr(started), repr(time.time()), flush=True)
        if gap:
            time.sleep(gap)
"""


class RouteMonitor:
    """Timestamps of the /32s the router's kernel gained (first time) and lost, from netlink events."""

    def __init__(self, ns: str):
        self.added: dict[str, float] = {}
        self.removed: dict[str, float] = {}
        self.lock = threading.Condition()
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", MONITOR], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the route monitor did not start")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event, dst, stamp = line.split()
            with self.lock:
                target = self.added if event == "RTM_NEWROUTE" else self.removed
                target.setdefault(dst, float(stamp))
                self.lock.notify_all()

    def wait_for(self, addresses: set[str], timeout: float) -> float:
        """The time the last of `addresses` was added (RuntimeError after `timeout` s)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not addresses <= self.added.keys():
                if not self.lock.wait(max(0.0, deadline - time.monotonic())):
                    missing = len(addresses - self.added.keys())
                    raise RuntimeError(f"{missing} of {len(addresses)} routes not on the router after {timeout} s")
            return max(self.added[a] for a in addresses)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def create_endpoints(node: Node, count: int, gap: float, prefix: str) -> dict[str, tuple[float, float]]:
    """Create `count` endpoints from inside the node's namespace; address → wall times the call started and returned."""
    argv = ["ip", "netns", "exec", node.ns, sys.executable, "-c", DRIVER, str(node.socket), str(count), str(gap), node.name, prefix]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=max(600, count * (gap + 1)), check=False)
    if done.returncode:
        raise RuntimeError(f"creating endpoints failed: {done.stderr[-500:]}")
    return {ip: (float(started), float(ended)) for ip, started, ended in (line.split() for line in done.stdout.splitlines())}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run(cold: int, eps: int, gap: float) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="bgp-bench-"))
    node = Node(root)
    tor = TorRouter(f"cdt-{uuid.uuid4().hex[:6]}-bb", root / "tor")
    monitor: RouteMonitor | None = None
    try:
        node.create_namespace()
        sh("ip", "netns", "add", tor.ns)
        sh("ip", "-n", tor.ns, "link", "set", "lo", "up")
        sh("ip", "-n", node.ns, "link", "add", "uplink0", "type", "veth", "peer", "name", "tor1", "netns", tor.ns)
        sh("ip", "-n", tor.ns, "addr", "add", f"{TOR_IP}/24", "dev", "tor1")
        sh("ip", "netns", "exec", tor.ns, "ethtool", "-K", "tor1", "tx", "off")
        sh("ip", "-n", tor.ns, "link", "set", "tor1", "up")
        sh("ip", "-n", node.ns, "link", "set", "uplink0", "up")
        tor.start(TOR_CONFIG, zebra=True)
        monitor = RouteMonitor(tor.ns)
        node.start("--fwd-mode", "routing", "--net-mode", "vlan", "--vlan-uplinks", "uplink0")
        wait_until(lambda: node.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 120, "the node's API", node)
        network = {"tenantName": "default", "networkName": "pods", "encap": "vlan", "subnet": SUBNET}
        assert node.api_call("POST", "/api/v1/networks/default:pods/", network)[0] == 200

        created = create_endpoints(node, cold, 0.0, "cold")
        bgp = {"hostname": node.name, "routerip": f"{ROUTER_IP}/24", "as": str(NODE_AS), "neighbor": TOR_IP, "neighbor-as": str(TOR_AS)}
        started = time.time()
        status, answer = node.api_call("POST", f"/api/v1/Bgps/{node.name}/", bgp)
        assert status == 200, answer
        cold_s = monitor.wait_for(set(created), 600) - started

        warm_started = time.time()
        warm = create_endpoints(node, eps, gap, "warm")
        monitor.wait_for(set(warm), 120)
        latencies = [(monitor.added[ip] - started) * 1000 for ip, (started, _) in warm.items()]
        after_api = [(monitor.added[ip] - ended) * 1000 for ip, (_, ended) in warm.items()]
        api = [(ended - started) * 1000 for started, ended in warm.values()]
        return {
            "ep_to_route_p50_ms": round(statistics.median(latencies), 1),
            "ep_to_route_p99_ms": round(percentile(latencies, 0.99), 1),
            "cold_1000_routes_s": round(cold_s, 2) if cold == 1000 else None,
            "cold_routes": cold,
            "cold_routes_s": round(cold_s, 2),
            "endpoints_timed": len(latencies),
            "ep_to_route_over_1s": sum(1 for ms in latencies if ms > 1000),
            "routes_withdrawn_meanwhile": sum(1 for stamp in monitor.removed.values() if stamp >= warm_started),  # 0 unless the session flapped
            "api_create_p50_ms": round(statistics.median(api), 1),
            "api_create_p99_ms": round(percentile(api, 0.99), 1),
            "api_answer_to_route_p50_ms": round(statistics.median(after_api), 1),
            "api_answer_to_route_p99_ms": round(percentile(after_api, 0.99), 1),
        }
    finally:
        if monitor is not None:
            monitor.stop()
        node.stop()
        tor.stop()
        sh("ip", "netns", "del", tor.ns, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 cold endpoints, 30 timed ones")
    parser.add_argument("--cold", type=int, default=None, help="endpoints advertised from cold start (default 1000)")
    parser.add_argument("--eps", type=int, default=None, help="endpoints timed one at a time (default 200)")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between the timed endpoints")
    args = parser.parse_args()
    problem = frr_missing()
    if problem:
        sys.exit(problem)
    cold = args.cold if args.cold is not None else (200 if args.quick else 1000)
    eps = args.eps if args.eps is not None else (30 if args.quick else 200)
    figures = run(cold, eps, args.gap)
    print(f"{cold} endpoints advertised from cold start in {figures['cold_routes_s']} s")
    print(f"endpoint create -> route on the ToR: p50 {figures['ep_to_route_p50_ms']} ms, p99 {figures['ep_to_route_p99_ms']} ms ({eps} endpoints)")
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

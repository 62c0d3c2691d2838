"""Partition rounds under load, run from the clients' side of a NetnsCluster's bridge.

    ip netns exec FABRIC python3 -m tests.support.partition_driver CONFIG_JSON

Several client threads create endpoints round-robin over every node (one request per node in
turn; on a failure or a client timeout the same endpoint is retried on the next node, so the
retries are idempotent). Each round finds the leader, cuts it off from its peers with iptables
inside its namespace (`both`: INPUT and OUTPUT; `outbound`: OUTPUT only), probes its /info and
/readyz until it steps down, heals after the given seconds and waits until every node
acknowledges writes again. Then it reads the network back and prints one JSON object (the last
line): per-round figures and the integrity counts (partition_figures.py computes them).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from tests.support.netns_cluster import RAFT_PORT
from tests.support.partition_figures import Ack, Window, integrity, isolated_acks, recovery_seconds, unavailable_seconds

NETWORK = {"tenantName": "default", "networkName": "faults", "encap": "vxlan", "subnet": "198.19.0.0/16", "gateway": "198.19.255.254"}
# contivd's typed errors (503 + Retry-After while there is no leader); the API wants the
# cluster secret as a bearer token from any non-loopback caller. main() adds the token.
JSON = {"Accept": "application/json"}
# The nodes serve TLS (their listeners are off loopback): main() adds the cluster CA to verify them with.
TLS: dict[str, Any] = {}


class Load:
    """Client threads creating endpoints round-robin over the nodes, recording every ack."""

    def __init__(self, nodes: list[dict[str, str]], clients: int, timeout: float):
        self.nodes, self.clients, self.timeout = nodes, clients, timeout
        self.acks: list[Ack] = []
        self.attempted: set[str] = set()
        self.failures: Counter[str] = Counter()
        self.timeouts: list[tuple[str, float]] = []  # (node, sent) of requests the client gave up on
        self.retried: set[str] = set()  # endpoints acknowledged after a failed attempt elsewhere
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._client, args=(c,), daemon=True) for c in range(clients)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(self.timeout * 3)

    def _client(self, number: int) -> None:
        turn, serial = number, 0
        with httpx.Client(timeout=self.timeout, headers=JSON, **TLS) as client:
            while not self.stop.is_set():
                endpoint = f"c{number}-{serial}"
                serial += 1
                with self.lock:
                    self.attempted.add(endpoint)
                while not self.stop.is_set():
                    node = self.nodes[turn % len(self.nodes)]
                    turn += 1
                    if self._create(client, node, endpoint):
                        break
                    with self.lock:
                        self.retried.add(endpoint)
                    time.sleep(0.05)

    def _create(self, client: httpx.Client, node: dict[str, str], endpoint: str) -> bool:
        body = {"TenantName": "default", "NetworkName": "faults", "EndpointID": endpoint, "ConfigEP": {"Container": endpoint, "Host": node["name"]}}
        sent = time.monotonic()
        try:
            answer = client.post(node["url"] + "/plugin/createEndpoint", json=body)
        except httpx.TimeoutException:
            self._failed(f"{node['name']}: client timeout")
            with self.lock:
                self.timeouts.append((node["name"], sent))
            return False
        except httpx.HTTPError as exc:
            self._failed(f"{node['name']}: {type(exc).__name__}")
            return False
        if answer.status_code != 200:
            self._failed(f"{node['name']}: HTTP {answer.status_code}" + (" retry-after" if "retry-after" in answer.headers else ""))
            return False
        address = answer.json()["EndpointConfig"]["ipAddress"]
        with self.lock:
            self.acks.append(Ack(endpoint, address, node["name"], sent, time.monotonic()))
        return True

    def _failed(self, what: str) -> None:
        with self.lock:
            self.failures[what] += 1

    def snapshot(self) -> list[Ack]:
        with self.lock:
            return list(self.acks)


def get_json(url: str, timeout: float = 2.0) -> tuple[int, Any]:
    try:
        answer = httpx.get(url, headers=JSON, timeout=timeout, **TLS)
    except httpx.HTTPError:
        return 0, None
    try:
        return answer.status_code, answer.json()
    except ValueError:
        return answer.status_code, None


def wait(predicate: Any, timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout}s waiting for {what}")


def the_leader(nodes: list[dict[str, str]]) -> dict[str, str] | None:
    """The one node every node agrees leads (by /info), or None."""
    infos = [get_json(n["url"] + "/info")[1] for n in nodes]
    if any(not isinstance(i, dict) or "current-state" not in i for i in infos):
        return None
    leaders = [n for n, i in zip(nodes, infos, strict=True) if i["current-state"] == "leader"]
    known = {i["cluster"]["leader"] for i in infos}
    if len(leaders) != 1 or len(known) != 1 or len(infos[0]["nodes"]) != len(nodes):
        return None
    return leaders[0]


def first_true(predicate: Callable[[], bool], deadline: float) -> float | None:
    """When `predicate` first held, polling until the deadline (monotonic s); None if never."""
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.05)
    return None


def status_page_leads(node: dict[str, str]) -> bool:
    """Whether the node's status page data (`/status/api/snapshot`) still names it the leader
    (True while it does not answer: nothing shows the step-down yet)."""
    _, snapshot = get_json(node["url"] + "/status/api/snapshot", timeout=2.0)
    if not isinstance(snapshot, dict):
        return True
    return bool(snapshot["cluster"]["leader"] in (node["name"], f"{node['host']}:{RAFT_PORT}"))


def iptables(node: dict[str, str], peers: list[dict[str, str]], mode: str, action: str) -> None:
    for peer in peers:
        rules = [["OUTPUT", "-d", peer["host"]]] + ([["INPUT", "-s", peer["host"]]] if mode == "both" else [])
        for chain, *match in rules:
            subprocess.run(["ip", "netns", "exec", node["ns"], "iptables", "-w", action, chain, *match, "-j", "DROP"], check=True, timeout=30)


def partition_round(load: Load, nodes: list[dict[str, str]], mode: str, seconds: float, settle: float) -> dict[str, Any]:
    """Settle, cut the leader off, watch it step down, heal, wait for every node to serve."""
    time.sleep(settle)
    leader = wait(lambda: the_leader(nodes), 60, "one leader every node agrees on")
    peers = [n for n in nodes if n is not leader]
    iptables(leader, peers, mode, "-I")
    cut = time.monotonic()
    try:
        with ThreadPoolExecutor(3) as pool:  # one poller each, so a slow answer delays only its own figure
            probes = [
                pool.submit(first_true, lambda: (get_json(leader["url"] + "/info", 0.5)[1] or {}).get("current-state") == "follower", cut + seconds),
                pool.submit(first_true, lambda: get_json(leader["url"] + "/readyz", 0.5)[0] == 503, cut + seconds),
                pool.submit(first_true, lambda: not status_page_leads(leader), cut + seconds),
            ]
            stepdown, readyz_down, status_down = ((None if t is None else t - cut) for t in (p.result() for p in probes))
        time.sleep(max(0.0, cut + seconds - time.monotonic()))  # the probes may all have succeeded early
    finally:
        iptables(leader, peers, mode, "-D")
    healed = time.monotonic()
    window = Window(leader["name"], mode, cut, healed)
    names = [n["name"] for n in nodes]
    recovered = wait(lambda: recovery_seconds(load.snapshot(), window, names) is not None, 60, "every node to serve after the heal")
    acks = load.snapshot()
    return {
        "mode": mode,
        "isolated": leader["name"],
        "seconds": round(healed - cut, 2),
        "stepdown_s": None if stepdown is None else round(stepdown, 2),
        "readyz_down_s": None if readyz_down is None else round(readyz_down, 2),
        "status_down_s": None if status_down is None else round(status_down, 2),
        "unavailable_s": round(unavailable_seconds(acks, window), 2),
        "recovery_s": round(recovery_seconds(acks, window, names) or 0.0, 2) if recovered else None,
        "majority_acks": sum(1 for a in acks if a.node != leader["name"] and cut <= a.sent and a.answered <= healed),
        "isolated_acks": [asdict(a) | {"retry": a.endpoint in load.retried} for a in isolated_acks(acks, window)],
        # client timeouts sent around this round: (node, seconds after the cut)
        "client_timeouts": [(name, round(sent - cut, 2)) for name, sent in load.timeouts if cut - 5 <= sent <= healed + 5],
    }


def stored_endpoints(node: dict[str, str]) -> tuple[dict[str, str], int]:
    status, answer = get_json(node["url"] + "/api/v1/inspect/networks/default:faults/", timeout=60)
    if status != 200:
        raise SystemExit(f"reading the network back from {node['name']} failed: HTTP {status} {answer}")
    oper = answer["Oper"]
    return {e["endpointID"]: e["ipAddress"][0] for e in oper.get("endpoints", [])}, int(oper.get("allocatedAddressesCount", 0))


def main(config: dict[str, Any]) -> dict[str, Any]:
    nodes: list[dict[str, str]] = config["nodes"]
    JSON["Authorization"] = f"Bearer {config['token']}"
    ca_file = wait(lambda: next((Path(f) for f in config["ca_files"] if Path(f).is_file()), None), 90, "a node's cluster CA")
    TLS["verify"] = ssl.create_default_context(cafile=ca_file)
    wait(lambda: the_leader(nodes), 90, "the cluster to elect a leader and register every node")
    wait(lambda: get_json(nodes[0]["url"] + "/api/v1/tenants/default/")[0] == 200, 60, "the default tenant")
    network = lambda: httpx.post(nodes[0]["url"] + "/api/v1/networks/default:faults/", json=NETWORK, headers=JSON, timeout=10, **TLS)  # noqa: E731
    wait(lambda: network().status_code == 200, 60, "the network to be created")
    load = Load(nodes, config["clients"], config["client_timeout"])
    load.start()
    rounds = []
    try:
        wait(lambda: len(load.snapshot()) >= 20, 120, "the first writes under load")
        for spec in config["rounds"]:
            rounds.append(partition_round(load, nodes, spec["mode"], spec["seconds"], config["settle"]))
    finally:
        load.finish()
    stored, allocated = stored_endpoints(nodes[0])
    copies = [stored_endpoints(n)[0] for n in nodes[1:]]
    result = integrity(load.acks, stored, allocated, load.attempted)
    return {
        "rounds": rounds,
        "acked": len(load.acks),
        "stored": len(stored),
        "lost": len(result.lost),
        "lost_examples": result.lost[:5],
        "duplicates": result.duplicates,
        "leaked": result.leaked,
        "unknown": result.unknown[:5],
        "replicas_agree": all(copy == stored for copy in copies),
        "failures": dict(load.failures.most_common(12)),
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))

"""Kubernetes mode on a 3-node cluster (`--datapath none`): only the leader watches the test API
server, and every node's store ends up holding exactly what the API server says, through
leader loss, an API server restart with compacted history and a refused token."""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from contivd.k8s.resolve import resolve_service
from contivd.state import KubeServiceState
from tests.support.contivd_nodes import ContivdCluster, ContivdProcess
from tests.support.ctl_runner import invoke
from tests.support.k8s_apiserver import KubeApiServer
from tests.support.kube_objects import endpoint_slice, service
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.cluster]

CIDR = "198.19.112.0/20"
SYNC_TIMEOUT = 90  # a new leader first loads the kubernetes client: seconds of CPU on a loaded machine


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer().start() as server:
        yield server


@contextmanager
def kubernetes_cluster(api: KubeApiServer, tmp_path: Path) -> Iterator[ContivdCluster]:
    """Three contivd nodes in Kubernetes mode watching `api`, started; closed at the end."""
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    nodes = ContivdCluster(tmp_path, 3)
    try:
        for node in nodes.nodes:
            node.extra = ("--kubeconfig", str(kubeconfig), "--service-cidr", CIDR)
        yield nodes.start(90)  # generous: 3 processes importing on a loaded 2-vCPU machine
    finally:
        nodes.close()


@pytest.fixture
def cluster(api: KubeApiServer, tmp_path: Path) -> Iterator[ContivdCluster]:
    populate(api)
    with kubernetes_cluster(api, tmp_path) as nodes:
        yield nodes


def populate(api: KubeApiServer) -> None:
    """Services of every kind the resolver tells apart."""
    api.apply(service("shop", "web", "198.19.112.10", port_name="http"))
    api.apply(endpoint_slice("shop", "web-a", "web", ["198.18.0.5"], port=8080, not_ready=["198.18.0.9"]))
    api.apply(endpoint_slice("shop", "web-b", "web", ["198.18.0.6"], port=9090))  # the named targetPort differs per pod
    api.apply(service("shop", "manual", "198.19.112.12"))  # no selector: its slice is managed by hand
    api.apply(endpoint_slice("shop", "manual-1", "manual", ["198.18.1.20"], port=80))
    api.apply(service("shop", "headless", "None"))
    api.apply(endpoint_slice("shop", "headless-1", "headless", ["198.18.0.7"], port=80))
    api.apply(service("shop", "dns", "198.19.112.53", protocol="SCTP"))
    api.apply(service("shop", "far", "198.19.224.1"))  # outside --service-cidr


def expected(api: KubeApiServer) -> dict[str, dict[str, Any]]:
    """What the store must hold for the API server's objects now."""
    slices = api.list("EndpointSlice")
    records = {}
    for svc in api.list("Service"):
        name = svc["metadata"]["name"]
        mine = [
            s
            for s in slices
            if s["metadata"]["labels"].get("kubernetes.io/service-name") == name and s["metadata"]["namespace"] == svc["metadata"]["namespace"]
        ]
        record = resolve_service(svc, mine, ipaddress.IPv4Network(CIDR))
        if isinstance(record, KubeServiceState):
            records[record.key] = {"kind": "kubernetes", **record.to_json()}
    return records


def stored(node: ContivdProcess) -> dict[str, dict[str, Any]] | None:
    try:
        answer = node.get("/kubernetes/services")
    except httpx.HTTPError:
        return None
    return {f"{r['namespace']}/{r['name']}": r for r in answer.json()} if answer.status_code == 200 else None


def converged(cluster: ContivdCluster, api: KubeApiServer) -> None:
    """Every live node's store equals the API server's state (no duplicate, no stale)."""
    want = expected(api)
    for node in (n for n in cluster.nodes if n.alive()):
        wait_for(partial(holds, node, want), SYNC_TIMEOUT, f"{node.name}'s Kubernetes services to equal the API server's")


def holds(node: ContivdProcess, want: dict[str, dict[str, Any]]) -> bool:
    return stored(node) == want


def sole_watcher(cluster: ContivdCluster) -> ContivdProcess | None:
    """The one node whose watch runs, if it is the only one and the leader (elections on a
    loaded machine move leadership now and then: poll)."""
    infos = {n.name: n.info() for n in cluster.nodes if n.alive()}
    watching = [n for n in cluster.nodes if (infos.get(n.name) or {}).get("kubernetes", {}).get("watching")]
    if len(watching) == 1 and (infos[watching[0].name] or {}).get("current-state") == "leader":
        return watching[0]
    return None


def list_requests(api: KubeApiServer, plural: str) -> int:
    return sum(1 for method, path in api.requests if method == "GET" and path.split("?")[0].endswith(f"/{plural}") and "watch=" not in path)


def test_the_store_holds_what_the_api_server_says(cluster: ContivdCluster, api: KubeApiServer) -> None:
    converged(cluster, api)
    web = stored(cluster.nodes[0])["shop/web"]  # type: ignore[index]
    assert web["ports"] == [
        {
            "name": "http",
            "protocol": "TCP",
            "port": 80,
            "nodePort": 0,
            "backends": [{"ip": "198.18.0.5", "port": 8080}, {"ip": "198.18.0.6", "port": 9090}],
        }
    ]
    assert set(stored(cluster.nodes[0]) or ()) == {"shop/web", "shop/manual"}  # headless, SCTP and far-away left out
    oper = cluster.nodes[1].get("/api/v1/inspect/globals/global/").json()["Oper"]
    assert oper["clusterMode"] == "kubernetes", "Contiv's --mode kubernetes: the cluster's nodes have --kubeconfig"
    leader = wait_for(partial(sole_watcher, cluster), SYNC_TIMEOUT, "exactly one node, the leader, to watch")

    def skips_counted() -> bool:
        metrics = leader.get("/metrics").text
        return all(
            re.search(rf'contivd_k8s_services_skipped_total\{{reason="{reason}",service="{service_key}"\}} 1\.0', metrics)
            for service_key, reason in (("shop/dns", "sctp"), ("shop/far", "cluster-ip-outside-service-cidr"))
        )

    wait_for(skips_counted, 20, "the leader's skip counters")
    wait_for(lambda: {e["involvedObject"]["name"] for e in api.posted_events} == {"dns", "far"}, 20, "the skip Events")
    assert list_requests(api, "services") == 1 and list_requests(api, "endpointslices") == 1, "one watch per cluster: only the leader lists"

    api.apply(endpoint_slice("shop", "web-a", "web", ["198.18.0.5", "198.18.0.8"], port=8080))
    api.delete("Service", "shop", "manual")
    api.apply(service("shop", "dns", "198.19.112.53", protocol="UDP"))  # fixed: now programmable
    converged(cluster, api)
    assert set(stored(cluster.nodes[1]) or ()) == {"shop/web", "shop/dns"}

    listing = invoke(["ctl", "--server", cluster.nodes[2].url, "service", "ls"]).output
    assert "Kubernetes services" in listing
    assert re.search(
        r"kubernetes\s+shop\s+web\s+198\.19\.112\.10\s+http:80/TCP\s+198\.18\.0\.5:8080 198\.18\.0\.6:9090 198\.18\.0\.8:8080", listing
    ), listing


def test_a_new_leader_resumes_without_duplicate_or_stale_services(cluster: ContivdCluster, api: KubeApiServer) -> None:
    converged(cluster, api)
    done = threading.Event()

    def churn() -> None:
        i = 0
        while not done.is_set():
            api.apply(service("churn", f"svc-{i % 7}", f"198.19.113.{i % 7}"))
            api.apply(endpoint_slice("churn", f"svc-{i % 7}-x", f"svc-{i % 7}", [f"198.18.2.{i % 250}"], port=80))
            doomed = f"svc-{(i + 4) % 7}"
            if i % 3 == 0 and api.get("Service", "churn", doomed):
                api.delete("Service", "churn", doomed)
            i += 1
            done.wait(0.02)

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    try:
        old = cluster.leader()
        wait_for(lambda: any(k.startswith("churn/") for k in stored(old) or ()), SYNC_TIMEOUT, "the churn to reach the store")
        old.kill()
        new = wait_for(partial(sole_watcher, cluster), SYNC_TIMEOUT, "a new leader, alone, to watch")
        assert new is not old
    finally:
        done.set()
        worker.join()
    converged(cluster, api)


def test_an_api_server_restart_with_compacted_history_relists(cluster: ContivdCluster, api: KubeApiServer) -> None:
    converged(cluster, api)
    lists_before = list_requests(api, "services")
    api.stop()
    api.delete("Service", "shop", "web")  # while the watch is down: only a relist can tell
    api.apply(service("shop", "new", "198.19.112.20"))
    api.start(keep_history=False)
    converged(cluster, api)
    assert "shop/web" not in (stored(cluster.nodes[0]) or {})
    assert list_requests(api, "services") > lists_before


def readiness(node: ContivdProcess) -> tuple[int, dict[str, Any]]:
    answer = node.get("/readyz")
    return answer.status_code, answer.json()


def test_a_refused_token_or_an_absent_server_makes_the_leader_say_why_and_tears_nothing_down(cluster: ContivdCluster, api: KubeApiServer) -> None:
    converged(cluster, api)
    before = stored(cluster.nodes[0])
    leader = cluster.leader()
    good_token, api.token = api.token, "rotated"
    api.stop()
    api.start()

    def refused() -> dict[str, Any] | None:
        code, body = readiness(leader)
        return body if code == 503 and "401" in str(body) else None

    body = wait_for(refused, 40, "the leader's readiness to name the 401")
    assert "token" in body["failing"]["kubernetes_api"]
    assert all(readiness(n)[0] == 200 for n in cluster.followers()), "only the watching leader depends on the API server"
    api.stop()
    wait_for(lambda: "unreachable" in str(readiness(leader)[1]), 40, "the leader's readiness to say the API server is unreachable")
    assert stored(cluster.nodes[0]) == before, "nothing programmed is torn down while the API server is away"
    api.token = good_token
    api.start()
    wait_for(lambda: readiness(leader)[0] == 200, 40, "readiness back once the API server answers")
    converged(cluster, api)

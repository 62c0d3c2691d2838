"""Kubernetes mode turned off: the leader without --kubeconfig removes the Services and
NetworkPolicy records the Kubernetes watch wrote, once no live node is in Kubernetes mode; a
node still in it (a rolling restart half done) keeps them. In-process against a MemoryStore,
and on a 3-node cluster restarted node by node without --kubeconfig (the datapath side, flows
and NodePort rules going, is in test_nodeport.py)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio

from contivd.k8s.modeoff import KubernetesModeOff, kubernetes_nodes
from contivd.state import NodeRecord, keys
from raftstore import MemoryStore
from tests.k8s.test_cluster import kubernetes_cluster
from tests.k8s.test_netpol_sync import namespace, pod, policy
from tests.support.contivd_nodes import ContivdCluster, ContivdProcess
from tests.support.k8s_apiserver import KubeApiServer
from tests.support.kube_objects import endpoint_slice, service
from tests.support.waiting import wait_for

SYNC_TIMEOUT = 90  # a new leader first loads the kubernetes client: seconds of CPU on a loaded machine


def node(name: str, kubernetes: bool) -> NodeRecord:
    return NodeRecord(name, f"127.0.0.1:{9000 + len(name)}", "http://127.0.0.1:1", "127.0.0.1", "127.0.0.1", False, "0", kubernetes=kubernetes)


def test_the_live_nodes_in_kubernetes_mode_are_named_and_the_flag_survives_the_store() -> None:
    assert kubernetes_nodes([node("b", True), node("a", False), node("c", True)]) == ["b", "c"]
    assert NodeRecord.from_json(node("a", True).to_json()).kubernetes
    assert "kubernetes" not in node("a", False).to_json(), "a node out of Kubernetes mode keeps the record's old shape"


async def test_the_records_go_once_no_live_node_is_in_kubernetes_mode(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "contivd.k8s")
    store = MemoryStore()  # always the leader
    await store.put(keys.k8s_service("shop", "web"), {"namespace": "shop", "name": "web", "clusterIP": "198.19.112.10", "ports": []})
    await store.put(keys.k8s_service("shop", "db"), {"namespace": "shop", "name": "db", "clusterIP": "198.19.112.11", "ports": []})
    await store.put(keys.k8s_netpol("shop/db-0"), [])
    await store.put(keys.node("still-on"), node("still-on", True).to_json())
    await store.put(keys.net_state("default", "pods"), {"id": "pods.default"})  # not Kubernetes': stays
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KubernetesModeOff(store).run)
        await trio.sleep(0.2)
        assert len(store.list_nowait(keys.K8S_SERVICES_PREFIX)) == 2, "a live node in Kubernetes mode keeps the records"
        assert "but on at still-on" in caplog.text
        await store.put(keys.node("still-on"), node("still-on", False).to_json())  # restarted without --kubeconfig
        with trio.fail_after(10):
            while store.list_nowait(keys.K8S_SERVICES_PREFIX) or store.list_nowait(keys.K8S_NETPOL_PREFIX):
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert store.get_nowait(keys.net_state("default", "pods")) is not None
    assert caplog.text.count("Kubernetes mode is off (no live node has --kubeconfig): removed 3 records, 2 Services and 1 pods'") == 1


# ---- a 3-node cluster --------------------------------------------------------------------


def populate(api: KubeApiServer) -> None:
    """Two Services and a NetworkPolicy giving shop/db ingress rules."""
    api.apply(service("shop", "web", "198.19.112.10"))
    api.apply(endpoint_slice("shop", "web-a", "web", ["198.18.0.5"], port=8080))
    api.apply(service("shop", "db", "198.19.112.11"))
    api.apply(namespace("shop"))
    api.apply(pod("shop", "web-0", "198.18.0.5", app="web"))
    api.apply(pod("shop", "db-0", "198.18.0.6", app="db"))
    spec = {"podSelector": {"matchLabels": {"app": "db"}}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}]}
    api.apply(policy("shop", "db-in", spec))


def services_of(node: ContivdProcess) -> set[str] | None:
    try:
        answer = node.get("/kubernetes/services")
    except httpx.HTTPError:
        return None
    return {f"{r['namespace']}/{r['name']}" for r in answer.json()} if answer.status_code == 200 else None


def has_netpol(node: ContivdProcess) -> bool | None:
    """Whether the node's store holds NetworkPolicy rules of namespace shop (/policy/hits/shop is 404 without)."""
    try:
        status = node.get("/policy/hits/shop").status_code
    except httpx.HTTPError:
        return None
    return {200: True, 404: False}.get(status)


def holds_all(cluster: ContivdCluster) -> bool:
    return all(services_of(n) == {"shop/web", "shop/db"} and has_netpol(n) is True for n in cluster.nodes)


def holds_none(cluster: ContivdCluster) -> bool:
    return all(services_of(n) == set() and has_netpol(n) is False for n in cluster.nodes)


def registered_modes(node: ContivdProcess) -> dict[str, bool] | None:
    """Node name → in Kubernetes mode, as this node's registry says."""
    info = node.info()
    return {x["name"]: bool(x.get("kubernetes")) for x in info["nodes"]} if info else None


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer().start() as server:
        yield server


@pytest.mark.k8s
@pytest.mark.cluster
def test_restarting_every_node_without_kubeconfig_removes_the_records_on_every_node(api: KubeApiServer, tmp_path: Path) -> None:
    populate(api)
    with kubernetes_cluster(api, tmp_path) as cluster:
        wait_for(lambda: holds_all(cluster), SYNC_TIMEOUT, "every node to hold the Services and the NetworkPolicy rules")

        # A rolling restart without --kubeconfig, the leader first (SIGTERM hands the leadership
        # over): while one node is still in Kubernetes mode, nothing is removed.
        order = [cluster.leader(), *cluster.followers()]
        for member in order[:2]:
            member.stop()
            member.extra = ()
            member.start()
            cluster.wait_ready(90)
        modes = {order[0].name: False, order[1].name: False, order[2].name: True}
        wait_for(lambda: all(registered_modes(n) == modes for n in cluster.nodes), 30, "the registrations to say who is in Kubernetes mode")
        assert holds_all(cluster), "a node still in Kubernetes mode keeps the records"

        order[2].stop()
        order[2].extra = ()
        order[2].start()
        cluster.wait_ready(90)
        wait_for(lambda: holds_none(cluster), SYNC_TIMEOUT, "every node's Kubernetes records to be removed")
        logs = "".join((n.data_dir / "contivd.log").read_text(errors="replace") for n in cluster.nodes)
        assert len(re.findall(r"Kubernetes mode is off \(no live node has --kubeconfig\): removed \d+ records, 2 Services and \d+ pods'", logs)) == 1

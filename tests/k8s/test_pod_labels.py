"""The leader's pod watch in-process: the production client and reflector against the test API
server, the real Netmaster on a MemoryStore (always the leader). A pod's label change moves its
endpoint between groups and replaces its labels; what cannot be applied is reported (log line,
counter, Event) and changes nothing. The datapath side (traffic, ports) is in test_pod_labels_datapath.py."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from contivd.k8s import KubeHealth, KubernetesWatch
from contivd.netmaster.service import Netmaster
from contivd.state import EndpointState, keys
from raftstore import MemoryStore
from tests.support.endpoint_controller import sync_slices
from tests.support.k8s_apiserver import KubeApiServer, pod

CIDR = ipaddress.IPv4Network("198.19.112.0/20")
TIMEOUT = 45  # generous: the machine is shared and loaded
GROUP = "io.contiv.net-group"

pytestmark = pytest.mark.k8s


@pytest.fixture
def api() -> Any:
    with KubeApiServer(bookmark_seconds=0.2).start() as server:
        yield server


async def until(predicate: Callable[[], object], what: str) -> None:
    with trio.fail_after(TIMEOUT):
        while not predicate():
            await trio.sleep(0.02)


class Cluster:
    def __init__(self, store: MemoryStore, netmaster: Netmaster, health: KubeHealth):
        self.store, self.netmaster, self.health = store, netmaster, health

    def endpoint(self, name: str = "c1-eth0") -> EndpointState:
        found = self.store.get_nowait(keys.ep_state(keys.ep_id("default", "pods", name)))
        assert found is not None
        return EndpointState.from_json(found.value)

    def epg_count(self, group: str) -> int:
        found = self.store.get_nowait(keys.epg_state("default", group))
        assert found is not None
        return int(found.value["epCount"])

    async def add_pod_endpoint(self, name: str, pod_key: str, group: str, labels: dict[str, str]) -> None:
        """What the CNI server's ADD does on the control plane: create (naming the pod), then label."""
        request = {"TenantName": "default", "NetworkName": "pods", "ServiceName": group, "EndpointID": name, "K8sPod": pod_key}
        await self.netmaster.create_endpoint({**request, "ConfigEP": {"Container": name.partition("-")[0], "Host": "node1"}})
        labelled = {"Tenant": "default", "Network": "pods", "EndpointID": name, "Event": "start", "Labels": labels}
        await self.netmaster.update_endpoint(labelled)


@pytest.fixture
async def cluster() -> Cluster:
    store = MemoryStore()
    netmaster = Netmaster(store, "node1")
    await netmaster.ensure_defaults()
    subnet = {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": "198.18.50.0/24", "gateway": "198.18.50.254"}
    await netmaster.put_object("networks", "default:pods", subnet)
    await netmaster.put_object("networks", "default:other", {**subnet, "networkName": "other", "subnet": "198.18.51.0/24", "gateway": ""})
    for name in ("web", "db"):
        await netmaster.put_object("endpointGroups", f"default:{name}", {"tenantName": "default", "groupName": name, "networkName": "pods"})
    return Cluster(store, netmaster, KubeHealth())


@pytest.fixture
async def watching(cluster: Cluster, api: KubeApiServer, tmp_path: Path) -> AsyncIterator[Cluster]:
    watch = KubernetesWatch(cluster.store, api.kubeconfig(tmp_path / "kubeconfig"), CIDR, cluster.health, cluster.netmaster)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        yield cluster
        nursery.cancel_scope.cancel()


async def test_a_group_label_change_moves_the_endpoint_and_replaces_its_labels(watching: Cluster, api: KubeApiServer) -> None:
    api.apply(pod("shop", "web-0", {GROUP: "web", "app": "shop"}))
    await watching.add_pod_endpoint("c1-eth0", "shop/web-0", "web", {GROUP: "web", "app": "shop"})
    before = watching.endpoint()
    assert before.k8s_pod == "shop/web-0" and before.service_name == "web"

    api.apply(pod("shop", "web-0", {GROUP: "db", "tier": "back"}))
    await until(lambda: watching.endpoint().service_name == "db", "the endpoint in group db")
    after = watching.endpoint()
    assert dict(after.labels or ()) == {GROUP: "db", "tier": "back"}, "replaced, not merged"
    assert (after.ip_address, after.mac_address, after.id) == (before.ip_address, before.mac_address, before.id)
    assert after.endpoint_group_id != before.endpoint_group_id and after.endpoint_group_key == "db:default"
    assert (watching.epg_count("web"), watching.epg_count("db")) == (0, 1)
    assert watching.health.label_counts() == (1, {})

    api.apply(pod("shop", "web-0", {"tier": "back"}))  # no group label: no group
    await until(lambda: watching.endpoint().service_name == "", "the endpoint out of every group")
    assert watching.endpoint().endpoint_group_id == 0 and watching.epg_count("db") == 0


async def test_pods_are_listed_and_watched_once_for_both_the_labels_and_networkpolicy(watching: Cluster, api: KubeApiServer) -> None:
    """The label follower and the NetworkPolicy compiler share the leader's one Pod watch."""
    api.apply(pod("shop", "web-0", {GROUP: "web"}))
    await watching.add_pod_endpoint("c1-eth0", "shop/web-0", "web", {GROUP: "web"})
    api.apply(pod("shop", "web-0", {GROUP: "db"}))
    await until(lambda: watching.endpoint().service_name == "db", "the endpoint in group db")

    def pod_requests(watch: bool) -> list[str]:
        with api.changed:
            paths = [path for method, path in api.requests if method == "GET" and path.startswith("/api/v1/pods")]
        return [path for path in paths if ("watch=" in path) == watch]

    await until(lambda: pod_requests(watch=True), "the pod watch open")
    assert len(pod_requests(watch=False)) == 1, pod_requests(watch=False)
    assert len(pod_requests(watch=True)) == 1, pod_requests(watch=True)


async def test_an_unknown_group_or_another_network_is_reported_and_changes_nothing(
    watching: Cluster, api: KubeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "contivd.k8s")
    api.apply(pod("shop", "web-0", {GROUP: "web"}))
    await watching.add_pod_endpoint("c1-eth0", "shop/web-0", "web", {GROUP: "web"})
    before = watching.endpoint()

    api.apply(pod("shop", "web-0", {GROUP: "nosuch", "app": "x"}))
    await until(lambda: watching.health.label_counts()[1] == {("shop/web-0", "unknown-group"): 1}, "the unknown group counted")
    await until(lambda: [e["reason"] for e in api.posted_events] == ["ContivdLabelChangeNotApplied"], "the Event on the pod")
    event = api.posted_events[0]
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"], event["type"]) == ("Pod", "web-0", "Warning")
    assert "endpointGroup default:nosuch not found" in event["message"]
    assert "label change of pod shop/web-0 not applied (unknown-group)" in caplog.text
    assert watching.endpoint() == before and watching.epg_count("web") == 1

    api.apply(pod("shop", "web-0", {GROUP: "web", "io.contiv.network": "other"}))
    await until(lambda: ("shop/web-0", "network-change") in watching.health.label_counts()[1], "the network change counted")
    assert "needs a new interface" in caplog.text
    assert watching.endpoint() == before

    api.apply(pod("shop", "web-0", {GROUP: "db"}))  # a change it can apply still works afterwards
    await until(lambda: watching.endpoint().service_name == "db", "the endpoint in group db")
    assert watching.health.label_counts()[0] == 1


async def test_a_new_leader_converges_on_labels_changed_while_nobody_watched(cluster: Cluster, api: KubeApiServer, tmp_path: Path) -> None:
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    api.apply(pod("shop", "web-0", {GROUP: "web"}))
    api.apply(pod("shop", "web-1", {GROUP: "web"}))
    await cluster.add_pod_endpoint("c1-eth0", "shop/web-0", "web", {GROUP: "web"})
    await cluster.add_pod_endpoint("c2-eth0", "shop/web-1", "web", {GROUP: "web"})
    async with trio.open_nursery() as nursery:  # the first leader's term
        nursery.start_soon(KubernetesWatch(cluster.store, kubeconfig, CIDR, KubeHealth(), cluster.netmaster).run)
        api.apply(pod("shop", "web-0", {GROUP: "db"}))
        await until(lambda: cluster.endpoint().service_name == "db", "the first move")
        nursery.cancel_scope.cancel()
    # no leader: both pods change, and the history is compacted (the new leader must relist)
    api.apply(pod("shop", "web-0", {GROUP: "web", "app": "a"}))
    api.apply(pod("shop", "web-1", {GROUP: "db"}))
    api.compact()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KubernetesWatch(cluster.store, kubeconfig, CIDR, KubeHealth(), cluster.netmaster).run)
        await until(lambda: (cluster.endpoint().service_name, cluster.endpoint("c2-eth0").service_name) == ("web", "db"), "the new leader's moves")
        nursery.cancel_scope.cancel()
    assert dict(cluster.endpoint().labels or ()) == {GROUP: "web", "app": "a"}
    assert (cluster.epg_count("web"), cluster.epg_count("db")) == (1, 1)


def stored_backends(store: MemoryStore, service: str) -> list[str]:
    found = store.get_nowait(keys.k8s_service("shop", service))
    return [] if found is None else sorted(b["ip"] for port in found.value["ports"] for b in port["backends"])


def contiv_providers(store: MemoryStore, service: str) -> list[str]:
    found = store.get_nowait(f"{keys.PROVIDER_PREFIX}{service}:default")
    return [] if found is None else sorted(found.value["Providers"])


async def test_services_of_both_kinds_follow_a_selector_label_change(watching: Cluster, api: KubeApiServer) -> None:
    """Kubernetes Services follow through their EndpointSlices (the API server's controller
    rewrites them; contivd follows slices), Contiv's serviceLBs through the endpoint's labels."""
    await watching.netmaster.put_object(
        "serviceLBs",
        "default:web",
        {"tenantName": "default", "serviceName": "web", "networkName": "pods", "selectors": ["app=web"], "ports": ["80:8080:TCP"]},
    )
    web = {"kind": "Service", "metadata": {"namespace": "shop", "name": "web"}, "spec": {"clusterIP": "198.19.112.10", "selector": {"app": "web"}}}
    web["spec"]["ports"] = [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    api.apply(web)
    await watching.add_pod_endpoint("c1-eth0", "shop/web-0", "", {"app": "web"})
    address = watching.endpoint().ip_address
    api.apply({**pod("shop", "web-0", {"app": "web"}), "status": {"podIP": address}})
    sync_slices(api)
    await until(lambda: stored_backends(watching.store, "web") == [address], "the pod behind the Kubernetes Service")
    assert contiv_providers(watching.store, "web") == [address]

    api.apply({**pod("shop", "web-0", {"app": "db"}), "status": {"podIP": address}})
    sync_slices(api)  # what the API server's EndpointSlice controller does on the label change
    await until(lambda: stored_backends(watching.store, "web") == [], "the pod out of the Kubernetes Service")
    await until(lambda: contiv_providers(watching.store, "web") == [], "the endpoint out of the Contiv service")
    assert dict(watching.endpoint().labels or ()) == {"app": "db"}

"""Kubernetes Services beside Contiv's service LBs: the rows the API, ctl and status page show."""

from __future__ import annotations

from contivd.ctl import views
from contivd.k8s.listing import kubernetes_services, service_rows
from contivd.state import KubeBackend, KubeServicePort, KubeServiceState, StateSnapshot, keys
from raftstore import KeyValue

WEB = KubeServiceState(
    namespace="shop",
    name="web",
    cluster_ip="198.19.112.10",
    ports=(
        KubeServicePort("http", "TCP", 80, 30080, (KubeBackend("198.18.0.5", 8080), KubeBackend("198.18.0.6", 8080))),
        KubeServicePort("admin", "TCP", 81, 0, (KubeBackend("198.18.0.5", 9090),)),
    ),
    affinity_timeout=0,
    resource_version="12",
)
LB = {"id": "lb:default", "servicename": "lb", "tenantname": "default", "subnet": "pods", "ports": ["80:8080:TCP"], "ipaddress": "198.18.5.1"}


def snapshot() -> StateSnapshot:
    snap = StateSnapshot()
    entries = {keys.k8s_service("shop", "web"): WEB.to_json(), f"{keys.SERVICE_LB_PREFIX}lb:default": LB}
    snap.reset([KeyValue(key, value, 1, 1, 1) for key, value in entries.items()], 1)
    return snap


def test_the_api_lists_records_with_their_kind() -> None:
    (listed,) = kubernetes_services(snapshot())
    assert listed["kind"] == "kubernetes" and KubeServiceState.from_json(listed) == WEB


def test_rows_mark_each_kind() -> None:
    assert service_rows(snapshot()) == [
        {"kind": "contiv", "name": "default/lb", "address": "198.18.5.1", "ports": ["80:8080:TCP"], "backends": 0},
        {"kind": "kubernetes", "name": "shop/web", "address": "198.19.112.10", "ports": ["http 80/TCP (node :30080)", "admin 81/TCP"], "backends": 2},
    ]


def test_ctl_cells() -> None:
    ports = WEB.to_json()["ports"]
    assert views.kube_ports(ports) == "http:80/TCP->30080, admin:81/TCP"
    assert views.kube_backends(ports) == "198.18.0.5:8080 198.18.0.5:9090 198.18.0.6:8080"
    assert views.kube_backends([]) == "none"

"""Service + EndpointSlices → KubeServiceState, or why not: every rule of contivd/k8s/resolve.py."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from contivd.k8s.resolve import Skipped, owning_service, resolve_service
from contivd.k8s.view import ENDPOINT_SLICES, SERVICES, ClusterView
from contivd.state import KubeBackend, KubeServicePort, KubeServiceState

CIDR = ipaddress.IPv4Network("198.19.112.0/20")


def service(name: str = "web", cluster_ip: str = "198.19.112.10", ports: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    ports = ports if ports is not None else [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web"}]
    return {
        "kind": "Service",
        "metadata": {"name": name, "namespace": "shop", "resourceVersion": "7"},
        "spec": {"clusterIP": cluster_ip, "ports": ports, **spec},
    }


def endpoint_slice(
    name: str, endpoints: list[dict[str, Any]], ports: list[dict[str, Any]], owner: str = "web", address_type: str = "IPv4"
) -> dict[str, Any]:
    return {
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "shop", "labels": {"kubernetes.io/service-name": owner}},
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": ports,
    }


def ready(*addresses: str, is_ready: bool | None = True) -> dict[str, Any]:
    conditions = {} if is_ready is None else {"ready": is_ready}
    return {"addresses": list(addresses), "conditions": conditions}


def record(resolution: object) -> KubeServiceState:
    assert isinstance(resolution, KubeServiceState), resolution
    return resolution


def test_a_cluster_ip_service_with_one_port_and_ready_backends() -> None:
    slices = [endpoint_slice("web-a", [ready("198.18.0.5"), ready("198.18.0.6")], [{"name": "http", "port": 8080, "protocol": "TCP"}])]
    assert resolve_service(service(), slices, CIDR) == KubeServiceState(
        namespace="shop",
        name="web",
        cluster_ip="198.19.112.10",
        ports=(KubeServicePort("http", "TCP", 80, 0, (KubeBackend("198.18.0.5", 8080), KubeBackend("198.18.0.6", 8080))),),
        affinity_timeout=0,
        resource_version="7",
    )


def test_named_target_ports_resolve_per_slice() -> None:
    """Two slices of one Service whose pods name the same port differently: each backend keeps its own."""
    slices = [
        endpoint_slice("web-a", [ready("198.18.0.5")], [{"name": "http", "port": 8080, "protocol": "TCP"}]),
        endpoint_slice("web-b", [ready("198.18.0.7")], [{"name": "http", "port": 9090, "protocol": "TCP"}]),
    ]
    (port,) = record(resolve_service(service(), slices, CIDR)).ports
    assert port.backends == (KubeBackend("198.18.0.5", 8080), KubeBackend("198.18.0.7", 9090))


def test_several_ports_tcp_and_udp_each_with_its_slice_port() -> None:
    ports = [
        {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
        {"name": "metrics", "port": 9153, "protocol": "TCP"},
    ]
    slice_ports = [{"name": "dns", "port": 5353, "protocol": "UDP"}, {"name": "dns-tcp", "port": 5353, "protocol": "TCP"}]
    resolved = record(resolve_service(service(ports=ports), [endpoint_slice("a", [ready("198.18.0.9")], slice_ports)], CIDR))
    assert [(p.name, p.protocol, p.port, p.backends) for p in resolved.ports] == [
        ("dns", "UDP", 53, (KubeBackend("198.18.0.9", 5353),)),
        ("dns-tcp", "TCP", 53, (KubeBackend("198.18.0.9", 5353),)),
        ("metrics", "TCP", 9153, ()),  # no slice port of that name: no backends
    ]


def test_endpoints_that_are_not_ready_are_left_out_and_unset_means_ready() -> None:
    endpoints = [ready("198.18.0.5"), ready("198.18.0.6", is_ready=False), ready("198.18.0.7", is_ready=None)]
    (port,) = record(resolve_service(service(), [endpoint_slice("a", endpoints, [{"name": "http", "port": 80}])], CIDR)).ports
    assert port.backends == (KubeBackend("198.18.0.5", 80), KubeBackend("198.18.0.7", 80))


def test_an_unnamed_single_port_matches_the_unnamed_slice_port() -> None:
    ports = [{"port": 443, "targetPort": 8443}]
    (port,) = record(resolve_service(service(ports=ports), [endpoint_slice("a", [ready("198.18.0.5")], [{"port": 8443}])], CIDR)).ports
    assert (port.name, port.protocol, port.backends) == ("", "TCP", (KubeBackend("198.18.0.5", 8443),))


def test_ipv6_and_fqdn_slices_are_ignored_and_duplicates_merge() -> None:
    slices = [
        endpoint_slice("v6", [ready("fd00::5")], [{"name": "http", "port": 80}], address_type="IPv6"),
        endpoint_slice("a", [ready("198.18.0.5")], [{"name": "http", "port": 80}]),
        endpoint_slice("b", [ready("198.18.0.5")], [{"name": "http", "port": 80}]),
    ]
    (port,) = record(resolve_service(service(), slices, CIDR)).ports
    assert port.backends == (KubeBackend("198.18.0.5", 80),)


def test_session_affinity_client_ip_with_and_without_a_timeout() -> None:
    assert record(resolve_service(service(sessionAffinity="ClientIP"), [], CIDR)).affinity_timeout == 10800
    configured = service(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})
    assert record(resolve_service(configured, [], CIDR)).affinity_timeout == 60
    assert record(resolve_service(service(sessionAffinity="None"), [], CIDR)).affinity_timeout == 0


def test_node_port_and_load_balancer_keep_their_node_ports() -> None:
    ports = [{"name": "http", "port": 80, "nodePort": 30080}]
    assert record(resolve_service(service(ports=ports, type="NodePort"), [], CIDR)).ports[0].node_port == 30080
    assert record(resolve_service(service(ports=ports, type="LoadBalancer", externalTrafficPolicy="Cluster"), [], CIDR)).ports[0].node_port == 30080


def test_external_ips_and_load_balancer_ingress_ips_are_kept_ipv4_only() -> None:
    svc = service(type="LoadBalancer", externalIPs=["198.19.200.2", "2001:db8::1", "198.19.200.1"])
    svc["status"] = {"loadBalancer": {"ingress": [{"ip": "198.19.201.1"}, {"hostname": "lb.example"}, {"ip": "198.19.200.1"}]}}
    resolved = record(resolve_service(svc, [], CIDR))
    assert resolved.external_ips == ("198.19.200.1", "198.19.200.2", "198.19.201.1")
    assert KubeServiceState.from_json(resolved.to_json()) == resolved
    plain = record(resolve_service(service(), [], CIDR))
    assert plain.external_ips == () and "externalIPs" not in plain.to_json(), "a record without them keeps its shape"


def test_external_traffic_policy_local_and_its_health_check_port_are_kept() -> None:
    ports = [{"name": "http", "port": 80, "nodePort": 30080}]
    local = record(resolve_service(service(ports=ports, type="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=32000), [], CIDR))
    assert (local.local_traffic, local.health_check_node_port) == (True, 32000)
    assert KubeServiceState.from_json(local.to_json()) == local
    cluster = record(resolve_service(service(ports=ports, type="NodePort", externalTrafficPolicy="Cluster"), [], CIDR))
    assert (cluster.local_traffic, cluster.health_check_node_port) == (False, 0)
    assert not {"externalTrafficPolicyLocal", "healthCheckNodePort"} & cluster.to_json().keys()


@pytest.mark.parametrize("spec", [{"clusterIP": "None"}, {"clusterIP": ""}, {"type": "ExternalName", "externalName": "db.example"}])
def test_headless_and_external_name_services_have_no_record_and_no_complaint(spec: dict[str, Any]) -> None:
    svc = service()
    svc["spec"].update(spec)
    if spec.get("type") == "ExternalName":
        del svc["spec"]["clusterIP"]
    assert resolve_service(svc, [endpoint_slice("a", [ready("198.18.0.5")], [{"name": "http", "port": 80}])], CIDR) is None


@pytest.mark.parametrize(
    ("svc", "reason"),
    [
        (service(ports=[{"name": "http", "port": 80}, {"name": "sig", "port": 3868, "protocol": "SCTP"}]), "sctp"),
        (service(cluster_ip="198.19.224.10"), "cluster-ip-outside-service-cidr"),
        (service(cluster_ip="fd00::10"), "cluster-ip-outside-service-cidr"),
        (service(cluster_ip="ten"), "invalid-cluster-ip"),
        (service(ports=[{"name": "http"}]), "malformed"),
        (service(ports=[{"name": "http", "port": "eighty"}]), "malformed"),
    ],
)
def test_services_contivd_cannot_program_are_skipped_with_a_reason(svc: dict[str, Any], reason: str) -> None:
    skipped = resolve_service(svc, [], CIDR)
    assert isinstance(skipped, Skipped) and skipped.reason == reason and skipped.message


def test_a_service_without_a_selector_uses_its_manual_slices() -> None:
    manual = endpoint_slice("web-manual", [ready("198.18.1.20")], [{"name": "http", "port": 8080}])
    manual["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] = "staff"
    (port,) = record(resolve_service(service(), [manual], CIDR)).ports  # no "selector" in the spec
    assert port.backends == (KubeBackend("198.18.1.20", 8080),)


def test_owning_service_reads_the_label() -> None:
    assert owning_service(endpoint_slice("a", [], [], owner="web")) == "shop/web"
    assert owning_service({"metadata": {"name": "orphan", "namespace": "shop"}}) is None


def test_the_view_tracks_slices_per_service_and_says_what_an_event_touched() -> None:
    view = ClusterView(CIDR)
    assert view.replace(SERVICES, [service("web"), service("db", cluster_ip="198.19.112.11")]) == {"shop/web", "shop/db"}
    slice_a = endpoint_slice("a", [ready("198.18.0.5")], [{"name": "http", "port": 80}])
    assert view.apply(ENDPOINT_SLICES, "ADDED", slice_a) == {"shop/web"}
    assert record(view.resolve("shop/web")).ports[0].backends == (KubeBackend("198.18.0.5", 80),)
    moved = endpoint_slice("a", [ready("198.18.0.5")], [{"name": "http", "port": 80}], owner="db")
    assert view.apply(ENDPOINT_SLICES, "MODIFIED", moved) == {"shop/web", "shop/db"}
    assert record(view.resolve("shop/web")).ports[0].backends == ()
    assert record(view.resolve("shop/db")).ports[0].backends == (KubeBackend("198.18.0.5", 80),)
    assert view.apply(SERVICES, "DELETED", service("db")) == {"shop/db"}
    assert view.resolve("shop/db") is None
    assert view.replace(ENDPOINT_SLICES, []) == {"shop/db"}
    assert view.slices == {}

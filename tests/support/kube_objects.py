"""Kubernetes API objects for tests, as an API server would hold them."""

from __future__ import annotations

from typing import Any


def service(
    namespace: str, name: str, cluster_ip: str, port: int = 80, protocol: str = "TCP", port_name: str = "http", **spec: Any
) -> dict[str, Any]:
    return {
        "kind": "Service",
        "apiVersion": "v1",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"clusterIP": cluster_ip, "ports": [{"name": port_name, "port": port, "protocol": protocol, "targetPort": port_name}], **spec},
    }


def endpoint_slice(
    namespace: str, name: str, service_name: str, ready: list[str], port: int, not_ready: tuple[str, ...] | list[str] = (), port_name: str = "http"
) -> dict[str, Any]:
    endpoints = [{"addresses": [a], "conditions": {"ready": True}} for a in ready]
    endpoints += [{"addresses": [a], "conditions": {"ready": False}} for a in not_ready]
    return {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"namespace": namespace, "name": name, "labels": {"kubernetes.io/service-name": service_name}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
    }

"""The health-check nodePort's answers (kube-proxy's shape) from the records and this node's pods."""

from __future__ import annotations

import dataclasses
import json

from contivd.agent.healthcheck import HealthCheck, answer, health_checks
from contivd.state import KubeBackend, KubeServicePort, KubeServiceState


def service(name: str, port: int, *ips: str, local: bool = True) -> KubeServiceState:
    backends = tuple(KubeBackend(ip, 8080) for ip in ips)
    ports = (KubeServicePort("http", "TCP", 80, 30080, backends), KubeServicePort("dns", "UDP", 53, 30053, backends))
    return dataclasses.replace(KubeServiceState("shop", name, "198.19.96.10", ports, 0, "1"), local_traffic=local, health_check_node_port=port)


def test_local_services_count_this_nodes_distinct_backends_per_port() -> None:
    services = [
        service("web", 32000, "198.19.10.1", "198.19.10.2", "198.19.20.1"),
        service("cold", 32001, "198.19.20.2"),
        service("cluster", 0, "198.19.10.1", local=False),
    ]
    checks = health_checks(services, {"198.19.10.1", "198.19.10.2"})
    assert checks == {32000: HealthCheck("shop", "web", 2), 32001: HealthCheck("shop", "cold", 0)}


def test_200_with_local_endpoints_503_without_in_kube_proxys_shape() -> None:
    status, body = answer(HealthCheck("shop", "web", 2))
    assert status == 200 and json.loads(body) == {"service": {"namespace": "shop", "name": "web"}, "localEndpoints": 2}
    status, body = answer(HealthCheck("shop", "cold", 0))
    assert status == 503 and json.loads(body)["localEndpoints"] == 0
    assert answer(None)[0] == 503

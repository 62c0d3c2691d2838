"""No kube-proxy needed, through a REAL Kubernetes control plane (issue 25 item 5): what
tests/k8s/test_kube_proxy_free.py shows against the project's test API server, here with Services
whose EndpointSlices the real controller manager writes, whose ports (nodePort,
healthCheckNodePort) the real API server allocates, and whose load-balancer status goes through
the real status subresource. Real traffic:

- the node's own network namespace (kubelet, hostNetwork pods) to a ClusterIP, on both nodes;
- a Service's `spec.externalIPs` address (given to node 1) from node 1 and from pods on both nodes;
- a LoadBalancer Service with `externalTrafficPolicy: Local`: the health-check nodePort answers
  200 with the local endpoint count where a backend runs and 503 where none does; its
  `status.loadBalancer.ingress` address is served.

The cluster and its pods are test_real_apiserver's fixture (its own instance for this module):
client (node-1), web-a (node-1) and web-b (node-2) behind shop/web, other (node-2).
"""

from __future__ import annotations

import json
import sys

from tests.k8s.test_kube_proxy_free import HEALTH
from tests.k8s_real.test_real_apiserver import (  # noqa: F401 - fixture_cluster: the module's cluster, pytestmark: markers and skips
    BOTH,
    HTTP,
    SYNC,
    WEB_VIP,
    answers,
    fixture_cluster,
    pod,
    pytestmark,
)
from tests.support.kube_real import RealCluster, apply_service, delete_service
from tests.support.nodes import Node, sh, wait_until

EXTERNAL_IP, INGRESS_IP = "198.19.200.1", "198.19.201.1"  # addresses node 1 is given (the network's job)
EXTERNAL_VIP, LOCAL_VIP = "198.19.96.20", "198.19.96.21"


def give_address(node: Node, address: str) -> None:
    sh("ip", "netns", "exec", node.ns, "ip", "address", "replace", f"{address}/32", "dev", "lo")


def health(node: Node, host: str, port: int) -> tuple[int, object]:
    """GET http://host:port/ from `node`'s namespace: the status and the JSON body (0 when nothing answers)."""
    out = sh("ip", "netns", "exec", node.ns, sys.executable, "-c", HEALTH, f"http://{host}:{port}/", check=False)
    return tuple(json.loads(out.stdout)) if out.returncode == 0 else (0, out.stderr[-200:])  # type: ignore[return-value]


def test_the_nodes_own_namespace_reaches_a_cluster_ip_on_both_nodes(cluster: RealCluster) -> None:
    for node in cluster.nodes:
        wait_until(lambda n=node: answers(n.ns, WEB_VIP, 80) == BOTH, SYNC, f"{node.name} itself to reach both backends through the ClusterIP", node)


def test_an_external_ip_is_served_to_the_node_and_to_pods_on_both_nodes(cluster: RealCluster) -> None:
    first = cluster.nodes[0]
    for node in cluster.nodes:  # as on every Kubernetes node: a pod's packet DNATed by its node is forwarded back into the bridge
        sh("ip", "netns", "exec", node.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    give_address(first, EXTERNAL_IP)
    apply_service(
        cluster.plane, "shop", "web-ext", {"selector": {"app": "web"}, "clusterIP": EXTERNAL_VIP, "ports": HTTP, "externalIPs": [EXTERNAL_IP]}
    )
    wait_until(lambda: answers(first.ns, EXTERNAL_IP, 80) == BOTH, SYNC, "the external IP from node 1 itself", first)
    for name in ("client", "other"):  # node 1's pod, node 2's
        from_pod = pod(cluster, name)
        wait_until(lambda p=from_pod: answers(p.netns.name, EXTERNAL_IP, 80) == BOTH, SYNC, f"the external IP from {name}", from_pod.node)
    delete_service(cluster.plane, "shop", "web-ext")
    wait_until(lambda: answers(first.ns, EXTERNAL_IP, 80, 3) == set(), SYNC, "the deleted Service's external IP to stop serving", first)


def test_a_local_load_balancer_reports_local_endpoints_on_its_health_check_node_port_and_serves_its_ingress(cluster: RealCluster) -> None:
    plane, (first, second) = cluster.plane, cluster.nodes
    other = {"app": "other"}  # one backend: `other`, on node 2
    spec = {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "selector": other, "clusterIP": LOCAL_VIP}
    stored = apply_service(plane, "shop", "only-other", spec | {"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]})
    check_port = int(stored["spec"]["healthCheckNodePort"])  # allocated by the API server
    assert 30000 <= check_port <= 32767, stored["spec"]
    service = {"service": {"namespace": "shop", "name": "only-other"}}
    wait_until(
        lambda: health(first, second.host, check_port) == (200, {**service, "localEndpoints": 1}), SYNC, "node 2's health check: its backend", second
    )
    wait_until(lambda: health(first, first.host, check_port) == (503, {**service, "localEndpoints": 0}), SYNC, "node 1's health check: none", first)

    give_address(first, INGRESS_IP)
    plane.core.patch_namespaced_service_status("only-other", "shop", {"status": {"loadBalancer": {"ingress": [{"ip": INGRESS_IP}]}}})
    assert plane.core.read_namespaced_service("only-other", "shop").status.load_balancer.ingress[0].ip == INGRESS_IP
    wait_until(lambda: answers(first.ns, INGRESS_IP, 80) == {"other"}, SYNC, "the ingress IP from node 1 itself", first)
    client = pod(cluster, "client")
    wait_until(lambda: answers(client.netns.name, INGRESS_IP, 80) == {"other"}, SYNC, "the ingress IP from node 1's pod", first)
    delete_service(plane, "shop", "only-other")
    wait_until(lambda: health(first, second.host, check_port)[0] == 0, SYNC, "the health check's listener to close", second)

"""What kube-proxy did for a node, done by contivd, end to end through the test API server (the
cluster of test_nodeport: backends `near` and `other` on node 1, `far` on node 2, an outside host
routed to node 1):

- the node's own connections (its processes, hostNetwork pods) to a ClusterIP without any
  nodePort reach every backend, also from a socket bound to one of the node's addresses;
- `externalIPs` and `status.loadBalancer.ingress` IPs are served from outside, from the node
  and from a pod on the other node;
- `externalTrafficPolicy: Local`: outside clients reach only the receiving node's backends with
  their own address, none where the node has no ready backend; the node itself still reaches
  every backend; the healthCheckNodePort answers 200/503 with kube-proxy's body on each node.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.k8s import test_service_datapath
from tests.k8s.test_nodeport import CLUSTER_IP, GATEWAY, NODE_PORT, OUTSIDE_CLIENT, answers, in_node, node_port_service, service_cluster
from tests.k8s.test_service_datapath import create_endpoint, endpoint_slice
from tests.support.nodes import attach_pod, sh, wait_until
from tests.support.service_pods import fetch

pytestmark = test_service_datapath.pytestmark  # the same markers and conditions (root, Open vSwitch)

EVERY = {"near", "other", "far"}
EXTERNAL_IP, INGRESS_IP = "198.19.200.1", "198.19.201.1"
HEALTH_PORT = 32000
HEALTH = (  # GET / on argv[1]: the status and the JSON body
    "import httpx,json,sys; r=httpx.get(sys.argv[1], timeout=5); print(json.dumps([r.status_code, r.json()]))"
)
FETCH_BOUND = (  # N connections from a socket bound to argv[1]: who answered each, '-' for nobody
    "import socket,sys\n"
    "for _ in range(int(sys.argv[4])):\n"
    "    try:\n"
    "        s = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=1, source_address=(sys.argv[1], 0))\n"
    "        print(s.recv(64).decode() or '-', flush=True); s.close()\n"
    "    except OSError:\n"
    "        print('-', flush=True)\n"
)


def test_the_node_itself_reaches_a_cluster_ip_without_kube_proxy(tmp_path: Path) -> None:
    with service_cluster(tmp_path) as cluster:
        node = cluster.node
        cluster.kube.apply(node_port_service())  # a ClusterIP Service: no nodePort
        wait_until(lambda: answers(node.ns, CLUSTER_IP, 80) == EVERY, 90, "ClusterIP:80 from the node to reach every backend", node)
        udp = wait_until(lambda: set(fetch(node.ns, CLUSTER_IP, 53, 5, "udp")) - {"-"}, 30, "UDP to the ClusterIP from the node", node)
        assert udp <= EVERY, udp
        bound = sh("ip", "netns", "exec", node.ns, sys.executable, "-c", FETCH_BOUND, node.host, CLUSTER_IP, "80", "20").stdout.split()
        assert set(bound) == EVERY, f"a socket bound to the node's own address: {bound}"
        route = in_node(node, "ip", "route", "show", CLUSTER_IP)
        assert "dev cvhost-vxlan" in route and "realm 197" in route, route

        cluster.kube.delete("Service", "shop", "web")
        wait_until(lambda: CLUSTER_IP not in in_node(node, "ip", "route", "show"), 30, "the ClusterIP's route to go", node)
        assert answers(node.ns, CLUSTER_IP, 80) == set()


def test_external_and_load_balancer_ips_reach_the_backends_from_outside_the_node_and_pods(tmp_path: Path) -> None:
    with service_cluster(tmp_path) as cluster:
        node, second, outside = cluster.node, cluster.second, cluster.outside
        status = {"loadBalancer": {"ingress": [{"ip": INGRESS_IP}]}}
        cluster.kube.apply(node_port_service(externalIPs=[EXTERNAL_IP], status=status))
        client = create_endpoint(second, "client")
        attach_pod(second, 1, client)
        pod = second.pods[1]
        sh("ip", "netns", "exec", pod, "ip", "route", "add", "default", "via", GATEWAY)
        in_node(node, "ip", "route", "add", "198.19.200.0/23", "via", OUTSIDE_CLIENT)  # the external addresses lie beyond the node

        for address in (EXTERNAL_IP, INGRESS_IP):
            wait_until(lambda: answers(outside, address, 80) == EVERY, 90, f"{address}:80 from outside to reach every backend", node)  # noqa: B023
            assert answers(node.ns, address, 80) == EVERY, f"{address} from the node"
            wait_until(lambda: answers(pod, address, 80) == EVERY, 30, f"{address}:80 from a pod on node 2", second)  # noqa: B023
        udp = set(fetch(outside, EXTERNAL_IP, 53, 5, "udp")) - {"-"}
        assert udp and udp <= EVERY, udp
        chain = [line for line in in_node(node, "iptables", "-t", "nat", "-S", "CONTIVD-EXTERNALIPS").splitlines() if line.startswith("-A")]
        assert (
            len(chain) == 4
            and (
                f'-A CONTIVD-EXTERNALIPS -d {EXTERNAL_IP}/32 -p tcp -m comment --comment "shop/web:http" -m tcp --dport 80 -j DNAT --to-destination {CLUSTER_IP}:80'
            )
            in chain
        ), chain

        cluster.kube.apply(node_port_service())
        wait_until(lambda: answers(outside, EXTERNAL_IP, 80) == set(), 30, "the external address to stop serving", node)
        assert "CONTIVD-EXTERNALIPS -d" not in in_node(node, "iptables", "-t", "nat", "-S", "CONTIVD-EXTERNALIPS")


def health(namespace: str, host: str) -> tuple[int, object]:
    out = sh("ip", "netns", "exec", namespace, sys.executable, "-c", HEALTH, f"http://{host}:{HEALTH_PORT}/", check=False)
    return tuple(json.loads(out.stdout)) if out.returncode == 0 else (0, out.stderr[-200:])  # type: ignore[return-value]


def peers(namespace: str) -> str:
    return sh("ip", "netns", "exec", namespace, "ss", "-Htn", "state", "established").stdout


def test_external_traffic_policy_local_keeps_clients_on_the_nodes_backends_with_their_address(tmp_path: Path) -> None:
    with service_cluster(tmp_path) as cluster:
        node, second, outside = cluster.node, cluster.second, cluster.outside
        status = {"loadBalancer": {"ingress": [{"ip": INGRESS_IP}]}}
        local = {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": HEALTH_PORT}
        cluster.kube.apply(node_port_service(NODE_PORT, status=status, **local))
        web = {"service": {"namespace": "shop", "name": "web"}}

        wait_until(lambda: answers(outside, node.host, NODE_PORT) == {"near", "other"}, 90, "outside clients to reach node 1's backends", node)
        assert answers(outside, INGRESS_IP, 80) == {"near", "other"}, "the load balancer's address, on node 1: node 1's backends only"
        held = cluster.running.hold(outside, node.host, NODE_PORT, "near")
        assert OUTSIDE_CLIENT in peers(node.pods[0]), "the backend sees the client's own address"
        assert held.ask() == "near"
        assert answers(node.ns, node.host, NODE_PORT) == EVERY, "the node itself still reaches every backend"
        assert wait_until(lambda: health(node.ns, node.host) == (200, {**web, "localEndpoints": 2}), 30, "node 1's health check", node)

        # node 2 (reached from node 1, an outside client for it) has one backend, then none
        wait_until(lambda: answers(node.ns, second.host, NODE_PORT) == {"far"}, 30, "node 2 to serve its own backend only", second)
        assert health(node.ns, second.host) == (200, {**web, "localEndpoints": 1})
        cluster.kube.apply(endpoint_slice("far", cluster.addresses["far"], 8082, ready=False))
        wait_until(lambda: health(node.ns, second.host) == (503, {**web, "localEndpoints": 0}), 30, "node 2's health check to fail", second)
        assert answers(node.ns, second.host, NODE_PORT) == set(), "no local backend: refused, not sent to node 1's"
        assert answers(outside, node.host, NODE_PORT) == {"near", "other"}

        cluster.kube.delete("Service", "shop", "web")
        wait_until(lambda: health(node.ns, node.host)[0] == 0, 30, "the health check's listener to close", node)

"""NodePort end to end: a Kubernetes Service with a nodePort, from the test API server through
the leader's watch to node 1's iptables chains and bridge. nodeIP:nodePort reaches the backends
from the node itself and from an outside namespace that routes to the node, on node 1 and on
node 2 (whose answers come back through the tunnel to node 1's VTEP, the NodePort source); a
changed nodePort moves, a deleted Service leaves no rule and no route behind.

As in test_service_datapath, the API server runs in node 1's namespace; the backends are pods on
a network with a gateway (docs/kubernetes.md "NodePort" says why).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.k8s import test_service_datapath
from tests.k8s.test_service_datapath import KubeApi, create_endpoint, dump, endpoint_slice
from tests.support.cni_harness import create_network, set_private_subnet
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text
from tests.support.nodes import Node, attach_pod, cluster_of_nodes, sh, wait_until
from tests.support.processes import terminate
from tests.support.service_pods import Processes, fetch, processes
from tests.support.waiting import free_ports

pytestmark = test_service_datapath.pytestmark  # the same markers and conditions (root, Open vSwitch)

NODE_PORT, MOVED_PORT = 30080, 30090
PVT_SUBNET = "198.18.0.0/16"  # a /16, as Contiv wants; the rest of the test lives in 198.19
SUBNET, GATEWAY = "198.19.10.0/24", "198.19.10.254"
SERVICE_CIDR, CLUSTER_IP = "198.19.96.0/24", "198.19.96.10"
OUTSIDE_NODE, OUTSIDE_CLIENT = "198.19.251.1", "198.19.251.2"


def node_port_service(node_port: int = 0, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """shop/web (the Service of test_service_datapath's slices) with its TCP port on `node_port`
    (0: a ClusterIP Service), more `spec` fields, and a `status`."""
    http = {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"} | ({"nodePort": node_port} if node_port else {})
    ports = [http, {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": "dns"}]
    spec = {"type": "NodePort" if node_port else "ClusterIP", "clusterIP": CLUSTER_IP, "ports": ports} | spec
    service = {"kind": "Service", "apiVersion": "v1", "metadata": {"namespace": "shop", "name": "web"}, "spec": spec}
    return service | ({"status": status} if status else {})


def in_node(node: Node, *command: str) -> str:
    return sh("ip", "netns", "exec", node.ns, *command).stdout


def node_ports_chain(node: Node) -> list[str]:
    return [line for line in in_node(node, "iptables", "-t", "nat", "-S", "CONTIVD-NODEPORTS").splitlines() if line.startswith("-A")]


def add_outside_host(node: Node, outside: str) -> None:
    """An outside host: namespace `outside`, linked to the node and routed through it; the node
    forwards (as a Kubernetes node does)."""
    sh("ip", "netns", "add", outside)
    sh("ip", "-n", node.ns, "link", "add", "cvout", "type", "veth", "peer", "name", "eth0", "netns", outside)
    sh("ip", "-n", node.ns, "addr", "add", f"{OUTSIDE_NODE}/24", "dev", "cvout")
    sh("ip", "-n", node.ns, "link", "set", "cvout", "up")
    sh("ip", "-n", outside, "addr", "add", f"{OUTSIDE_CLIENT}/24", "dev", "eth0")
    sh("ip", "-n", outside, "link", "set", "eth0", "up")
    sh("ip", "-n", outside, "route", "add", "default", "via", OUTSIDE_NODE)
    in_node(node, "sysctl", "-w", "net.ipv4.ip_forward=1")


def answers(namespace: str, address: str, port: int) -> set[str]:
    return set(fetch(namespace, address, port, 20)) - {"-"}


@dataclass
class Cluster:
    """Two nodes in Kubernetes mode, the test API server in node 1's namespace, backends `near`
    and `other` on node 1 and `far` on node 2 (TCP 8080-8082, UDP 5353) in shop/web's slices,
    and `outside`: a host in its own namespace routed to node 1. Both nodes forward, as
    Kubernetes nodes do. Node 2's second pod namespace is free for a client."""

    node: Node
    second: Node
    kube: KubeApi
    running: Processes
    outside: str
    addresses: dict[str, str]  # backend name -> pod address


@contextmanager
def service_cluster(tmp_path: Path) -> Iterator[Cluster]:
    (api_port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{api_port}", TOKEN))
    options = ("--kubeconfig", str(kubeconfig), "--service-cidr", SERVICE_CIDR)
    outside = f"cdt-{uuid.uuid4().hex[:6]}-o"
    with cluster_of_nodes(tmp_path, 2, *options) as nodes, processes() as running:
        node, second = nodes
        try:
            running.start(node.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(api_port), "--host", node.host)
            kube = KubeApi(node, api_port)
            set_private_subnet(node, PVT_SUBNET)
            create_network(node, "pods", SUBNET, GATEWAY)
            addresses = {}
            for host, index, name, port in ((node, 0, "near", 8080), (node, 1, "other", 8081), (second, 0, "far", 8082)):
                endpoint = create_endpoint(host, name)
                attach_pod(host, index, endpoint)
                sh("ip", "netns", "exec", host.pods[index], "ip", "route", "add", "default", "via", GATEWAY)
                running.serve(host.pods[index], name, port, 5353)
                kube.apply(endpoint_slice(name, endpoint["ipAddress"], port))
                addresses[name] = endpoint["ipAddress"]

            add_outside_host(node, outside)
            in_node(second, "sysctl", "-w", "net.ipv4.ip_forward=1")
            yield Cluster(node, second, kube, running, outside, addresses)
        finally:
            sh("ip", "netns", "del", outside, check=False)


def test_node_port_reaches_the_backends_from_the_node_and_from_outside(tmp_path: Path) -> None:
    with service_cluster(tmp_path) as cluster:
        node, kube, outside = cluster.node, cluster.kube, cluster.outside
        kube.apply(node_port_service(NODE_PORT))
        every = {"near", "other", "far"}
        wait_until(lambda: answers(node.ns, node.host, NODE_PORT) == every, 90, "nodeIP:nodePort from the node to reach every backend", node)
        assert answers(node.ns, OUTSIDE_NODE, NODE_PORT) == every, "every address of the node serves the NodePort"
        wait_until(lambda: answers(outside, node.host, NODE_PORT) == every, 30, "nodeIP:nodePort from outside to reach every backend", node)
        rule = f'-A CONTIVD-NODEPORTS -p tcp -m comment --comment "shop/web:http" -m tcp --dport {NODE_PORT} -j DNAT --to-destination {CLUSTER_IP}:80'
        assert node_ports_chain(node) == [rule]
        assert f"{CLUSTER_IP} dev cvhost-vxlan" in in_node(node, "ip", "route", "show")

        kube.apply(node_port_service(MOVED_PORT))
        wait_until(lambda: answers(outside, node.host, MOVED_PORT) == every, 30, "the moved nodePort to serve", node)
        assert answers(outside, node.host, NODE_PORT) == set(), "the old nodePort still serves"
        assert len(node_ports_chain(node)) == 1

        kube.delete("Service", "shop", "web")
        wait_until(lambda: node_ports_chain(node) == [], 30, "the deleted Service's NodePort rule to go", node)
        wait_until(lambda: CLUSTER_IP not in in_node(node, "ip", "route", "show"), 30, "the ClusterIP's route to go", node)
        assert answers(node.ns, node.host, MOVED_PORT) == set()


BARE_SUBNET, BARE_PORT = "198.19.11.0/24", 30081
NODE_ADDRESS = "198.19.250.1"  # a second address of the node, on lo
PRIVATE_ADDRESS = "198.18.255.254"  # the node's private address in PVT_SUBNET


def bare_service() -> dict[str, Any]:
    """shop/bare: a NodePort Service whose one backend is on a network without a gateway."""
    spec = {"type": "NodePort", "clusterIP": "198.19.96.11", "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": BARE_PORT}]}
    return {"kind": "Service", "apiVersion": "v1", "metadata": {"namespace": "shop", "name": "bare"}, "spec": spec}


def bare_slice(address: str) -> dict[str, Any]:
    return {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"namespace": "shop", "name": "bare-1", "labels": {"kubernetes.io/service-name": "bare"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
    }


def agent_problems(node: Node) -> list[str]:
    status, info = node.api_call("GET", "/info")
    return list(info["agent"]["problems"]) if status == 200 and info.get("agent") else []


def test_node_port_on_a_single_node_with_a_loopback_vtep_as_installed_by_default(tmp_path: Path) -> None:
    """The default install: one node, no peers, the API (so the control IP, so the VTEP) on
    127.0.0.1. NodePort connections must not be SNATed to 127.0.0.1 (the kernel drops the
    replies as martians) but to the private address; a Service the node cannot serve is said
    once, in the agent's problems (status page, /info) and the log."""
    (api_port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://127.0.0.1:{api_port}", TOKEN))
    node = Node(tmp_path, "node-1")  # 127.0.0.1, as the packaged contivd.toml: no --control-ip, no --vtep-ip
    outside = f"cdt-{uuid.uuid4().hex[:6]}-o"
    with processes() as running:
        try:
            node.create_namespace()
            node.start("--kubeconfig", str(kubeconfig), "--service-cidr", SERVICE_CIDR)
            running.start(node.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(api_port), "--host", "127.0.0.1")
            wait_until(lambda: node.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 60, "the node's API", node)
            kube = KubeApi(node, api_port)
            set_private_subnet(node, PVT_SUBNET)
            create_network(node, "pods", SUBNET, GATEWAY)
            for index, name, port in ((0, "near", 8080), (1, "other", 8081)):
                endpoint = create_endpoint(node, name)
                attach_pod(node, index, endpoint)
                sh("ip", "netns", "exec", node.pods[index], "ip", "route", "add", "default", "via", GATEWAY)
                running.serve(node.pods[index], name, port, 5353)
                kube.apply(endpoint_slice(name, endpoint["ipAddress"], port))
            kube.apply(node_port_service(NODE_PORT))

            # the node's addresses: one on lo, and one on a link to an outside host that routes to the node
            sh("ip", "-n", node.ns, "addr", "add", f"{NODE_ADDRESS}/32", "dev", "lo")
            add_outside_host(node, outside)

            every = {"near", "other"}
            wait_until(lambda: answers(node.ns, OUTSIDE_NODE, NODE_PORT) == every, 90, "nodeIP:nodePort from the node to reach every backend", node)
            assert answers(node.ns, NODE_ADDRESS, NODE_PORT) == every, "every address of the node serves the NodePort"
            wait_until(lambda: answers(outside, OUTSIDE_NODE, NODE_PORT) == every, 30, "nodeIP:nodePort from outside to reach every backend", node)
            assert answers(outside, NODE_ADDRESS, NODE_PORT) == every
            postrouting = in_node(node, "iptables", "-t", "nat", "-S", "CONTIVD-POSTROUTING")
            assert f"-A CONTIVD-POSTROUTING -o cvhost-+ -m conntrack --ctstate DNAT -j SNAT --to-source {PRIVATE_ADDRESS}" in postrouting
            assert "127.0.0.1" not in postrouting and "cvhost-vxlan" not in postrouting, postrouting
            assert "only backends on this node answer NodePort connections: this node's VTEP 127.0.0.1 is not reachable" in (
                node.data / "contivd.log"
            ).read_text(errors="replace")
            assert agent_problems(node) == []

            # a backend on a network without a gateway cannot answer: said once, not per sync
            create_network(node, "bare", BARE_SUBNET)
            bare = create_endpoint(node, "lonely", "bare")
            node.pods.append(node.pods[0].removesuffix("p1") + "p3")  # a third pod namespace, removed by node.stop()
            attach_pod(node, 2, bare)
            kube.apply(bare_service())
            kube.apply(bare_slice(bare["ipAddress"]))
            problem = f"NodePort of service shop/bare: backend {bare['ipAddress']} on a network without a gateway cannot answer NodePort connections"
            wait_until(lambda: any(p.startswith(problem) for p in agent_problems(node)), 30, "the agent to report the bare backend", node)
            status, ready = node.api_call("GET", "/readyz")
            assert status == 200 and any(p.startswith(problem) for p in ready["degraded"]), ready  # serving, and says what it cannot
            syncs = agent_syncs(node)
            wait_until(lambda: agent_syncs(node) >= syncs + 3, 30, "three more syncs", node)
            log = (node.data / "contivd.log").read_text(errors="replace")
            assert log.count(problem) == 1, "the problem is logged once, not per sync"
            assert answers(outside, NODE_ADDRESS, NODE_PORT) == every, "the other Service is still served"

            # Kubernetes mode off (contivd restarted without --kubeconfig; OVS and the pods stay):
            # the Services go from the store, and with them the NodePort rules, routes and flows
            terminate(node.proc)
            node.log.close()
            node.start("--service-cidr", SERVICE_CIDR)
            wait_until(lambda: node_ports_chain(node) == [], 60, "the NodePort rules to go with Kubernetes mode", node)
            wait_until(lambda: CLUSTER_IP not in in_node(node, "ip", "route", "show"), 30, "the ClusterIP's route to go", node)
            assert answers(outside, NODE_ADDRESS, NODE_PORT) == set()
            assert CLUSTER_IP not in dump(node, "dump-flows")
            full_log = (node.data / "contivd.log").read_text(errors="replace")
            assert "Kubernetes mode is off (no live node has --kubeconfig): removed 2 records, 2 Services and 0 pods'" in full_log
        finally:
            node.stop()
            sh("ip", "netns", "del", outside, check=False)


def agent_syncs(node: Node) -> int:
    status, info = node.api_call("GET", "/info")
    return int(info["agent"]["syncs"]) if status == 200 and info.get("agent") else 0

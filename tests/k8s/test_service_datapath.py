"""Kubernetes Services through Open vSwitch, end to end: two contivd nodes in Kubernetes mode
(real OVS in node namespaces), the leader watching the test API server; a pod on node 1 reaches
ClusterIP:port and lands on backends on node 1 and node 2, each answering with its name, over
TCP and UDP; a backend that stops being ready gets no new connection while an established one
keeps its backend; sessionAffinity ClientIP keeps the client on one backend.

The API server runs as a process in node 1's namespace, listening on node 1's control address,
so whichever node leads can watch it. Test-side changes are posted to it from inside that namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cni_harness import create_network
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text
from tests.support.nodes import Node, attach_pod, cluster_of_nodes, sh, wait_until
from tests.support.service_pods import fetch, processes
from tests.support.waiting import free_ports

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.ovs,
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

CLUSTER_IP = "198.18.96.10"
SERVICE_CIDR = "198.18.96.0/24"
GATEWAY = "198.18.10.254"

POST = "import httpx,sys; httpx.post(sys.argv[1], content=sys.argv[2], headers={'content-type': 'application/json'}, timeout=10).raise_for_status()"


class KubeApi:
    """The test API server in `node`'s namespace, changed by posts from inside it."""

    def __init__(self, node: Node, port: int):
        self.node, self.port = node, port

    def apply(self, obj: dict[str, Any]) -> None:
        self._post("apply", obj)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        self._post("delete", {"kind": kind, "namespace": namespace, "name": name})

    def _post(self, action: str, body: dict[str, Any]) -> None:
        sh("ip", "netns", "exec", self.node.ns, sys.executable, "-c", POST, f"http://{self.node.host}:{self.port}/_test/{action}", json.dumps(body))


def service(affinity: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": "ClusterIP",
        "clusterIP": CLUSTER_IP,
        "ports": [
            {"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"},
            {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": "dns"},
        ],
    }
    if affinity:
        spec |= {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}}
    return {"kind": "Service", "apiVersion": "v1", "metadata": {"namespace": "shop", "name": "web"}, "spec": spec}


def endpoint_slice(name: str, address: str, http_port: int, ready: bool = True) -> dict[str, Any]:
    """One backend's slice: the named target ports resolve to this backend's own ports."""
    return {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"namespace": "shop", "name": f"web-{name}", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": ready}}],
        "ports": [{"name": "http", "protocol": "TCP", "port": http_port}, {"name": "dns", "protocol": "UDP", "port": 5353}],
    }


def create_endpoint(node: Node, name: str, network: str = "pods") -> dict[str, Any]:
    request = {"TenantName": "default", "NetworkName": network, "EndpointID": name, "ConfigEP": {"Container": name, "Host": node.name}}
    status, answer = node.api_call("POST", "/plugin/createEndpoint", request)
    assert status == 200, answer
    endpoint: dict[str, Any] = answer["EndpointConfig"]
    return endpoint


def dump(node: Node, what: str) -> str:
    mgmt = f"unix:{node.data / 'ovs' / 'contivVxlanBridge.mgmt'}"
    return sh("ip", "netns", "exec", node.ns, "ovs-ofctl", "-O", "OpenFlow13", what, mgmt, check=False).stdout


def test_cluster_ip_reaches_backends_on_both_nodes_keeps_connections_and_affinity(tmp_path: Path) -> None:
    (api_port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{api_port}", TOKEN))
    options = ("--kubeconfig", str(kubeconfig), "--service-cidr", SERVICE_CIDR)
    with cluster_of_nodes(tmp_path, 2, *options) as nodes, processes() as running:
        first, second = nodes
        running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(api_port), "--host", first.host)
        kube = KubeApi(first, api_port)
        create_network(first, "pods", "198.18.10.0/24", GATEWAY)
        client, near, far = create_endpoint(first, "client"), create_endpoint(first, "near"), create_endpoint(second, "far")
        attach_pod(first, 0, client)
        attach_pod(first, 1, near)
        attach_pod(second, 0, far)
        sh("ip", "netns", "exec", first.pods[0], "ip", "route", "add", "default", "via", GATEWAY)
        running.serve(first.pods[1], "near", 8080, 5353)
        running.serve(second.pods[0], "far", 8081, 5353)
        kube.apply(service())
        kube.apply(endpoint_slice("near", near["ipAddress"], 8080))
        kube.apply(endpoint_slice("far", far["ipAddress"], 8081))
        pod = first.pods[0]

        # Every backend is reached, each on its own target port, over TCP and UDP.
        wait_until(lambda: {"near", "far"} <= set(fetch(pod, CLUSTER_IP, 80, 10)), 60, "TCP to the ClusterIP to reach both backends", first)
        assert set(fetch(pod, CLUSTER_IP, 80, 20)) == {"near", "far"}
        udp = wait_until(lambda: set(fetch(pod, CLUSTER_IP, 53, 5, "udp")) - {"-"}, 30, "UDP to the ClusterIP to be answered", first)
        assert udp <= {"near", "far"}, udp

        # A connection established to the far backend outlives the backend's removal from the
        # service; new connections no longer reach it.
        held = running.hold(pod, CLUSTER_IP, 80, "far")
        kube.apply(endpoint_slice("far", far["ipAddress"], 8081, ready=False))
        wait_until(lambda: far["ipAddress"] not in dump(first, "dump-groups"), 30, "the far backend to leave the select group", first)
        assert set(fetch(pod, CLUSTER_IP, 80, 20)) == {"near"}, "a new connection reached the removed backend"
        assert held.ask() == "far", "the established connection kept its backend"

        # sessionAffinity ClientIP: every new connection of the client goes to one backend.
        kube.apply(endpoint_slice("far", far["ipAddress"], 8081))
        kube.apply(service(affinity=True))

        def affine() -> bool:  # both ports' groups name both backends in registers for endpoint_dnat
            return "learn(" in dump(first, "dump-flows") and dump(first, "dump-groups").count("resubmit(") == 4

        wait_until(affine, 30, "the affinity flows", first)
        answers = fetch(pod, CLUSTER_IP, 80, 20)
        assert len(set(answers)) == 1 and answers[0] in ("near", "far"), f"affinity did not hold: {answers}"
        status, stats = first.agent_call("GET", "/svcstats")
        assert status == 200 and stats["k8s:shop/web"]["kubernetes"] is True and stats["k8s:shop/web"]["packets"] >= 20, stats

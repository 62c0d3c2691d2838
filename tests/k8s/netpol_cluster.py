"""Two contivd nodes in Kubernetes mode on real OVS, the test API server in node 1's namespace
and one Contiv network for the pods, plus `Traffic`: real packets between pods in node
namespaces and the trace of the same packet. Shared by the tests that check NetworkPolicy with
real traffic (test_netpol_datapath's hand-written cases, test_netpol_truth_datapath's table),
so both build the cluster and judge a packet the same way."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.test_service_datapath import SERVICE_CIDR, KubeApi
from tests.nodes import Node, cluster_of_nodes, reaches
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text
from tests.support.service_pods import Processes, fetch, processes
from tests.support.waiting import free_ports

DATAPATH_MARKS = [  # the tests using this module: root, OVS, a cluster
    pytest.mark.k8s,
    pytest.mark.ovs,
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]
DEFAULT_PORTS = {"tcp": 8080, "udp": 5353}  # what tests/support/service_pods.py's pods answer on unless told


@dataclass
class KubeCluster:
    nodes: list[Node]
    running: Processes  # pods' servers and the API server, killed by PID at the end
    kube: KubeApi


@contextmanager
def kube_cluster(tmp_path: Path, subnet: str, gateway: str) -> Iterator[KubeCluster]:
    """Two nodes watching the test API server (served from node 1's namespace on its control
    address, so whichever node leads reaches it), with the VXLAN network default:pods."""
    (api_port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{api_port}", TOKEN))
    with cluster_of_nodes(tmp_path, 2, "--kubeconfig", str(kubeconfig), "--service-cidr", SERVICE_CIDR) as nodes, processes() as running:
        first = nodes[0]
        running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(api_port), "--host", first.host)
        network = {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": subnet, "gateway": gateway}
        status, reply = first.api_call("POST", "/api/v1/networks/default:pods/", network)
        assert status == 200, reply
        yield KubeCluster(nodes, running, KubeApi(first, api_port))


def pod_endpoint(node: Node, name: str, group: str = "", address: str = "") -> dict[str, Any]:
    """A Contiv endpoint on default:pods for a pod on `node` (in EPG `group`, at `address`: optional)."""
    config = {"Container": name, "Host": node.name} | ({"IPAddress": address} if address else {})
    request = {"TenantName": "default", "NetworkName": "pods", "ServiceName": group, "EndpointID": name, "ConfigEP": config}
    status, reply = node.api_call("POST", "/plugin/createEndpoint", request)
    assert status == 200, reply
    endpoint: dict[str, Any] = reply["EndpointConfig"]
    return endpoint


def answer(src: str, dst_ip: str, protocol: str = "tcp", port: int | None = None) -> str:
    """Who answered one connection (TCP) or datagram (UDP) from pod namespace `src`: '-' for nobody."""
    return fetch(src, dst_ip, port or DEFAULT_PORTS[protocol], 1, protocol)[0]


class Traffic:
    """Pods by name (their namespaces, addresses and nodes): each check sends a real packet and
    traces the same packet. A name that is not a pod is an address outside the cluster (trace only)."""

    def __init__(self, nodes: list[Node], pod_ns: dict[str, str], ip: dict[str, str], node_of: dict[str, Node]):
        self.nodes, self.pod_ns, self.ip, self.node_of = nodes, pod_ns, ip, node_of

    def delivered(self, src: str, dst: str, protocol: str, port: int | None = None) -> bool:
        if protocol == "icmp":
            return reaches(self.pod_ns[src], self.ip[dst])
        got = answer(self.pod_ns[src], self.ip[dst], protocol, port)
        assert got in (dst, "-"), got
        return got == dst

    def trace(self, src: str, dst: str, what: str) -> dict[str, Any]:
        """The trace of src → dst (a name or an address; `what` e.g. tcp, tcp/80, icmp), asked of the
        node that does not hold src (for an outside source: the one that does not hold dst), so
        the other node's OVS half comes through the authenticated agent call."""
        what = {"tcp": "tcp/8080", "udp": "udp/5353"}.get(what, what)
        holder = self.node_of.get(src) or self.node_of[dst]
        asked = next(n for n in self.nodes if n is not holder)
        status, traced = asked.api_call("GET", f"/kubernetes/trace/{self.ip.get(src, src)}/{self.ip.get(dst, dst)}/{what}")
        assert status == 200, traced
        return dict(traced)

    def check(self, src: str, dst: str, protocol: str, delivered: bool, deciding: str | None = "-", port: int | None = None) -> dict[str, Any]:
        """Real traffic gives `delivered`, and so does the trace, with every datapath agreeing
        (`deciding` "-": any deciding rule)."""
        got = self.delivered(src, dst, protocol, port)
        assert got is delivered, f"{src} -> {dst} {protocol}/{port}: expected {'delivered' if delivered else 'dropped'}"
        traced = self.trace(src, dst, f"{protocol}/{port}" if port else protocol)
        assert traced["verdict"] == ("allow" if delivered else "drop"), traced
        assert traced["agree"] is True and traced["ovs"]["node"] == self.node_of[src].name, traced
        if deciding != "-":
            assert traced["deciding"] == deciding, traced
        if self.node_of[src] is not self.node_of[dst] and delivered:
            assert traced["ovs_destination"]["verdict"] == "allow" and traced["ovs_destination"]["node"] == self.node_of[dst].name, traced
        return traced

"""Two contivd nodes in Kubernetes mode on real OVS, the test API server in node 1's namespace
and one Contiv network for the pods (VXLAN, or VLAN on the fabric's trunk), hosts outside the
cluster on that VLAN (`outside_hosts`), plus `Traffic`: real packets between pods in node
namespaces (and outside hosts) and the trace of the same packet. Shared by the tests that check NetworkPolicy with
real traffic (test_netpol_datapath's hand-written cases, test_netpol_truth_datapath's table),
so both build the cluster and judge a packet the same way."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.test_service_datapath import SERVICE_CIDR, KubeApi
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text
from tests.support.nodes import Node, cluster_of_nodes, reaches, settled, sh
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
VLAN_TAG = 100  # the pods' network's VLAN when kube_cluster makes it a VLAN network


@dataclass
class KubeCluster:
    nodes: list[Node]
    running: Processes  # pods' servers and the API server, killed by PID at the end
    kube: KubeApi


@contextmanager
def kube_cluster(tmp_path: Path, subnet: str, gateway: str, encap: str = "vxlan") -> Iterator[KubeCluster]:
    """Two nodes watching the test API server (served from node 1's namespace on its control
    address, so whichever node leads reaches it), with the network default:pods (`encap` vlan:
    tagged VLAN_TAG on each node's uplink vl0, the fabric's trunk)."""
    (api_port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{api_port}", TOKEN))
    uplinks = ("--vlan-uplinks", "vl0") if encap == "vlan" else ()
    with cluster_of_nodes(tmp_path, 2, "--kubeconfig", str(kubeconfig), "--service-cidr", SERVICE_CIDR, *uplinks) as nodes, processes() as running:
        first = nodes[0]
        running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(api_port), "--host", first.host)
        tag = {"pktTag": VLAN_TAG} if encap == "vlan" else {}
        network = {"tenantName": "default", "networkName": "pods", "encap": encap, "subnet": subnet, "gateway": gateway, **tag}
        status, reply = first.api_call("POST", "/api/v1/networks/default:pods/", network)
        assert status == 200, reply
        yield KubeCluster(nodes, running, KubeApi(first, api_port))


TOR_BRIDGE = "cvtor"


@contextmanager
def outside_hosts(node: Node, addresses: Mapping[str, str], pod_subnet: str) -> Iterator[dict[str, str]]:
    """One network namespace per outside host (name → address) on the pods' VLAN: its address a
    /32, the pods' subnet on-link. They hang off a top-of-rack switch on the fabric's trunk: an
    OVS bridge (`cvtor`, standalone: NORMAL switching) hosted by `node`'s OVS (this kernel has
    no VLAN devices), each host on an access port of VLAN_TAG, the trunk to the fabric's `vl`
    bridge. Yields name → namespace; removes the namespaces (and with them their veths) whatever
    happens; the bridge goes with the node's OVS."""
    assert node.fabric_ns is not None
    tag = uuid.uuid4().hex[:6]
    made: dict[str, str] = {}
    try:
        node.ovs_vsctl("add-br", TOR_BRIDGE, "--", "set", "bridge", TOR_BRIDGE, "datapath_type=netdev", "fail_mode=standalone")
        far = f"tr{tag}"
        sh("ip", "link", "add", "tor0", "netns", node.ns, "type", "veth", "peer", "name", far, "netns", node.fabric_ns)
        sh("ip", "-n", node.fabric_ns, "link", "set", far, "master", "vl", "up")
        sh("ip", "-n", node.ns, "link", "set", "tor0", "up")
        node.ovs_vsctl("add-port", TOR_BRIDGE, "tor0")
        for index, (name, address) in enumerate(addresses.items()):
            ns, access = f"cdt-{tag}-o{index}", f"tor{index + 1}"
            sh("ip", "netns", "add", ns)
            made[name] = ns
            sh("ip", "link", "add", "up0", "netns", ns, "type", "veth", "peer", "name", access, "netns", node.ns)
            sh("ip", "-n", node.ns, "link", "set", access, "up")
            node.ovs_vsctl("add-port", TOR_BRIDGE, access, "tag=" + str(VLAN_TAG))
            sh("ip", "netns", "exec", ns, "ethtool", "-K", "up0", "tx", "off")  # see tests/support/nodes.py attach_pod
            for link in ("lo", "up0"):
                sh("ip", "-n", ns, "link", "set", link, "up")
            sh("ip", "-n", ns, "addr", "add", f"{address}/32", "dev", "up0")
            sh("ip", "-n", ns, "route", "add", pod_subnet, "dev", "up0")
        yield made
    finally:
        for ns in made.values():
            sh("ip", "netns", "del", ns, check=False)


def rule_hits(nodes: list[Node]) -> dict[str, int]:
    """Packets per NetworkPolicy rule id, summed over the nodes' /netpolstats."""
    total: dict[str, int] = {}
    for node in nodes:
        status, stats = node.agent_call("GET", "/netpolstats")
        assert status == 200, stats
        for rule_id, counts in stats.items():
            total[rule_id] = total.get(rule_id, 0) + counts["packets"]
    return total


def settled_hits(nodes: list[Node]) -> dict[str, int]:
    return settled(lambda: rule_hits(nodes), "the NetworkPolicy rule counters", nodes[0])


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
    traces the same packet. A name without a node is a host outside the cluster (`pod_ns` holds
    its namespace when it has one)."""

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
        verdict = "allow" if delivered else "drop"
        assert traced["verdict"] == verdict and traced["agree"] is True, traced
        if deciding != "-":
            assert traced["deciding"] == deciding, traced
        source, destination = self.node_of.get(src), self.node_of.get(dst)
        if source is not None:
            assert traced["ovs"]["node"] == source.name, traced
        if destination is not None and source is not destination and (delivered or source is None):  # from outside: judged there
            assert traced["ovs_destination"]["verdict"] == verdict and traced["ovs_destination"]["node"] == destination.name, traced
        return traced

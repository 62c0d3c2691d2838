"""Pod label changes end to end: contivd nodes in Kubernetes mode (real OVS in node namespaces),
pods added through the `contiv` CNI plugin with their Kubernetes names, the leader watching Pods
on the test API server. Changing the server pod's `io.contiv.net-group` label moves its endpoint
into a group whose policy denies everything in: pings that passed stop, on the same interface and
OVS port; an unknown group is reported and changes nothing; the leader killed while a label
changes → the new leader applies it.

Three voting nodes and a fourth, a follower of the store (it never leads), that holds both pods, so the
leader, whichever it is when the test kills it, never takes the pods' datapath with it. The API
server runs as a process in the first node's namespace, listening on its control address.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from contivd.cni_server.resolve import Attachment
from tests.k8s.test_service_datapath import KubeApi
from tests.support.cni_harness import Pod, create_network, deny_all_group, netconf, run_plugin
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text, pod
from tests.support.nodes import Node, cluster_of_nodes, leader_of, reaches, sh, wait_until
from tests.support.service_pods import processes
from tests.support.waiting import free_ports

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.cni,
    pytest.mark.ovs,
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

GROUP = "io.contiv.net-group"
SYNC = 90  # a new leader first loads the kubernetes client: seconds of CPU on a loaded machine


def add_pod(node: Node, pods: list[Pod], name: str) -> tuple[Pod, str]:
    """ADD through the plugin as the kubelet does (K8S_POD_NAMESPACE/NAME); the pod's address."""
    added = Pod().create()
    pods.append(added)
    args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID={added.container}"
    out = run_plugin("ADD", netconf(node, network="pods"), container=added.container, netns=added.netns, args=args)
    assert out.status == 0, out.output
    return added, str(out.output["ips"][0]["address"]).split("/")[0]


def endpoint_of(node: Node, added: Pod) -> dict[str, Any]:
    status, debug = node.api_call("GET", "/debug/ofnet")
    assert status == 200, debug
    state: dict[str, Any] = next(s for s in debug["EndpointDb"].values() if s["containerId"] == added.container)
    return state


def interface_of(node: Node, added: Pod) -> tuple[str, str, str]:
    """(OVS ofport, host end ifindex, pod end ifindex): all the same while the interface is."""
    host_end = Attachment(added.container, "eth0").host_ifname
    ofport = sh("ip", "netns", "exec", node.ns, "ovs-vsctl", f"--db=unix:{node.data / 'ovs' / 'db.sock'}", "get", "Interface", host_end, "ofport")
    host = sh("ip", "-n", node.ns, "-o", "link", "show", host_end).stdout.split(":")[0]
    pod_end = sh("ip", "-n", added.name, "-o", "link", "show", "eth0").stdout.split(":")[0]
    return ofport.stdout.strip(), host, pod_end


def counted(node: Node, series: str) -> bool:
    """The node's /metrics has `series` at 1 or more."""
    status, text = node.api_call("GET", "/metrics")
    return status == 200 and re.search(rf"^{re.escape(series)} [1-9]", str(text), re.MULTILINE) is not None


def test_a_label_change_moves_a_pod_into_a_denying_group_on_the_same_port_and_survives_a_leader_kill(tmp_path: Path) -> None:
    (api_port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{api_port}", TOKEN))
    pods: list[Pod] = []
    options = ("--cni-socket", "cni.sock", "--kubeconfig", str(kubeconfig), "--service-cidr", "198.18.97.0/24")
    with cluster_of_nodes(tmp_path, 4, *options, followers=1) as nodes, processes() as running:
        try:
            running.start(nodes[0].ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(api_port), "--host", nodes[0].host)
            kube = KubeApi(nodes[0], api_port)
            create_network(nodes[0], "pods", "198.18.60.0/24", "198.18.60.254")
            status, answer = nodes[0].api_call(
                "POST", "/api/v1/endpointGroups/default:open/", {"tenantName": "default", "groupName": "open", "networkName": "pods"}
            )
            assert status == 200, answer
            deny_all_group(nodes[0], "locked", "pods")
            kube.apply(pod("shop", "cli", {"app": "client"}))
            kube.apply(pod("shop", "srv", {GROUP: "open", "app": "server"}))
            pod_node = nodes[3]
            wait_until(lambda: run_plugin("STATUS", netconf(pod_node, cniVersion="1.1.0")).status == 0, 60, "the pod node's CNI server", pod_node)
            client, _ = add_pod(pod_node, pods, "cli")
            server, server_ip = add_pod(pod_node, pods, "srv")
            assert endpoint_of(pod_node, server)["serviceName"] == "open" and endpoint_of(pod_node, server)["k8sPod"] == "shop/srv"
            wait_until(lambda: reaches(client.name, server_ip), 60, "the client to reach the server in group open", pod_node)
            interface = interface_of(pod_node, server)

            # The group label changes: the endpoint moves into `locked`, whose policy denies all in.
            kube.apply(pod("shop", "srv", {GROUP: "locked", "app": "server"}))
            wait_until(lambda: endpoint_of(pod_node, server)["serviceName"] == "locked", SYNC, "the endpoint in group locked", nodes[0])
            wait_until(lambda: not reaches(client.name, server_ip), 60, "the deny rule to apply to the moved pod", pod_node)
            assert interface_of(pod_node, server) == interface, "the pod kept its interface and OVS port"
            kube.apply(pod("shop", "srv", {GROUP: "open", "app": "server"}))
            wait_until(lambda: reaches(client.name, server_ip), 60, "the server reachable again in group open", pod_node)

            # An unknown group: reported by the leader, nothing changes.
            kube.apply(pod("shop", "srv", {GROUP: "nosuch", "app": "other"}))
            counter = 'contivd_k8s_pod_label_changes_not_applied_total{pod="shop/srv",reason="unknown-group"}'
            voters = nodes[:3]
            wait_until(lambda: any(counted(n, counter) for n in voters), SYNC, "the unknown group counted by the leader", nodes[0])
            assert any("label change of pod shop/srv not applied (unknown-group)" in n.log_text() for n in voters)
            state = endpoint_of(pod_node, server)
            assert (state["serviceName"], state["labels"]) == ("open", {GROUP: "open", "app": "server"})
            assert reaches(client.name, server_ip) and interface_of(pod_node, server) == interface

            # The leader dies while the label changes: the next leader applies it.
            leader = wait_until(lambda: leader_of(voters), 60, "a leader", nodes[0])
            assert leader.proc is not None
            leader.proc.send_signal(signal.SIGKILL)
            leader.proc.wait()
            kube.apply(pod("shop", "srv", {GROUP: "locked", "app": "server"}))
            wait_until(lambda: endpoint_of(pod_node, server)["serviceName"] == "locked", SYNC, "the new leader's move", pod_node)
            wait_until(lambda: not reaches(client.name, server_ip), 60, "the deny rule after the leader change", pod_node)
            assert interface_of(pod_node, server) == interface
            alive = [n for n in voters if n is not leader]
            wait_until(lambda: any(counted(n, "contivd_k8s_endpoints_relabelled_total") for n in alive), 60, "the new leader's counter", pod_node)
            kube.apply(pod("shop", "srv", {GROUP: "open", "app": "server"}))  # the datapath is alive: the deny was the group's
            wait_until(lambda: reaches(client.name, server_ip), 60, "the server reachable again after the leader change", pod_node)
        finally:
            for added in pods:
                added.remove()

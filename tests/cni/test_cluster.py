"""End to end: three contivd nodes (each in its own namespace with its managed OVS, joined by a
fabric), pods added through the `contiv` plugin on every node reach each other over VXLAN, and
deleting them frees every address, endpoint, veth and OVS port."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support.cni_harness import Pod, create_network, holdings, netconf, run_plugin
from tests.support.nodes import cluster_of_nodes, reaches, wait_until

pytestmark = [
    pytest.mark.cni,
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]


def test_pods_added_through_the_plugin_on_three_nodes_ping_each_other(tmp_path: Path) -> None:
    pods: list[Pod] = []
    with cluster_of_nodes(tmp_path, 3, "--cni-socket", "cni.sock") as nodes:
        try:
            create_network(nodes[0], "pods", "198.18.10.0/24", "198.18.10.254")
            for node in nodes:
                wait_until(lambda n=node: run_plugin("STATUS", netconf(n, cniVersion="1.1.0")).status == 0, 40, f"{node.name}'s CNI server", node)
            before = {node.name: holdings(node, ("pods",)) for node in nodes}
            addresses = []
            for node in nodes:  # two of them are followers: their ADD reaches the leader through the node's API
                pod = Pod().create()
                pods.append(pod)
                out = pod.add(node, network="pods")
                assert out.status == 0, out.output
                addresses.append(out.output["ips"][0]["address"].split("/")[0])
            assert len(set(addresses)) == 3
            for source, pod in zip(nodes, pods, strict=True):
                for address in addresses:
                    wait_until(lambda p=pod, a=address: reaches(p.name, a), 40, f"a pod on {source.name} to reach {address}", source)
            for node, pod in zip(nodes, pods, strict=True):
                assert pod.delete(node).status == 0
            for node in nodes:
                assert holdings(node, ("pods",)) == before[node.name], f"{node.name} kept something after DEL"
            for node in nodes:  # each node's /metrics counted its own CNI requests
                status, metrics = node.api_call("GET", "/metrics")
                assert status == 200 and 'contivd_cni_request_seconds_count{op="ADD",result="ok"} 1.0' in metrics, metrics[-2000:]
                assert 'contivd_cni_request_seconds_count{op="DEL",result="ok"} 1.0' in metrics
        finally:
            for pod in pods:
                pod.remove()

"""A real container runtime drives the plugin: podman (CNI backend) on two contivd nodes. Its
containers reach each other across VXLAN, `podman rm -f` removes the endpoint, and a container
removed while contivd is stopped (its DEL fails, podman removes it anyway) loses its endpoint,
address and bridge port once contivd is back and the grace period has passed."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.cni.podman import Podman, available
from tests.support.cni_harness import create_network, holdings, netconf, run_plugin
from tests.support.nodes import SECRET, Node, cluster_of_nodes, vtep_of, wait_until

pytestmark = [
    pytest.mark.cni,
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
    pytest.mark.skipif(not available(), reason="needs podman, busybox-static and nsenter (packaging/deps.sh installs them)"),
]

GRACE = ("--orphan-grace", "2")
NETWORKS = ("pods",)


def restart(node: Node, index: int, peers: list[Node]) -> None:
    """Start the node's contivd again with the arguments cluster_of_nodes gave it."""
    others = ",".join(peer.raft_address for peer in peers if peer is not node)
    node.start("--peers", others, "--cluster-secret", SECRET, "--control-ip", node.host, "--vtep-ip", vtep_of(index), *GRACE)


def test_podman_containers_on_two_nodes_attach_reach_each_other_and_leave_nothing(tmp_path: Path) -> None:
    with cluster_of_nodes(tmp_path, 2, *GRACE) as nodes:
        runtimes: list[Podman] = []
        try:
            create_network(nodes[0], "pods", "198.18.40.0/24", "198.18.40.254")
            for node in nodes:
                wait_until(lambda n=node: run_plugin("STATUS", netconf(n, cniVersion="1.1.0")).status == 0, 40, f"{node.name}'s CNI server", node)
            before = [holdings(node, NETWORKS) for node in nodes]
            runtimes = [Podman(node, "pods") for node in nodes]
            for node, podman in zip(nodes, runtimes, strict=True):
                started = podman.start("web")
                assert started.returncode == 0, f"podman run on {node.name}: {started.stderr}\n{node.log_text()}"
            addresses = [podman.address("web") for podman in runtimes]
            assert len(set(addresses)) == 2 and all(a.startswith("198.18.40.") for a in addresses)
            for node, podman in zip(nodes, runtimes, strict=True):
                endpoint = f"pods.default-{podman.container_id('web')}-eth0"
                assert endpoint in holdings(node, NETWORKS).endpoints, "the endpoint is named after podman's container id"
            wait_until(lambda: runtimes[0].pings("web", addresses[1]), 40, "node-1's container to reach node-2's", nodes[0])
            wait_until(lambda: runtimes[1].pings("web", addresses[0]), 40, "node-2's container to reach node-1's", nodes[1])

            removed = runtimes[0]("rm", "--force", "--time", "0", "web")
            assert removed.returncode == 0, removed.stderr
            held = holdings(nodes[0], NETWORKS)  # its address is free; the other container's is still allocated
            assert (held.veths, held.ports, held.endpoints) == (before[0].veths, before[0].ports, before[0].endpoints), "podman rm -f: CNI DEL"
            assert held.allocated == (("pods", f"{addresses[1]}, 198.18.40.254"),)

            # The orphan: contivd stopped, the container removed (its DEL fails), contivd back.
            second = nodes[1]
            assert second.proc is not None
            second.proc.send_signal(signal.SIGTERM)
            assert second.proc.wait(timeout=20) == 0
            second.log.close()
            removed = runtimes[1]("rm", "--force", "--time", "0", "web")
            assert runtimes[1]("ps", "--all", "--quiet").stdout.strip() == "", f"podman kept the container: {removed.stderr}"
            # Its DEL failed ("contivd is not running"), but podman logs that from whichever process tears
            # the network down: `rm` itself, or conmon's `container cleanup` when the killed container
            # exits first. The endpoint that DEL left behind is what the orphan reaper must find below.
            restart(second, 1, nodes)
            wait_until(lambda: run_plugin("STATUS", netconf(second, cniVersion="1.1.0")).status == 0, 40, "the restarted node's CNI server", second)
            wait_until(lambda: holdings(second, NETWORKS) == before[1], 40, "the orphan's endpoint, address and port to go", second)
            assert "orphaned endpoint pods.default-" in second.log_text(), "the endpoint outlived the failed DEL and was reclaimed as an orphan"
        finally:
            for podman in runtimes:
                podman.close()

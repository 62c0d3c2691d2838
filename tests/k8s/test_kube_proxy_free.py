"""What kube-proxy did for a node, done by contivd, end to end through the test API server (the
cluster of test_nodeport: backends `near` and `other` on node 1, `far` on node 2, an outside host
routed to node 1):

- the node's own connections (its processes, hostNetwork pods) to a ClusterIP without any
  nodePort reach every backend, also from a socket bound to one of the node's addresses;
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.k8s import test_service_datapath
from tests.k8s.test_nodeport import CLUSTER_IP, answers, in_node, node_port_service, service_cluster
from tests.nodes import sh, wait_until
from tests.support.service_pods import fetch

pytestmark = test_service_datapath.pytestmark  # the same markers and conditions (root, Open vSwitch)

EVERY = {"near", "other", "far"}
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

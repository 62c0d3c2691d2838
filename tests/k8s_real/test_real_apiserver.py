"""contivd against a REAL Kubernetes control plane (../shared/kube-apiserver: etcd, kube-apiserver
v1.24 and kube-controller-manager): two contivd nodes in Kubernetes mode on real OVS, pods created
through the API and attached through the `contiv` CNI plugin with their Kubernetes names, their
status (podIP = the address contivd gave) set as a kubelet would; the controller manager writes
the EndpointSlices of Services with selectors. Real traffic from pod namespaces: ClusterIP,
NodePort, ClientIP affinity, the nodes' own connections and an external IP (no kube-proxy), a pod's label change, NetworkPolicy default deny then allow, an API
server restart after etcd compaction (410, relist), Kubernetes mode turned off.

The tests share one control plane, one cluster and its pods (module scope, in file order): each
leaves what the next expects. Pods: client (node-1), web-a (node-1) and web-b (node-2) with
`app: web` answering their names on their named port `http` (8080), other (node-2).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cni_harness import create_network, netconf, run_plugin, set_private_subnet
from tests.support.kube_real import (
    KubePod,
    RealCluster,
    apply_network_policy,
    apply_service,
    control_plane,
    delete_service,
    ensure_namespace,
    ready_addresses,
    real_cluster,
    relabel_pod,
    unavailable,
)
from tests.support.nodes import Node, leader_of, sh, start_member, wait_until
from tests.support.processes import terminate
from tests.support.service_pods import fetch

pytestmark = [
    pytest.mark.k8s_real,
    pytest.mark.ovs,
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
    pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "-"),
]

PVT_SUBNET = "198.18.0.0/16"  # as in tests/k8s/test_nodeport.py: the nodes' private address stays in the test range
SUBNET, GATEWAY = "198.19.10.0/24", "198.19.10.254"
SERVICE_CIDR = "198.19.96.0/24"  # the API server's --service-cluster-ip-range and contivd's --service-cidr
WEB_VIP, STICKY_VIP, GONE_VIP, FRESH_VIP = "198.19.96.10", "198.19.96.11", "198.19.96.12", "198.19.96.13"
HTTP = [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "http"}]
WEB = {"app": "web"}
BOTH = {"web-a", "web-b"}
SYNC = 90  # generous: the machine is shared; a new leader first loads the Kubernetes client


@pytest.fixture(scope="module", name="cluster")
def fixture_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    root = tmp_path_factory.mktemp("k8s-real")
    with control_plane(root / "k8s", SERVICE_CIDR) as plane, real_cluster(plane, root, 2) as cluster:
        first, second = cluster.nodes
        set_private_subnet(first, PVT_SUBNET)
        create_network(first, "pods", SUBNET, GATEWAY)
        ensure_namespace(cluster.plane, "shop")
        for node in cluster.nodes:
            wait_until(lambda n=node: run_plugin("STATUS", netconf(n, cniVersion="1.1.0")).status == 0, 60, f"{node.name}'s CNI server", node)
        http = [{"name": "http", "protocol": "TCP", "containerPort": 8080}]
        cluster.add_pod(first, "shop", "client", {"app": "client"})
        for node, name in ((first, "web-a"), (second, "web-b")):
            added = cluster.add_pod(node, "shop", name, WEB, http)
            cluster.running.serve(added.netns.name, name, 8080, 5353)
        other = cluster.add_pod(second, "shop", "other", {"app": "other"})
        cluster.running.serve(other.netns.name, "other", 8080, 5353)
        apply_service(cluster.plane, "shop", "web", {"selector": WEB, "clusterIP": WEB_VIP, "ports": HTTP})
        yield cluster


def pod(cluster: RealCluster, name: str) -> KubePod:
    return next(p for p in cluster.pods if p.name == name)


def answers(namespace: str, address: str, port: int, count: int = 20) -> set[str]:
    """Who answered `count` new TCP connections from `namespace` to address:port."""
    return set(fetch(namespace, address, port, count)) - {"-"}


def stored_services(node: Node) -> dict[str, Any]:
    status, records = node.api_call("GET", "/kubernetes/services")
    assert status == 200, records
    return {f"{r['namespace']}/{r['name']}": r for r in records}


def flows(node: Node) -> str:
    mgmt = f"unix:{node.data / 'ovs' / 'contivVxlanBridge.mgmt'}"
    return sh("ip", "netns", "exec", node.ns, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", mgmt, check=False).stdout


def test_pods_added_through_cni_back_a_selector_service_whose_slices_the_controller_writes(cluster: RealCluster) -> None:
    plane, first = cluster.plane, cluster.nodes[0]
    client, web_a, web_b = pod(cluster, "client"), pod(cluster, "web-a"), pod(cluster, "web-b")
    assert all(ipaddress.ip_address(p.ip) in ipaddress.ip_network(SUBNET) for p in cluster.pods), "addresses of the pods' network"
    # The pod's status carries the address contivd's CNI ADD gave; the controller manager put it in the slice.
    assert plane.core.read_namespaced_pod("web-a", "shop").status.pod_ip == web_a.ip
    wait_until(lambda: ready_addresses(plane, "shop", "web") == {web_a.ip, web_b.ip}, 60, "the controller manager's EndpointSlice", first)
    wait_until(lambda: answers(client.netns.name, WEB_VIP, 80) == BOTH, SYNC, "the ClusterIP to reach both backends", first)
    for node in cluster.nodes:  # every node's store holds the record as resolved from the real slices
        record = stored_services(node)["shop/web"]
        assert record["clusterIP"] == WEB_VIP, record
        (port,) = record["ports"]
        assert sorted((b["ip"], b["port"]) for b in port["backends"]) == sorted([(web_a.ip, 8080), (web_b.ip, 8080)]), record


EXTERNAL_IP, EXTERNAL_VIP = "198.19.97.1", "198.19.96.14"  # shop/ext's externalIPs (an address of no node) and ClusterIP


def test_no_kube_proxy_the_nodes_own_connections_and_an_external_ip_reach_the_backends(cluster: RealCluster) -> None:
    """kube-proxy's part, done by contivd (docs/kubernetes.md): each node's own sockets (kubelet,
    hostNetwork pods) reach the ClusterIP, and an externalIP the API server accepted on a
    Service is served from the node; it goes with the Service."""
    first = cluster.nodes[0]
    for node in cluster.nodes:
        wait_until(lambda n=node: answers(n.ns, WEB_VIP, 80) == BOTH, SYNC, f"{node.name}'s own connections to the ClusterIP", node)
    # the external address lies beyond the node (a link of its own routes it; the node DNATs before it leaves)
    sh("ip", "-n", first.ns, "link", "add", "cvext", "type", "veth", "peer", "name", "cvext1")
    sh("ip", "-n", first.ns, "link", "set", "cvext", "up")
    sh("ip", "-n", first.ns, "link", "set", "cvext1", "up")
    sh("ip", "-n", first.ns, "route", "add", f"{EXTERNAL_IP}/32", "dev", "cvext")
    apply_service(cluster.plane, "shop", "ext", {"selector": WEB, "clusterIP": EXTERNAL_VIP, "ports": HTTP, "externalIPs": [EXTERNAL_IP]})
    wait_until(lambda: answers(first.ns, EXTERNAL_IP, 80) == BOTH, SYNC, "the external IP from the node", first)
    delete_service(cluster.plane, "shop", "ext")
    wait_until(lambda: answers(first.ns, EXTERNAL_IP, 80, 3) == set(), SYNC, "the external IP to go with its Service", first)


def node_port_rules(node: Node) -> str:
    return sh("ip", "netns", "exec", node.ns, "iptables", "-t", "nat", "-S", "CONTIVD-NODEPORTS").stdout


def readiness(node: Node) -> tuple[int, Any]:
    return node.api_call("GET", "/readyz")


def test_a_node_port_allocated_by_the_api_server_reaches_both_backends_from_each_node(cluster: RealCluster) -> None:
    stored = apply_service(cluster.plane, "shop", "web-np", {"type": "NodePort", "selector": WEB, "ports": HTTP})
    node_port = int(stored["spec"]["ports"][0]["nodePort"])
    assert 30000 <= node_port <= 32767
    for node in cluster.nodes:
        wait_until(lambda n=node: answers(n.ns, n.host, node_port) == BOTH, SYNC, f"{node.name}'s address:nodePort to reach both backends", node)
    delete_service(cluster.plane, "shop", "web-np")
    for node in cluster.nodes:
        wait_until(
            lambda n=node: f"--dport {node_port}" not in node_port_rules(n), SYNC, f"the deleted Service's NodePort rule to leave {node.name}", node
        )
        assert answers(node.ns, node.host, node_port, 3) == set()


def test_client_ip_affinity_keeps_a_client_on_one_backend(cluster: RealCluster) -> None:
    client, first = pod(cluster, "client"), cluster.nodes[0]
    affinity = {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}}
    apply_service(cluster.plane, "shop", "sticky", {"selector": WEB, "clusterIP": STICKY_VIP, "ports": HTTP, **affinity})
    wait_until(lambda: answers(client.netns.name, STICKY_VIP, 80, 3), SYNC, "the affinity Service to answer", first)
    wait_until(lambda: "learn(" in flows(first), 30, "the affinity flows", first)
    got = fetch(client.netns.name, STICKY_VIP, 80, 20)
    assert len(set(got)) == 1 and got[0] in BOTH, f"affinity did not hold: {got}"
    assert answers(client.netns.name, WEB_VIP, 80) == BOTH, "the Service without affinity still spreads"


def test_a_label_change_takes_the_pod_out_of_the_service_and_its_endpoint_follows(cluster: RealCluster) -> None:
    plane, second = cluster.plane, cluster.nodes[1]
    client, web_a, web_b = pod(cluster, "client"), pod(cluster, "web-a"), pod(cluster, "web-b")

    def endpoint_labels() -> dict[str, str]:
        status, debug = second.api_call("GET", "/debug/ofnet")
        assert status == 200, debug
        state = next(s for s in debug["EndpointDb"].values() if s["containerId"] == web_b.netns.container)
        return dict(state["labels"])

    assert endpoint_labels() == WEB, "the labels contivd read at ADD"
    relabel_pod(plane, "shop", "web-b", {"app": "web-off"})
    wait_until(lambda: ready_addresses(plane, "shop", "web") == {web_a.ip}, 60, "the controller to drop web-b from the slice", second)
    wait_until(lambda: answers(client.netns.name, WEB_VIP, 80) == {"web-a"}, SYNC, "the ClusterIP to reach web-a only", second)
    wait_until(lambda: endpoint_labels() == {"app": "web-off"}, SYNC, "web-b's endpoint to take its pod's labels", second)
    relabel_pod(plane, "shop", "web-b", WEB)
    wait_until(lambda: answers(client.netns.name, WEB_VIP, 80) == BOTH, SYNC, "web-b back behind the ClusterIP", second)
    wait_until(lambda: endpoint_labels() == WEB, SYNC, "web-b's endpoint labels back", second)


def test_network_policy_default_deny_then_allow_from_the_client(cluster: RealCluster) -> None:
    plane, first = cluster.plane, cluster.nodes[0]
    client, other, web_a = pod(cluster, "client"), pod(cluster, "other"), pod(cluster, "web-a")
    assert fetch(other.netns.name, web_a.ip, 8080, 1) == ["web-a"], "no policy yet: other reaches web-a"
    apply_network_policy(plane, "shop", "web-deny", {"podSelector": {"matchLabels": WEB}, "policyTypes": ["Ingress"]})
    wait_until(lambda: answers(client.netns.name, WEB_VIP, 80, 3) == set(), SYNC, "the default deny to close the ClusterIP", first)
    assert fetch(other.netns.name, web_a.ip, 8080, 1) == ["-"], "the default deny holds pod to pod"
    allow = {
        "podSelector": {"matchLabels": WEB},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": "http"}]}],
    }
    apply_network_policy(plane, "shop", "web-from-client", allow)
    wait_until(lambda: answers(client.netns.name, WEB_VIP, 80) == BOTH, SYNC, "the client allowed through the ClusterIP", first)
    assert fetch(other.netns.name, web_a.ip, 8080, 1) == ["-"], "other is still denied"


def test_an_api_server_restart_after_compaction_relists_and_reconciles(cluster: RealCluster) -> None:
    plane, nodes = cluster.plane, cluster.nodes
    client = pod(cluster, "client")
    apply_service(plane, "shop", "gone", {"selector": WEB, "clusterIP": GONE_VIP, "ports": HTTP})
    wait_until(lambda: answers(client.netns.name, GONE_VIP, 80) == BOTH, SYNC, "the Service about to go to be served", nodes[0])
    leader = wait_until(lambda: leader_of(nodes), 60, "a leader", nodes[0])

    # The nodes lose the API server; meanwhile a Service goes, another comes and etcd's history is compacted.
    cluster.pause_api()
    wait_until(
        lambda: readiness(leader)[0] == 503 and "unreachable" in str(readiness(leader)[1]),
        60,
        "the leader's readiness to name the API server",
        leader,
    )
    delete_service(plane, "shop", "gone")
    apply_service(plane, "shop", "fresh", {"selector": WEB, "clusterIP": FRESH_VIP, "ports": HTTP})
    plane.compact_etcd()
    plane.down()
    assert answers(client.netns.name, GONE_VIP, 80) == BOTH, "nothing programmed is torn down while the API server is away"

    # Back without a watch cache: a watch resuming from before the compaction can only get 410.
    plane.up("--watch-cache=false")
    cluster.resume_api()
    wait_until(lambda: answers(client.netns.name, FRESH_VIP, 80) == BOTH, SYNC, "the Service made during the outage to be served", leader)
    wait_until(lambda: answers(client.netns.name, GONE_VIP, 80, 3) == set(), SYNC, "the Service deleted during the outage to go", leader)
    for node in nodes:
        wait_until(lambda n=node: "shop/gone" not in stored_services(n), 30, f"{node.name}'s record of the deleted Service to go", node)
        assert GONE_VIP not in flows(node)
    assert any(services_relisted(n) for n in nodes), "the Service watch relisted after a 410 (contivd_k8s_relists_total)"
    wait_until(lambda: readiness(leader)[0] == 200, SYNC, "the leader ready again", leader)


def test_turning_kubernetes_mode_off_removes_its_services_and_policies_on_every_node(cluster: RealCluster) -> None:
    nodes = cluster.nodes
    for node in nodes:
        assert "shop/web" in stored_services(node) and WEB_VIP in flows(node)
    for node in nodes:
        terminate(node.proc)
        node.log.close()
    for index, node in enumerate(nodes):
        start_member(node, index, nodes)  # no --kubeconfig: Kubernetes mode off
    for node in nodes:
        wait_until(lambda n=node: n.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 60, f"{node.name}'s API", node)
    for node in nodes:
        wait_until(lambda n=node: stored_services(n) == {}, 30, f"{node.name}'s Kubernetes Service records to go", node)
        wait_until(lambda n=node: WEB_VIP not in flows(n), SYNC, f"{node.name}'s ClusterIP flows to go", node)

        def policy_rules(n: Node = node) -> list[str]:
            status, stats = n.agent_call("GET", "/netpolstats")
            assert status == 200, stats
            return [rule for rule in stats if rule.startswith("shop/")]

        wait_until(lambda p=policy_rules: p() == [], SYNC, f"{node.name}'s NetworkPolicy rules to go", node)


def services_relisted(node: Node) -> bool:
    """The node's /metrics count a relist of the Services watch (a 410: its history was gone)."""
    status, text = node.api_call("GET", "/metrics")
    prefix = 'contivd_k8s_relists_total{kind="services"} '
    return status == 200 and any(line.startswith(prefix) and float(line[len(prefix) :]) > 0 for line in str(text).splitlines())

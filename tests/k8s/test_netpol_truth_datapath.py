"""The NetworkPolicy truth table (tests/model/test_netpolicy.py's CASES, imported, not
copied) with real traffic: two contivd nodes in Kubernetes mode on real OVS, the table's
namespaces and pods as real pods in node namespaces at the table's addresses (prod/web, prod/db
and dev/tool on node 1; prod/client, dev/web and other/x on node 2, so cases cross nodes), each
pod answering with its name on every TCP and UDP port the cases use.

For each case: exactly its policies on the test API server (the previous case's deleted), a wait
until the trace of the case's packet gives the case's verdict and deciding rule with every
datapath agreeing (so the agents have programmed them: no sleep), then the packet is sent for
real (TCP connection, UDP datagram answered, ping) and must be delivered exactly when the table
allows it, and the trace (asked of the node that is not the source's) says the same.

The pods' network is a VLAN network on the fabric's trunk, so cases between nodes cross the
uplinks, where other nodes' pods and hosts outside the cluster arrive alike. The 6 cases with an
end outside the cluster (`outside`, `outside2`, `outside_except`: 198.19.0.5, 198.19.1.5,
198.19.0.200) have real hosts there: one namespace each on the pods' VLAN, behind a top-of-rack
switch on the trunk (the pods have 198.19.0.0/16 on-link, the hosts the pods' subnet),
answering like the pods. Ingress from them
is judged at the destination's node (docs/policy.md); a pod's packet to them leaves through its
node's uplink. For those cases the rule counters summed over both nodes must move on the case's
deciding rule only (an allow's, or the isolation's: the default drop).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.k8s.netpol_cluster import DATAPATH_MARKS, Traffic, kube_cluster, outside_hosts, pod_endpoint, settled_hits
from tests.model.test_netpolicy import CASES, ICMP, IP, NAMESPACES, PODS, TCP, UDP
from tests.support.nodes import Node, attach_pod, sh, wait_until

pytestmark = DATAPATH_MARKS

SUBNET, PREFIX, GATEWAY = "198.18.0.0/22", 22, "198.18.3.254"  # holds every pod address of the table
OUTSIDE_ROUTE = "198.19.0.0/16"  # the outside hosts' addresses, on-link on the pods' VLAN
ON_FIRST_NODE = {"prod/web", "prod/db", "dev/tool"}
PROTOCOLS = {TCP: "tcp", UDP: "udp", ICMP: "icmp"}
POLICY_SECONDS = 60  # generous: the leader compiles and every agent programs; the machine is shared

Case = tuple[str, list[dict[str, Any]], str, str, int, int, bool, "str | None"]


def pod_key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


POD_KEYS = [pod_key(p) for p in PODS]


def ports(protocol: int) -> list[int]:
    """Every port the table sends `protocol` to: each pod listens on all of them."""
    return sorted({case[5] for case in CASES if case[4] == protocol})


def with_api_version(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "apiVersion": "networking.k8s.io/v1" if obj["kind"] == "NetworkPolicy" else "v1"}


def policy_key(policy: dict[str, Any]) -> tuple[str, str]:
    return policy["metadata"]["namespace"], policy["metadata"]["name"]


def pod_namespace(node: Node, index: int) -> str:
    """The node's index-th pod namespace, named like tests/support/nodes.py's (removed with the node)."""
    while len(node.pods) <= index:
        node.pods.append(f"{node.pods[0][:-1]}{len(node.pods) + 1}")
    return node.pods[index]


def test_the_table_has_outside_cases_only_where_the_docstring_says() -> None:
    outside = {end for case in CASES for end in case[2:4] if end not in POD_KEYS}
    assert outside == {"outside", "outside2", "outside_except"}
    assert {IP[end] for end in outside} == {"198.19.0.5", "198.19.1.5", "198.19.0.200"}


def test_the_truth_table_holds_for_real_traffic_and_the_trace_on_two_nodes(tmp_path: Path) -> None:
    outside = {end: IP[end] for case in CASES for end in case[2:4] if end not in POD_KEYS}
    with kube_cluster(tmp_path, SUBNET, GATEWAY, encap="vlan") as cluster:
        first, second = cluster.nodes
        node_of = {key: first if key in ON_FIRST_NODE else second for key in POD_KEYS}
        pod_ns: dict[str, str] = {}
        for key, node in node_of.items():
            index = sum(1 for other in pod_ns if node_of[other] is node)
            pod_ns[key] = pod_namespace(node, index)
            attach_pod(node, index, pod_endpoint(node, key.replace("/", "-"), address=IP[key]), bridge="contivVlanBridge", prefix=PREFIX)
            sh("ip", "-n", pod_ns[key], "route", "add", OUTSIDE_ROUTE, "dev", f"vc{index}")
            cluster.running.serve(pod_ns[key], key, ports(TCP), ports(UDP))
        with outside_hosts(first, outside, SUBNET) as hosts:
            for name, ns in hosts.items():
                cluster.running.serve(ns, name, ports(TCP), ports(UDP))
            for obj in (*NAMESPACES, *PODS):
                cluster.kube.apply(with_api_version(obj))
            traffic = Traffic(cluster.nodes, {**pod_ns, **hosts}, IP, node_of)
            applied: dict[tuple[str, str], dict[str, Any]] = {}
            for case in CASES:
                apply_exactly(cluster.kube, applied, case[1])
                check_case(traffic, case)


def apply_exactly(kube: Any, applied: dict[tuple[str, str], dict[str, Any]], policies: list[dict[str, Any]]) -> None:
    """The API server holds exactly `policies`: the others deleted, the missing applied."""
    wanted = {policy_key(p): p for p in policies}
    for key in [k for k in applied if k not in wanted]:
        kube.delete("NetworkPolicy", *key)
        del applied[key]
    for key, policy in wanted.items():
        if applied.get(key) is not policy:
            kube.apply(with_api_version(policy))
            applied[key] = policy


def check_case(traffic: Traffic, case: Case) -> None:
    """One row: programmed (the trace gives the row's verdict and rule, the datapaths agreeing),
    then the real packet and its trace; with an end outside the cluster, the counters too."""
    name, _, src, dst, proto, dport, allowed, rule = case
    protocol = PROTOCOLS[proto]
    what = protocol if proto == ICMP else f"{protocol}/{dport}"
    verdict = "allow" if allowed else "drop"
    seen: list[dict[str, Any]] = []

    def programmed() -> bool:
        seen[:] = [traffic.trace(src, dst, what)]
        traced = seen[0]
        return bool(traced["verdict"] == verdict and traced["deciding"] == rule and traced["agree"])

    node = traffic.node_of.get(src) or traffic.node_of[dst]
    try:
        wait_until(programmed, POLICY_SECONDS, f"case {name!r}: the trace to give {verdict} by {rule}", node)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}\n--- the last trace ---\n{seen}") from None
    outside = src not in traffic.node_of or dst not in traffic.node_of
    before = settled_hits(traffic.nodes) if outside else {}
    traced = traffic.check(src, dst, protocol, allowed, rule, None if proto == ICMP else dport)
    assert traced["deciding"] == rule, (name, traced)
    if outside:
        after = settled_hits(traffic.nodes)
        assert {r for r in after if after[r] != before.get(r, 0)} == {rule}, (name, before, after)

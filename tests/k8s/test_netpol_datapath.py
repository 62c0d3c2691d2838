"""Kubernetes NetworkPolicy through Open vSwitch, end to end: two contivd nodes in Kubernetes mode
(real OVS in node namespaces), the leader watching NetworkPolicies, Pods and Namespaces on the test
API server; pods on both nodes send real TCP, UDP and ICMP, and what passes is what the truth table
(tests/unit/model/test_netpolicy.py) says for a representative subset: podSelector with a named
port, namespaceSelector, ipBlock with except, egress, protocols, default deny, a union of two
policies, replies of allowed connections across nodes, and a Contiv rule still applying.

Pods: a = prod/client and b = prod/db on node 1, c = dev/tool and d = other/x on node 2; each
answers with its name on TCP 8080 and UDP 5353 (tests/support/service_pods.py).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.test_service_datapath import KubeApi, create_endpoint
from tests.nodes import Node, attach_pod, cluster_of_nodes, metric_value, reaches, settled, wait_until
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text
from tests.support.service_pods import fetch, processes
from tests.support.waiting import free_ports

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.ovs,
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

SUBNET, GATEWAY = "198.18.10.0/24", "198.18.10.254"
POLICY_SECONDS = 60  # generous: the leader compiles and every agent programs; the machine is shared


def pod(namespace: str, name: str, ip: str, labels: dict[str, str], ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"namespace": namespace, "name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "ports": ports or []}]},
        "status": {"podIP": ip},
    }


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name, "labels": labels}}


def policy(ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "apiVersion": "networking.k8s.io/v1", "metadata": {"namespace": ns, "name": name}, "spec": spec}


DB_FROM_CLIENT_PG = policy(
    "prod",
    "db-in",
    {
        "podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": "pg"}]}],
    },
)
DB_UDP_FROM_DEV = policy(
    "prod",
    "db-udp-from-dev",
    {
        "podSelector": {"matchLabels": {"app": "db"}},
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"env": "dev"}}}], "ports": [{"protocol": "UDP", "port": 5353}]}],
    },
)


def tool_out(except_ip: str) -> dict[str, Any]:
    block = {"ipBlock": {"cidr": SUBNET, "except": [f"{except_ip}/32"]}}
    return policy(
        "dev",
        "tool-out",
        {
            "podSelector": {"matchLabels": {"app": "tool"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [block], "ports": [{"protocol": "UDP", "port": 5353}]}],
        },
    )


def rule_hits(nodes: list[Node]) -> dict[str, int]:
    """Packets per NetworkPolicy rule id, summed over the nodes' /netpolstats."""
    total: dict[str, int] = {}
    for node in nodes:
        status, stats = node.api_call("GET", "/netpolstats", port=node.agent)
        assert status == 200, stats
        for rule_id, counts in stats.items():
            total[rule_id] = total.get(rule_id, 0) + counts["packets"]
    return total


def settled_hits(nodes: list[Node]) -> dict[str, int]:
    return settled(lambda: rule_hits(nodes), "the NetworkPolicy rule counters", nodes[0])


def metric_packets(node: Node, policy: str, rule: str) -> float:
    """contivd_policy_rule_packets_total of one NetworkPolicy rule of namespace prod."""
    return metric_value(node, "contivd_policy_rule_packets_total", {"kind": "kubernetes", "tenant": "prod", "policy": policy, "rule": rule})


def answer(src: str, dst_ip: str, protocol: str = "tcp") -> str:
    port = 8080 if protocol == "tcp" else 5353
    return fetch(src, dst_ip, port, 1, protocol)[0]


def test_network_policies_decide_real_traffic_between_pods_on_two_nodes(tmp_path: Path) -> None:
    (api_port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(f"http://198.19.0.1:{api_port}", TOKEN))
    with cluster_of_nodes(tmp_path, 2, "--kubeconfig", str(kubeconfig)) as nodes, processes() as running:
        first, second = nodes
        running.start(first.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(api_port), "--host", first.host)
        kube = KubeApi(first, api_port)
        network = {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": SUBNET, "gateway": GATEWAY}
        status, reply = first.api_call("POST", "/api/v1/networks/default:pods/", network)
        assert status == 200, reply
        endpoints = {name: create_endpoint(node, name) for name, node in (("a", first), ("b", first), ("c", second), ("d", second))}
        ns_of = {"a": first.pods[0], "b": first.pods[1], "c": second.pods[0], "d": second.pods[1]}
        for name, (node, index) in {"a": (first, 0), "b": (first, 1), "c": (second, 0), "d": (second, 1)}.items():
            attach_pod(node, index, endpoints[name])
            running.serve(ns_of[name], name, 8080, 5353)
        ip = {name: endpoint["ipAddress"] for name, endpoint in endpoints.items()}
        for obj in (
            namespace("prod", env="prod"),
            namespace("dev", env="dev"),
            namespace("other"),
            pod("prod", "client", ip["a"], {"app": "client"}),
            pod("prod", "db", ip["b"], {"app": "db"}, [{"name": "pg", "protocol": "TCP", "containerPort": 8080}]),
            pod("dev", "tool", ip["c"], {"app": "tool"}),
            pod("other", "x", ip["d"], {"app": "x"}),
        ):
            kube.apply(obj)
        a, b, c, d = (ns_of[n] for n in "abcd")

        # No policy: everything passes, on one node and across nodes.
        wait_until(lambda: answer(a, ip["b"]) == "b" and answer(c, ip["b"]) == "b", 60, "the pods to reach each other", first)
        assert reaches(a, ip["c"]) and answer(d, ip["a"], "udp") == "a"

        # db isolated for ingress: only the client, only on the named port pg (TCP 8080).
        kube.apply(DB_FROM_CLIENT_PG)
        wait_until(lambda: answer(c, ip["b"]) == "-", POLICY_SECONDS, "c (other namespace, other node) cut off from db", first)
        assert answer(a, ip["b"]) == "b", "the client on the named port"
        assert answer(a, ip["b"], "udp") == "-", "UDP is not in the rule"
        assert not reaches(a, ip["b"]), "ICMP is not in the rule"
        assert reaches(a, ip["c"]) and answer(d, ip["c"]) == "c", "pods no policy selects are not isolated"

        # Counters: the allow that matched counts, and nothing else; a drop counts on the isolation.
        before = settled_hits(nodes)
        assert [answer(a, ip["b"]) for _ in range(3)] == ["b"] * 3
        after = settled_hits(nodes)
        assert {r for r in after if after[r] != before.get(r, 0)} == {"prod/db-in/ingress/0"}, (before, after)
        assert answer(c, ip["b"]) == "-"
        dropped = settled_hits(nodes)
        assert {r for r in dropped if dropped[r] != after.get(r, 0)} == {"prod/db/ingress/isolation"}, (after, dropped)
        wait_until(lambda: metric_packets(first, "db-in", "ingress/0") > 0, 60, "the allow's counter in /metrics", first)
        status, summed = first.api_call("GET", "/policy/hits/prod")  # the same sums through the API, per namespace
        assert status == 200 and summed["unanswered"] == [], summed
        assert summed["netpol"]["prod/db-in/ingress/0"]["packets"] == dropped["prod/db-in/ingress/0"], summed
        drops = {(d["tenant"], d["group"], d["direction"]): d["packets"] for d in summed["defaultDrops"]}
        assert drops == {("prod", "db", "ingress"): dropped["prod/db/ingress/isolation"]}, summed
        status, refused = first.api_call("GET", "/policy/hits/prod:nosuch")
        assert status == 404 and "policy prod:nosuch not found" in refused["error"], refused
        db_drops = {"tenant": "prod", "group": "db", "direction": "ingress"}
        wait_until(
            lambda: metric_value(second, "contivd_policy_default_drop_packets_total", db_drops) > 0,
            60,
            "db's default drop in /metrics of the source's node",
            second,
        )

        # A second policy adds UDP from namespace env=dev (union); tool may send only UDP 5353
        # into the pod subnet except a (egress, ipBlock with except).
        kube.apply(DB_UDP_FROM_DEV)
        kube.apply(tool_out(ip["a"]))
        wait_until(lambda: answer(c, ip["b"], "udp") == "b", POLICY_SECONDS, "dev's UDP to db allowed by the union", first)
        assert answer(c, ip["a"], "udp") == "-", "the except address"
        assert answer(c, ip["b"]) == "-", "tool's egress allows only UDP"
        assert not reaches(c, ip["d"]), "ICMP from an egress-isolated pod, same node"
        assert answer(a, ip["c"]) == "c", "a connection to the egress-isolated pod: its replies come back across nodes"
        assert reaches(d, ip["c"]), "ping to the egress-isolated pod on its node: the reply passes"
        assert answer(d, ip["b"], "udp") == "-", "other is not env=dev"

        # The trace agrees with what the packets did: the model's verdict and OVS's ofproto/trace.
        for src, dst, what, verdict, deciding in (
            (ip["a"], "prod/db", "tcp/8080", "allow", "prod/db-in/ingress/0"),
            (ip["c"], ip["b"], "udp/5353", "allow", "prod/db-udp-from-dev/ingress/0"),
            (ip["c"], ip["b"], "tcp/8080", "drop", "dev/tool/egress/isolation"),
            (ip["c"], ip["a"], "udp/5353", "drop", "dev/tool/egress/isolation"),
            (ip["d"], ip["b"], "udp/5353", "drop", "prod/db/ingress/isolation"),
        ):
            source_node = first if src in (ip["a"], ip["b"]) else second  # OVS traces on the source's node
            status, traced = source_node.api_call("GET", f"/kubernetes/trace/{src}/{dst}/{what}")
            assert status == 200 and (traced["verdict"], traced["deciding"]) == (verdict, deciding), traced
            assert traced.get("agree") is True and traced["ovs"]["verdict"] == verdict, traced.get("ovs")

        # Policies deleted: everything passes again.
        for ns, name in (("prod", "db-in"), ("prod", "db-udp-from-dev"), ("dev", "tool-out")):
            kube.delete("NetworkPolicy", ns, name)
        wait_until(lambda: answer(c, ip["b"]) == "b", POLICY_SECONDS, "the policies gone", first)
        assert reaches(a, ip["b"]) and reaches(c, ip["d"])

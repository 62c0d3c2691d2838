"""Kubernetes NetworkPolicy through Open vSwitch, end to end: two contivd nodes in Kubernetes mode
(real OVS in node namespaces), the leader watching NetworkPolicies, Pods and Namespaces on the test
API server; pods on both nodes send real TCP, UDP and ICMP, and what passes is what the truth table
(tests/model/test_netpolicy.py) says for a representative subset: podSelector with a named
port, namespaceSelector, ipBlock with except, egress, protocols, default deny, a union of two
policies, replies of allowed connections across nodes, Contiv's EPG rules applying first, and a
ClusterIP whose backend NetworkPolicy isolates (traced through the VIP's DNAT).

Every case is also traced (`/kubernetes/trace`, asked of the node that is NOT the source's, so
the source's OVS half comes through the authenticated agent call): the trace's verdict is what
the packets did, both nodes' datapaths agree with the model, and a flow added behind the
agent's back is reported as a DISAGREEMENT (`ctl trace` exits 4).

Pods: a = prod/client and b = prod/db on node 1, c = dev/tool and d = other/x on node 2; each
answers with its name on TCP 8080 and UDP 5353 (tests/support/service_pods.py). EPGs: b in
`back`, the others in `front`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.k8s.netpol_cluster import DATAPATH_MARKS, Traffic, answer, kube_cluster, pod_endpoint, settled_hits
from tests.support.nodes import Node, attach_pod, metric_value, reaches, sh, wait_until
from tests.support.service_pods import fetch

pytestmark = DATAPATH_MARKS

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


DB_VIP = "198.18.96.20"
DB_SERVICE = {
    "kind": "Service",
    "apiVersion": "v1",
    "metadata": {"namespace": "prod", "name": "db"},
    "spec": {"type": "ClusterIP", "clusterIP": DB_VIP, "ports": [{"name": "pg", "protocol": "TCP", "port": 80, "targetPort": "pg"}]},
}


def db_slice(address: str) -> dict[str, Any]:
    return {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"namespace": "prod", "name": "db-1", "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "pg", "protocol": "TCP", "port": 8080}],
    }


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


def metric_packets(node: Node, policy: str, rule: str) -> float:
    """contivd_policy_rule_packets_total of one NetworkPolicy rule of namespace prod."""
    return metric_value(node, "contivd_policy_rule_packets_total", {"kind": "kubernetes", "tenant": "prod", "policy": policy, "rule": rule})


def test_network_policies_decide_real_traffic_between_pods_on_two_nodes(tmp_path: Path) -> None:
    with kube_cluster(tmp_path, SUBNET, GATEWAY) as cluster:
        nodes, running, kube = cluster.nodes, cluster.running, cluster.kube
        first, second = nodes
        for group in ("front", "back"):
            status, reply = first.api_call(
                "POST", f"/api/v1/endpointGroups/default:{group}/", {"tenantName": "default", "groupName": group, "networkName": "pods"}
            )
            assert status == 200, reply
        placed = {"a": (first, "front"), "b": (first, "back"), "c": (second, "front"), "d": (second, "front")}
        endpoints = {name: pod_endpoint(node, name, group) for name, (node, group) in placed.items()}
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
        cases = Traffic(nodes, ns_of, ip, {name: node for name, (node, _) in placed.items()})

        # No policy: everything passes, on one node and across nodes.
        wait_until(lambda: answer(a, ip["b"]) == "b" and answer(c, ip["b"]) == "b", 60, "the pods to reach each other", first)
        cases.check("a", "b", "tcp", True, None)
        cases.check("c", "b", "tcp", True, None)
        cases.check("a", "c", "icmp", True, None)
        cases.check("d", "a", "udp", True, None)

        # db isolated for ingress: only the client, only on the named port pg (TCP 8080).
        kube.apply(DB_FROM_CLIENT_PG)
        wait_until(lambda: answer(c, ip["b"]) == "-", POLICY_SECONDS, "c (other namespace, other node) cut off from db", first)
        cases.check("c", "b", "tcp", False, "prod/db/ingress/isolation")
        cases.check("a", "b", "tcp", True, "prod/db-in/ingress/0")  # the client on the named port
        cases.check("a", "b", "udp", False, "prod/db/ingress/isolation")  # UDP is not in the rule
        cases.check("a", "b", "icmp", False, "prod/db/ingress/isolation")  # nor ICMP
        cases.check("a", "c", "icmp", True, None)  # pods no policy selects are not isolated
        cases.check("d", "c", "tcp", True, None)

        # db behind a ClusterIP: the trace follows the VIP's DNAT to its backend and judges it there.
        for name in ("a", "c"):
            sh("ip", "netns", "exec", ns_of[name], "ip", "route", "add", "default", "via", GATEWAY)
        kube.apply(DB_SERVICE)
        kube.apply(db_slice(ip["b"]))
        wait_until(lambda: fetch(a, DB_VIP, 80, 1) == ["b"], POLICY_SECONDS, "the client to reach db through its ClusterIP", first)
        assert fetch(c, DB_VIP, 80, 1) == ["-"], "db's ingress isolation drops c's connection to its ClusterIP too"
        for src, verdict, deciding in (("a", "allow", "prod/db-in/ingress/0"), ("c", "drop", "prod/db/ingress/isolation")):
            traced = cases.trace(src, DB_VIP, "tcp/80")
            assert traced["verdict"] == verdict and traced["agree"] is True, traced
            assert traced["service"]["id"] == "k8s:prod/db" and traced["ovs"]["verdict"] == "load-balanced", traced
            (backend,) = traced["service"]["backends"]
            assert backend["backend"] == f"{ip['b']}:8080" and backend["deciding"] == deciding == traced["deciding"], traced
            assert backend["ovs"]["verdict"] == verdict and backend["ovs"]["node"] == cases.node_of[src].name, traced
        traced = cases.trace("a", DB_VIP, "tcp/443")  # a port the Service does not have: not DNATed, dropped
        assert traced["verdict"] == "drop" and traced["agree"] is True and traced["ovs"]["verdict"] == "drop", traced
        kube.delete("EndpointSlice", "prod", "db-1")  # no backend at all: no flows, the forward table drops the packet
        wait_until(lambda: fetch(a, DB_VIP, 80, 1) == ["-"], POLICY_SECONDS, "the ClusterIP without a backend to go silent", first)
        traced = cases.trace("a", DB_VIP, "tcp/80")
        assert traced["verdict"] == "drop" and traced["agree"] is True and traced["ovs"]["verdict"] == "drop", traced
        assert traced["service"]["backends"] == [] and "has no backend for tcp/80" in traced["reasons"][0], traced

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
        cases.check("c", "b", "udp", True, "prod/db-udp-from-dev/ingress/0")
        cases.check("c", "a", "udp", False, "dev/tool/egress/isolation")  # the except address
        cases.check("c", "b", "tcp", False, "dev/tool/egress/isolation")  # tool's egress allows only UDP
        cases.check("c", "d", "icmp", False, "dev/tool/egress/isolation")  # from an egress-isolated pod, same node
        cases.check("a", "c", "tcp", True, None)  # to the egress-isolated pod: its replies come back across nodes
        cases.check("d", "c", "icmp", True, None)  # ping to the egress-isolated pod on its node: the reply passes
        cases.check("d", "b", "udp", False, "prod/db/ingress/isolation")  # other is not env=dev

        # Contiv's EPG rules on db's group `back`, judged first: a deny where NetworkPolicy
        # allows, an allow where NetworkPolicy drops, both allowing.
        guard = "default:back:default:guard:default:guard"
        for path, body in (
            ("/api/v1/policys/default:guard/", {"tenantName": "default", "policyName": "guard"}),
            ("/api/v1/rules/default:guard:1/", {"tenantName": "default", "policyName": "guard", "ruleId": "1", "direction": "in", "fromEndpointGroup": "front", "protocol": "tcp", "port": 8080, "action": "deny", "priority": 5}),
            ("/api/v1/rules/default:guard:2/", {"tenantName": "default", "policyName": "guard", "ruleId": "2", "direction": "in", "fromEndpointGroup": "front", "protocol": "udp", "port": 5353, "action": "allow", "priority": 9}),
            ("/api/v1/endpointGroups/default:back/", {"tenantName": "default", "groupName": "back", "networkName": "pods", "policies": ["guard"]}),
        ):  # fmt: skip
            status, reply = first.api_call("POST", path, body)
            assert status == 200, reply
        wait_until(lambda: answer(a, ip["b"]) == "-", POLICY_SECONDS, "the Contiv deny to close what db-in allows", first)
        traced = cases.check("a", "b", "tcp", False, f"{guard}:1:inRx")
        assert [(r["kind"], r["table"], r["action"], r["priority"]) for r in traced["rules"]] == [("contiv", "policy", "deny", 15)], traced
        traced = cases.check("d", "b", "udp", False, "prod/db/ingress/isolation")
        assert [(r["kind"], r["action"]) for r in traced["rules"]] == [("contiv", "allow"), ("kubernetes", "drop")], traced
        traced = cases.check("c", "b", "udp", True, "prod/db-udp-from-dev/ingress/0")
        assert [r["rule"] for r in traced["rules"]] == [f"{guard}:2:inRx", "dev/tool-out/egress/0", "prod/db-udp-from-dev/ingress/0"], traced

        # A flow behind the agent's back that drops what the model allows: a DISAGREEMENT, and
        # `ctl trace` (asked from the other node) prints it and exits 4.
        bridge = f"unix:{first.data / 'ovs' / 'contivVxlanBridge.mgmt'}"
        rogue = f"table=6,priority=65000,icmp,nw_src={ip['a']},nw_dst={ip['c']}"
        sh("ip", "netns", "exec", first.ns, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", bridge, f"{rogue},actions=drop")
        assert not reaches(a, ip["c"])
        traced = cases.trace("a", "c", "icmp")
        assert traced["verdict"] == "allow" and traced["agree"] is False and traced["ovs"]["verdict"] == "drop", traced
        assert traced["disagreements"] == [f"the source's node {first.name}: OVS says drop, the model allow"], traced
        ctl = [sys.executable, "-m", "contivd", "ctl", "--server", second.url(), "--token", second.token, "--ca-file", str(second.ca_file)]
        done = subprocess.run(["ip", "netns", "exec", second.ns, *ctl, "trace", ip["a"], ip["c"], "icmp"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 4 and "!!! DISAGREEMENT: the source's node" in done.stdout, (done.stdout, done.stderr)
        sh("ip", "netns", "exec", first.ns, "ovs-ofctl", "-O", "OpenFlow13", "--strict", "del-flows", bridge, rogue)
        cases.check("a", "c", "icmp", True, None)
        status, reply = first.api_call(
            "POST", "/api/v1/endpointGroups/default:back/", {"tenantName": "default", "groupName": "back", "networkName": "pods"}
        )
        assert status == 200, reply

        # Policies deleted: everything passes again.
        for ns, name in (("prod", "db-in"), ("prod", "db-udp-from-dev"), ("dev", "tool-out")):
            kube.delete("NetworkPolicy", ns, name)
        wait_until(lambda: answer(c, ip["b"]) == "b", POLICY_SECONDS, "the policies gone", first)
        assert reaches(a, ip["b"]) and reaches(c, ip["d"])

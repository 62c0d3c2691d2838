"""The incremental agent on real OVS: one pod's ADD or DEL sends only that pod's flows, and after
hundreds of random pod and policy changes on three nodes the periodic audit finds nothing that
differs from a full recomputation or from what the switches hold."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.cni_harness import Outcome, Pod, api_gets, create_network, netconf, run_plugin
from tests.support.nodes import Node, cluster_of_nodes, wait_until

pytestmark = [
    pytest.mark.cni,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

FLOWS_PER_LOCAL_POD = 10  # classifier, the host port's flow to the pod, spoof guard (IP and ARP), ARP reply, destination EPG,
# unicast forward; and for ingress from outside (docs/policy.md): service_lb's flow to np_ingress, the host port's two
# classifier flows trusting the node's own addresses (its private address, its NodePort source)
AUDIT_WAIT_SECONDS = 30  # the nodes audit every 5 s (--audit-interval 5)


def agent_stats(node: Node) -> dict[str, Any]:
    (info,) = api_gets(node, "/info")
    stats: dict[str, Any] = info["agent"]
    return stats


def wait_ready(node: Node) -> None:
    wait_until(lambda: run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0, 40, f"{node.name}'s CNI server", node)


def test_one_pod_attach_and_detach_send_only_its_flows(tmp_path: Path) -> None:
    pods: list[Pod] = []
    with cluster_of_nodes(tmp_path, 1, "--cni-socket", "cni.sock") as (node,):
        try:
            create_network(node, "pods", "198.18.20.0/24", "198.18.20.254")
            wait_ready(node)
            flows = None
            for _ in range(20):
                pod = Pod().create()
                pods.append(pod)
                assert pod.add(node, network="pods").status == 0
                # Every ADD answers once its own flows are on the switch: a pod's flows sent later
                # (a periodic full sync racing the attach lost its port once) would also be
                # counted against the next pod's ADD below.
                now = agent_stats(node)["flows"]
                assert flows is None or now - flows == FLOWS_PER_LOCAL_POD, f"ADD of pod {len(pods)} answered with {now - flows} new flows"
                flows = now
            before = agent_stats(node)
            extra = Pod().create()
            pods.append(extra)
            assert extra.add(node, network="pods").status == 0
            added = agent_stats(node)
            assert added["flow_mods"] - before["flow_mods"] == FLOWS_PER_LOCAL_POD, (before, added)
            assert added["flows"] - before["flows"] == FLOWS_PER_LOCAL_POD
            assert added["incremental_syncs"] > before["incremental_syncs"]
            assert extra.delete(node).status == 0
            deleted = agent_stats(node)
            assert deleted["flow_mods"] - added["flow_mods"] == FLOWS_PER_LOCAL_POD, (added, deleted)
            assert deleted["flows"] == before["flows"]
        finally:
            for pod in pods:
                pod.remove()


def write_through_elections(node: Node, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A write as a client makes it: retried while the cluster has no leader (an election on a
    loaded machine), an answer given before anything is written."""

    def attempt() -> tuple[int, Any] | None:
        status, answer = node.api_call(method, path, body)
        return None if status == 503 and "no leader is known" in str(answer) else (status, answer)

    answered: tuple[int, Any] = wait_until(attempt, 30, f"{method} {path} answered by a leader", node)
    return answered


def cni_through_elections(call: Callable[[], Outcome], node: Node) -> Outcome:
    """A CNI call as a runtime that honours "try again later" (code 11: the cluster is electing a
    leader, e.g. a leader stepping down on a loaded machine) makes it: repeated until answered
    otherwise. Retrying is safe: the plugin's ADD and DEL are idempotent per container."""

    def attempt() -> Outcome | None:
        out = call()
        return None if out.status != 0 and isinstance(out.output, dict) and out.output.get("code") == 11 else out

    answered: Outcome = wait_until(attempt, 60, "a CNI call answered by a leader", node)
    return answered


def _rule(rule_id: int, rng: random.Random) -> dict[str, Any]:
    return {
        "tenantName": "default",
        "policyName": "web",
        "ruleId": str(rule_id),
        "direction": rng.choice(["in", "out"]),
        "protocol": rng.choice(["tcp", "udp", "icmp"]),
        "port": rng.choice([0, 80, 443, 8080]),
        "action": rng.choice(["allow", "deny"]),
        "priority": rng.randint(1, 10),
    }


@pytest.mark.cluster
def test_random_pod_and_policy_changes_on_three_nodes_leave_no_drift(tmp_path: Path) -> None:
    rng = random.Random(12)
    live: list[tuple[Pod, Node]] = []
    created: list[Pod] = []
    rules: set[int] = set()
    with cluster_of_nodes(tmp_path, 3, "--cni-socket", "cni.sock", "--audit-interval", "5") as nodes:
        try:
            leader = nodes[0]
            create_network(leader, "pods", "198.18.21.0/24", "198.18.21.254")
            for path, body in (
                ("/api/v1/policys/default:web/", {"tenantName": "default", "policyName": "web"}),
                (
                    "/api/v1/endpointGroups/default:web/",
                    {"tenantName": "default", "groupName": "web", "networkName": "pods", "policies": ["web"]},
                ),
                ("/api/v1/endpointGroups/default:db/", {"tenantName": "default", "groupName": "db", "networkName": "pods"}),
            ):
                status, answer = leader.api_call("POST", path, body)
                assert status == 200, answer
            for node in nodes:
                wait_ready(node)
            for _ in range(500):
                roll = rng.random()
                if roll < 0.45 and len(live) < 24 or not live and roll < 0.8:
                    pod, node = Pod().create(), rng.choice(nodes)
                    created.append(pod)
                    group = rng.choice(["web", "db", ""])
                    out = cni_through_elections(lambda: pod.add(node, network="pods", group=group), node)
                    assert out.status == 0, out.output
                    live.append((pod, node))
                elif roll < 0.8:
                    pod, node = live.pop(rng.randrange(len(live)))
                    out = cni_through_elections(lambda: pod.delete(node), node)
                    assert out.status == 0, out.output
                    pod.remove()
                else:
                    rule_id = rng.randint(1, 8)
                    if rule_id in rules:
                        status, answer = write_through_elections(rng.choice(nodes), "DELETE", f"/api/v1/rules/default:web:{rule_id}/")
                        rules.discard(rule_id)
                    else:
                        status, answer = write_through_elections(
                            rng.choice(nodes), "POST", f"/api/v1/rules/default:web:{rule_id}/", _rule(rule_id, rng)
                        )
                        rules.add(rule_id)
                    assert status == 200, answer
            after_ops = {node.name: agent_stats(node)["audits"] for node in nodes}
            for node in nodes:
                stats = wait_until(
                    lambda n=node: (s := agent_stats(n))["audits"] > after_ops[n.name] and s,
                    AUDIT_WAIT_SECONDS,
                    f"an audit on {node.name} after the last change",
                    node,
                )
                assert stats["drift_total"] == 0, f"{node.name}: the incremental agent drifted: {stats}"
                assert stats["incremental_syncs"] > 100 and stats["sync_failures"] == 0, stats
                assert stats["flows"] > 0 and not stats["problems"], stats
        finally:
            for pod in created:
                pod.remove()

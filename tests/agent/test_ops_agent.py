"""Operability of a node running the agent (`--datapath ovs`, managed OVS, own network
namespace): READY=1 waits for the first reconcile, /readyz and /metrics report the datapath."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.datapath_nodes import OVS_NODE, PODS_NET, provision
from tests.support.nodes import Node, wait_until
from tests.support.waiting import receive_until

pytestmark = OVS_NODE

CALL_METRICS = "/metrics"


def samples(node: Node) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = node.api_call("GET", CALL_METRICS)
    assert status == 200, text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_ready_after_first_reconcile_and_datapath_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    node = Node(tmp_path)
    try:
        node.create_namespace()
        node.start()
        messages = receive_until(sock, "READY=1", timeout=60)
        assert any("waiting for the node agent's first reconcile" in m for m in messages), messages
        assert "last reconcile " in messages[-1] and "flows)" in messages[-1], messages[-1]
        status, ready = node.api_call("GET", "/readyz")
        assert status == 200 and (ready["ready"], ready["failing"], ready["raft"]["can_commit"]) == (True, {}, True), ready
        before = samples(node)
        assert before[("contivd_agent_first_reconcile_done", ())] == 1
        assert before[("contivd_agent_switch_connected", ())] == 1
        provision(node, [PODS_NET], ("c1", "c2"))

        def flows_for_two_pods() -> dict | None:
            now = samples(node)
            return now if now[("contivd_endpoints", (("node", "node1"),))] == 2 and sum_flows(now) > sum_flows(before) else None

        after = wait_until(flows_for_two_pods, 30, "metrics to show the pods' flows", node)
        assert after[("contivd_agent_reconciles_total", ())] >= before[("contivd_agent_reconciles_total", ())]
        assert after[("contivd_agent_last_reconcile_seconds", ())] > 0
        assert after[("contivd_ipam_allocated_addresses", (("network", "pods.default"),))] == 2
        started = time.monotonic()
        node.stop()
        assert time.monotonic() - started < 10
        assert any("STOPPING=1" in m for m in receive_until(sock, "STOPPING=1", timeout=1))
    finally:
        node.stop()
        sock.close()


def sum_flows(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    return sum(value for (name, _), value in found.items() if name == "contivd_agent_flows")

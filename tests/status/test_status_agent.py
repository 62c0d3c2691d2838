"""A node running the agent on real Open vSwitch reports its datapath on the status page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.datapath_nodes import OVS_NODE, PODS_NET
from tests.support.nodes import Node, wait_until

pytestmark = OVS_NODE


def test_agent_statistics_in_node_report_and_snapshot(tmp_path: Path) -> None:
    node = Node(tmp_path)
    try:
        node.create_namespace()
        node.start()
        assert wait_until(lambda: node.api_call("POST", *PODS_NET)[0] == 200, 40, "the pods network", node)

        def synced() -> dict[str, Any] | None:
            status, report = node.api_call("GET", "/status/api/node")
            agent = report.get("agent") if status == 200 else None
            return report if agent and agent["first_sync_done"] and agent["flows"] > 0 else None

        report = wait_until(synced, 60, "the agent's first reconcile in its report", node)
        agent = report["agent"]
        assert agent["switch_connected"] and agent["last_sync_unix"] > 0 and agent["last_sync_seconds"] > 0
        assert agent["last_error"] == "" and agent["problems"] == []
        status, snap = node.api_call("GET", "/status/api/snapshot")
        assert status == 200
        (member,) = snap["cluster"]["members"]
        assert member["name"] == "node1" and member["health"] == "ok", member
        assert member["agent"]["switch_connected"] and member["agent"]["flows"] > 0
    finally:
        node.stop()

"""A contivd node on its managed Open vSwitch in its own network namespace, and pods provisioned on it
through the API: tests/agent's datapath tests and the tests of other areas that need such a node."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.nodes import Node, attach_pod, reaches, wait_until

OVS_NODE = [  # the marker and skips of every test module that runs such a node
    pytest.mark.ovs,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]


@contextmanager
def started_node(root: Path, *extra: str) -> Iterator[Node]:
    """One node under `root` (`extra`: more `contivd run` flags), its API answering; stopped (and
    its namespaces deleted) on exit."""
    n = Node(root)
    try:
        n.create_namespace()
        n.start(*extra)
        wait_until(lambda: n.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 40, "the node's API", n)
        yield n
    finally:
        n.stop()


PODS_NET = (
    "/api/v1/networks/default:pods/",
    {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": "198.18.0.0/24", "gateway": "198.18.0.254"},
)


def provision(
    node: Node, objects: list[tuple[str, dict[str, Any]]], names: tuple[str, ...], group: str = "", attach: bool = True
) -> list[dict[str, Any]]:
    """POST `objects`, create endpoints `names` on node1's `pods` network (in `group`), attach pods."""
    for path, body in objects:
        status, answer = node.api_call("POST", path, body)
        assert status == 200, answer
    endpoints = []
    for name in names:
        request = {
            "TenantName": "default",
            "NetworkName": "pods",
            "ServiceName": group,
            "EndpointID": name,
            "ConfigEP": {"Container": name, "Host": "node1"},
        }
        status, answer = node.api_call("POST", "/plugin/createEndpoint", request)
        assert status == 200, answer
        endpoints.append(answer["EndpointConfig"])
    if attach:
        for index, endpoint in enumerate(endpoints):
            attach_pod(node, index, endpoint)
    return endpoints


def create_endpoints(nodes: list[Node], network: str) -> list[dict[str, Any]]:
    """One endpoint per node on `network`, homed on that node."""
    endpoints = []
    for node in nodes:
        name = f"{network}-{node.name}"
        request = {"TenantName": "default", "NetworkName": network, "EndpointID": name, "ConfigEP": {"Container": name, "Host": node.name}}
        status, answer = node.api_call("POST", "/plugin/createEndpoint", request)
        assert status == 200, answer
        endpoints.append(answer["EndpointConfig"])
    return endpoints


def assert_full_mesh(nodes: list[Node], pod: int, endpoints: list[dict[str, Any]], what: str) -> None:
    for source in nodes:
        for target in endpoints:
            if target["homingHost"] != source.name:
                address = target["ipAddress"]
                wait_until(lambda s=source, a=address: reaches(s.pods[pod], a), 40, f"{source.name}'s pod to reach {address} over {what}", source)

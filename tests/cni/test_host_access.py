"""Host access on a real node: a contivd node in its namespace with its managed OVS, pods added
through the `contiv` plugin. A pod on a network without a gateway gets `host1` (private
address from the global pvtSubnet, default route through the node) and reaches the node over
it and a service VIP over its data interface; the node reaches its pods; DEL removes both
ends; a pvtSubnet that overlaps the pod's network is refused with nothing left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cni.harness import Pod, create_network, holdings, netconf, run_plugin
from tests.nodes import Node, reaches, sh, wait_until

pytestmark = [
    pytest.mark.cni,
    pytest.mark.ovs,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

PVT_SUBNET = "198.18.0.0/16"
NODE_PRIVATE = "198.18.255.254"
NODE_IP = "198.19.200.1"  # the node's own address (what a kubelet or a remote client would use)
SERVICE_CIDR = "198.19.20.0/24"
SERVE_NAME = (
    "import socket,sys\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen()\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    c=s.accept()[0]; c.sendall(sys.argv[2].encode()); c.close()\n"
)
FETCH = "import socket,sys; c=socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2); print(c.recv(64).decode())"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path)
    try:
        n.create_namespace()
        sh("ip", "-n", n.ns, "addr", "add", f"{NODE_IP}/32", "dev", "lo")
        n.start("--cni-socket", "cni.sock")
        wait_until(lambda: n.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 40, "the node's API", n)
        status, glob = n.api_call("GET", "/api/v1/globals/global/")
        assert status == 200, glob
        body = {k: v for k, v in glob.items() if k not in ("key", "link-sets", "links")} | {"pvtSubnet": PVT_SUBNET}
        status, answer = n.api_call("POST", "/api/v1/globals/global/", body)
        assert status == 200, answer
        wait_until(lambda: run_plugin("STATUS", netconf(n, cniVersion="1.1.0")).status == 0, 40, "the CNI server", n)
        yield n
    finally:
        n.stop()


@pytest.fixture
def pods() -> Iterator[list[Pod]]:
    made: list[Pod] = []
    try:
        yield made
    finally:
        for pod in made:
            pod.remove()


def new_pod(pods: list[Pod]) -> Pod:
    pod = Pod().create()
    pods.append(pod)
    return pod


def in_node(node: Node, *command: str) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", node.ns, *command, check=False)


def fetch(namespace: str, address: str, port: int) -> str:
    out = sh("ip", "netns", "exec", namespace, sys.executable, "-c", FETCH, address, str(port), check=False)
    return out.stdout.strip() if out.returncode == 0 else ""


def serve(namespace: str, port: int, name: str) -> subprocess.Popen[str]:
    server = subprocess.Popen(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", SERVE_NAME, str(port), name], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    return server


def address_of(result: dict[str, Any], interface: str) -> str:
    index = next(i for i, entry in enumerate(result["interfaces"]) if entry["name"] == interface and "sandbox" in entry)
    return str(next(ip["address"] for ip in result["ips"] if ip["interface"] == index)).split("/")[0]


def node_links(node: Node) -> set[str]:
    return {line.split(":")[1].strip().split("@")[0] for line in sh("ip", "-n", node.ns, "-o", "link", "show").stdout.splitlines()}


def node_routes(node: Node) -> str:
    return sh("ip", "-n", node.ns, "route", "show").stdout


def test_pod_without_gateway_reaches_node_and_vip_and_del_removes_both_ends(node: Node, pods: list[Pod]) -> None:
    create_network(node, "flat", "198.19.10.0/24")
    create_network(node, "svc", SERVICE_CIDR, "198.19.20.254")
    service = {"tenantName": "default", "serviceName": "web", "networkName": "svc", "selectors": ["app=web"], "ports": ["80:8080:TCP"]}
    assert node.api_call("POST", "/api/v1/serviceLBs/default:web/", service)[0] == 200
    before = holdings(node, ("flat",))

    backend, client = new_pod(pods), new_pod(pods)
    served = backend.add(node, network="flat", runtimeConfig={"labels": {"app": "web"}}, serviceCidr=SERVICE_CIDR)
    assert served.status == 0, served.output
    added = client.add(node, network="flat", serviceCidr=SERVICE_CIDR)
    assert added.status == 0, added.output
    result = added.output
    data, private = address_of(result, "eth0"), address_of(result, "host1")
    assert private.startswith("198.18.") and private != address_of(served.output, "host1")
    assert {"dst": "0.0.0.0/0", "gw": NODE_PRIVATE} in result["routes"] and {"dst": SERVICE_CIDR} in result["routes"]
    pod_routes = client.exec("ip", "route", "show").stdout
    assert f"default via {NODE_PRIVATE} dev host1" in pod_routes and f"{SERVICE_CIDR} dev eth0" in pod_routes, pod_routes

    # the pod reaches the node through host1, ICMP and TCP
    assert reaches(client.name, NODE_IP)
    node_server = subprocess.Popen(
        ["ip", "netns", "exec", node.ns, sys.executable, "-c", SERVE_NAME, "7070", "node"], stdout=subprocess.PIPE, text=True
    )
    servers = [node_server]
    try:
        assert node_server.stdout is not None and node_server.stdout.readline().strip() == "ready"
        assert fetch(client.name, NODE_IP, 7070) == "node"
        # the node reaches the pod on its data address
        servers.append(serve(client.name, 8080, "client"))
        assert reaches(node.ns, data)
        assert fetch(node.ns, data, 8080) == "client"
        # the service VIP through the data interface
        servers.append(serve(backend.name, 8080, "backend"))
        vip = node.api_call("GET", "/api/v1/inspect/serviceLBs/default:web/")[1]["Oper"]["serviceVip"]
        wait_until(lambda: fetch(client.name, vip, 80) == "backend", 30, f"the VIP {vip}:80 through eth0", node)
        # pods do not reach each other through the node: the private addresses are not routed between them
        assert not reaches(client.name, address_of(served.output, "host1"))
    finally:
        for server in servers:
            server.kill()
            server.wait()

    host_ends = {entry["name"] for entry in result["interfaces"] if "sandbox" not in entry}
    assert host_ends <= node_links(node)
    for pod in (client, backend):
        assert pod.delete(node, network="flat").status == 0
    assert not host_ends & node_links(node), "DEL left a node end"
    routes = node_routes(node)
    assert private not in routes and data not in routes, routes
    assert holdings(node, ("flat",)) == before
    assert "host1" not in client.exec("ip", "link", "show").stdout


def test_private_subnet_overlapping_the_network_is_refused_and_nothing_is_left(node: Node, pods: list[Pod]) -> None:
    create_network(node, "clash", "198.18.5.0/24")
    before = holdings(node, ("clash",))
    links = node_links(node)
    pod = new_pod(pods)
    out = pod.add(node, network="clash")
    assert out.status != 0 and out.code == 7, out.output
    assert "pvtSubnet 198.18.0.0/16 overlaps the subnet 198.18.5.0/24" in out.output["msg"]
    assert holdings(node, ("clash",)) == before
    assert node_links(node) == links
    pod_links = [line.split(":")[1].strip() for line in pod.exec("ip", "-o", "link", "show").stdout.splitlines()]
    assert pod_links == ["lo"], pod_links


def test_node_reaches_its_pods_on_a_gateway_network_while_a_deny_between_pods_holds(node: Node, pods: list[Pod]) -> None:
    create_network(node, "routed", "198.19.11.0/24", "198.19.11.254")
    objects = [
        ("/api/v1/policys/default:db/", {"tenantName": "default", "policyName": "db"}),
        ("/api/v1/rules/default:db:deny-tcp/", {"tenantName": "default", "policyName": "db", "ruleId": "deny-tcp", "direction": "in", "protocol": "tcp", "action": "deny", "priority": 1}),
        ("/api/v1/endpointGroups/default:db/", {"tenantName": "default", "groupName": "db", "networkName": "routed", "policies": ["db"]}),
    ]  # fmt: skip
    for path, body in objects:
        status, answer = node.api_call("POST", path, body)
        assert status == 200, answer
    server_pod, client = new_pod(pods), new_pod(pods)
    served = server_pod.add(node, network="routed", group="db")
    assert served.status == 0, served.output
    assert client.add(node, network="routed").status == 0
    target = address_of(served.output, "eth0")
    assert "host1" not in server_pod.exec("ip", "link").stdout, "a network with a gateway needs no host access"
    server = serve(server_pod.name, 8080, "db")
    try:
        wait_until(lambda: reaches(node.ns, target), 30, f"the node to ping its pod {target}", node)
        assert fetch(node.ns, target, 8080) == "db", "the node's TCP (a kubelet probe) passes the pod's deny rule"
        assert reaches(client.name, target), "ICMP between the pods is not denied"
        assert fetch(client.name, target, 8080) == "", "the deny rule still holds between the pods"
        assert f"{target} dev cvhost-vxlan" in node_routes(node)
    finally:
        server.kill()
        server.wait()
    assert server_pod.delete(node, network="routed").status == 0
    wait_until(lambda: target not in node_routes(node), 30, "the node's route to the deleted pod to go", node)

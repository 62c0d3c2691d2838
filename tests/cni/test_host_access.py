"""Host access on a real node: a contivd node in its namespace with its managed OVS, pods added
through the `contiv` plugin. A pod on a network without a gateway gets `host1` (private
address from the global pvtSubnet, default route through the node) and reaches the node over
it and a service VIP over its data interface; the node reaches its pods (and `ctl trace` of
that traces its arrival through the host port, agreeing); DEL removes both
ends; a pvtSubnet that overlaps the pod's network is refused with nothing left behind. With
forwarding on (as on every Kubernetes node) contivd's iptables chains keep the node from
carrying pod → node → other pod, and masquerade pods' private traffic to the outside."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cni_harness import Pod, cni_node, create_network, deny_all_group, holdings, new_pod, set_private_subnet
from tests.support.nodes import Node, reaches, sh, wait_until
from tests.support.service_pods import first_answer, start_answering

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
SERVE_PEER = (  # answers each connection with the address it came from
    "import socket,sys\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen()\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    c, peer = s.accept(); c.sendall(peer[0].encode()); c.close()\n"
)
RECEIVE_UDP = (  # prints the first datagram on a port within 2 s, or nothing
    "import socket,sys\n"
    "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', int(sys.argv[1]))); s.settimeout(2)\n"
    "print('ready', flush=True)\n"
    "try:\n"
    "    print(s.recv(64).decode(), flush=True)\n"
    "except TimeoutError:\n"
    "    print('', flush=True)\n"
)
SEND_UDP = "import socket,sys,time\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nfor _ in range(5): s.sendto(b'hello', (sys.argv[1], int(sys.argv[2]))); time.sleep(0.2)"


def add_node_address(node: Node) -> None:
    sh("ip", "-n", node.ns, "addr", "add", f"{NODE_IP}/32", "dev", "lo")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with cni_node(Node(tmp_path), prepare=add_node_address) as n:
        set_private_subnet(n, PVT_SUBNET)
        yield n


def in_node(node: Node, *command: str) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", node.ns, *command, check=False)


def udp_arrives(sender: str, receiver: str, address: str, port: int) -> bool:
    """Does a datagram sent from `sender` to address:port arrive in `receiver` (within 2 s)?"""
    listener = start_answering(receiver, port, "", RECEIVE_UDP)
    try:
        sh("ip", "netns", "exec", sender, sys.executable, "-c", SEND_UDP, address, str(port), check=False)
        out, _ = listener.communicate(timeout=10)
    finally:
        listener.kill()
        listener.wait()
    return out.strip() == "hello"


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
    servers: list[subprocess.Popen[str]] = []
    try:
        servers.append(start_answering(node.ns, 7070, "node"))
        assert first_answer(client.name, NODE_IP, 7070) == "node"
        # the node reaches the pod on its data address
        servers.append(start_answering(client.name, 8080, "client"))
        assert reaches(node.ns, data)
        assert first_answer(node.ns, data, 8080) == "client"
        # `ctl trace` from the node's own (private) address, an address of no endpoint: the pod's
        # node traces its arrival through the host port, and it is delivered as the model says
        vsctl = ("ovs-vsctl", f"--db=unix:{node.data / 'ovs' / 'db.sock'}")
        host_port = in_node(node, *vsctl, "get", "interface", "cvhost-vxlan", "ofport").stdout.strip()
        for what in ("icmp", "tcp/8080"):
            status, traced = node.api_call("GET", f"/kubernetes/trace/{NODE_PRIVATE}/{data}/{what}")
            assert status == 200 and traced["verdict"] == "allow" and traced["agree"] is True, traced
            arrival = traced["ovs_destination"]
            assert arrival["verdict"] == "allow" and f",in_port={host_port}," in arrival["flow"] and "skipped" in traced["ovs"], traced
        # the service VIP through the data interface
        servers.append(start_answering(backend.name, 8080, "backend"))
        vip = node.api_call("GET", "/api/v1/inspect/serviceLBs/default:web/")[1]["Oper"]["serviceVip"]
        wait_until(lambda: first_answer(client.name, vip, 80) == "backend", 30, f"the VIP {vip}:80 through eth0", node)
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
    server = start_answering(server_pod.name, 8080, "db")
    try:
        wait_until(lambda: reaches(node.ns, target), 30, f"the node to ping its pod {target}", node)
        assert first_answer(node.ns, target, 8080) == "db", "the node's TCP (a kubelet probe) passes the pod's deny rule"
        assert reaches(client.name, target), "ICMP between the pods is not denied"
        assert first_answer(client.name, target, 8080) == "", "the deny rule still holds between the pods"
        assert f"{target} dev cvhost-vxlan" in node_routes(node)
    finally:
        server.kill()
        server.wait()
    assert server_pod.delete(node, network="routed").status == 0
    wait_until(lambda: target not in node_routes(node), 30, "the node's route to the deleted pod to go", node)


def forwarding_on(node: Node) -> None:
    assert in_node(node, "sysctl", "-w", "net.ipv4.ip_forward=1").returncode == 0


def test_node_with_forwarding_on_carries_no_traffic_between_pods(node: Node, pods: list[Pod]) -> None:
    forwarding_on(node)
    create_network(node, "flat", "198.19.10.0/24")
    create_network(node, "other", "198.19.12.0/24")
    create_network(node, "routed", "198.19.11.0/24", "198.19.11.254")
    deny_all_group(node, "db", "other")
    a, b, c = new_pod(pods), new_pod(pods), new_pod(pods)
    added = [a.add(node, network="flat"), b.add(node, network="other", group="db"), c.add(node, network="routed")]
    assert all(out.status == 0 for out in added), [out.output for out in added]
    b_data, b_private, c_data = address_of(added[1].output, "eth0"), address_of(added[1].output, "host1"), address_of(added[2].output, "eth0")
    # A's own route to B's private address through the node (its host1 subnet would ARP for it directly)
    assert a.exec("ip", "route", "add", f"{b_private}/32", "via", NODE_PRIVATE, "dev", "host1").returncode == 0
    servers = [start_answering(b.name, 8080, "b"), start_answering(c.name, 8080, "c")]
    try:
        assert first_answer(node.ns, b_data, 8080) == "b" and first_answer(node.ns, b_private, 8080) == "b", (
            "the node reaches a pod without a gateway"
        )
        wait_until(lambda: first_answer(node.ns, c_data, 8080) == "c", 30, "the node to reach its pod through the host port", node)

        def forwarded() -> list[str]:
            """What A's datagrams reach through the node: B is behind a deny rule, C has no policy.
            (Only one way: a pod answers a private address on its own host1 subnet, never
            through the node, so TCP would not complete anyway.)"""
            targets = {"B's data address": (b, b_data), "B's private address": (b, b_private), "C's data address": (c, c_data)}
            return [what for what, (pod, address) in targets.items() if udp_arrives(a.name, pod.name, address, 9090)]

        assert forwarded() == []
        assert first_answer(a.name, b_data, 8080) == "" and first_answer(a.name, c_data, 8080) == ""

        # what stops it is contivd's chain: emptied, the node carries them all, until the agent puts it
        # back (every NODE_RULES_CHECK_SECONDS: on a loaded machine that can fall between the flush and
        # the last probe, so flush and probe again until one round saw the chain empty throughout)
        def carried_while_emptied() -> bool:
            assert in_node(node, "iptables", "-F", "CONTIVD-FORWARD").returncode == 0
            return forwarded() == ["B's data address", "B's private address", "C's data address"]

        wait_until(carried_while_emptied, 90, "every datagram carried while CONTIVD-FORWARD is empty", node)
        wait_until(lambda: forwarded() == [], 60, "the agent to restore CONTIVD-FORWARD", node)
        assert first_answer(node.ns, b_data, 8080) == "b" and first_answer(node.ns, c_data, 8080) == "c"
    finally:
        for server in servers:
            server.kill()
            server.wait()
    jumps = in_node(node, "iptables", "-S", "FORWARD").stdout.splitlines()
    assert jumps.count("-A FORWARD -j CONTIVD-FORWARD") == 1, jumps


def test_pod_without_gateway_reaches_the_outside_masqueraded(node: Node, pods: list[Pod]) -> None:
    forwarding_on(node)
    outside, tag = f"cdt-{uuid.uuid4().hex[:6]}-o", uuid.uuid4().hex[:6]
    sh("ip", "netns", "add", outside)
    try:
        sh("ip", "-n", node.ns, "link", "add", f"cvo{tag}", "type", "veth", "peer", "name", "out0", "netns", outside)
        sh("ip", "-n", node.ns, "addr", "add", "198.19.250.1/24", "dev", f"cvo{tag}")
        sh("ip", "-n", node.ns, "link", "set", f"cvo{tag}", "up")
        sh("ip", "-n", outside, "addr", "add", "198.19.250.2/24", "dev", "out0")
        sh("ip", "-n", outside, "link", "set", "out0", "up")
        create_network(node, "flat", "198.19.10.0/24")
        pod = new_pod(pods)
        assert pod.add(node, network="flat").status == 0
        server = start_answering(outside, 9090, "", SERVE_PEER)
        try:
            assert first_answer(node.ns, "198.19.250.2", 9090) == "198.19.250.1"
            assert first_answer(pod.name, "198.19.250.2", 9090) == "198.19.250.1", "the pod's private address is masqueraded as the node's"
            rules = {name: in_node(node, "iptables", *args, "-S").stdout for name, args in (("filter", ()), ("nat", ("-t", "nat")))}
            assert f"-A CONTIVD-POSTROUTING -s {PVT_SUBNET} -j MASQUERADE" in rules["nat"], rules
            # contivd stops (a restart, an upgrade): its chains stay as they were, so neither the
            # pods' isolation nor their way out has a gap meanwhile
            assert node.proc is not None
            node.proc.send_signal(signal.SIGTERM)
            assert node.proc.wait(timeout=30) == 0
            assert {name: in_node(node, "iptables", *args, "-S").stdout for name, args in (("filter", ()), ("nat", ("-t", "nat")))} == rules
            assert first_answer(pod.name, "198.19.250.2", 9090) == "198.19.250.1"
        finally:
            server.kill()
            server.wait()
    finally:
        sh("ip", "netns", "del", outside, check=False)

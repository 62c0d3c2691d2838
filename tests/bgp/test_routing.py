"""Routing mode end to end: three contivd nodes (each its own single-node cluster, in its own
namespace, `--fwd-mode routing`) peer with one FRR router namespace running zebra + bgpd, which
installs the /32s it learns into its kernel and forwards between the nodes' uplinks. A pod on
node 1 pings and reaches TCP on pods of the other nodes (other networks) through the router,
and `ctl trace` of it agrees on both ends' switches; a stopped node's
routes are withdrawn and traffic between the others goes on; a deleted endpoint's route goes
from the router and from the other nodes' switches and its traffic stops; a deleted Bgp object takes
the node's routes and its router IP away."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.frr import TorRouter, frr_missing
from tests.support.nodes import Node, attach_pod, reaches, sh, wait_until

pytestmark = [
    pytest.mark.bgp,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
    pytest.mark.skipif(frr_missing() is not None, reason=str(frr_missing())),
]

TOR_AS = 65000
NODES = 3
ROUTING = ("--fwd-mode", "routing", "--net-mode", "vlan", "--vlan-uplinks", "uplink0")
TCP_PORT = 8080


def tor_ip(i: int) -> str:
    return f"198.18.{i}.1"


def router_ip(i: int) -> str:
    return f"198.18.{i}.2"


def tor_config() -> str:
    neighbors = "".join(
        f" neighbor {router_ip(i)} remote-as {TOR_AS + i}\n neighbor {router_ip(i)} timers 3 9\n neighbor {router_ip(i)} timers connect 1\n"
        for i in range(1, NODES + 1)
    )
    return f"router bgp {TOR_AS}\n bgp router-id 198.18.0.1\n no bgp ebgp-requires-policy\n{neighbors}"


@dataclass
class RoutedNode:
    index: int
    node: Node
    pod_ip: str = ""


@pytest.fixture
def routed(tmp_path: Path) -> Iterator[tuple[list[RoutedNode], TorRouter]]:
    tor = TorRouter(f"cdt-{uuid.uuid4().hex[:6]}-rt", tmp_path / "tor")
    nodes = [RoutedNode(i, Node(tmp_path, f"node{i}")) for i in range(1, NODES + 1)]
    try:
        sh("ip", "netns", "add", tor.ns)
        sh("ip", "-n", tor.ns, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", tor.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        for r in nodes:
            r.node.create_namespace()
            far = f"tor{r.index}"
            sh("ip", "-n", r.node.ns, "link", "add", "uplink0", "type", "veth", "peer", "name", far, "netns", tor.ns)
            sh("ip", "-n", tor.ns, "addr", "add", f"{tor_ip(r.index)}/24", "dev", far)
            # bgpd's own TCP leaves through this veth: its checksum must be filled in (OVS's
            # userspace datapath forwards frames as they are)
            sh("ip", "netns", "exec", tor.ns, "ethtool", "-K", far, "tx", "off")
            sh("ip", "-n", tor.ns, "link", "set", far, "up")
            sh("ip", "-n", r.node.ns, "link", "set", "uplink0", "up")
        tor.start(tor_config(), zebra=True)
        for r in nodes:
            r.node.start(*ROUTING)
        for r in nodes:
            wait_until(lambda n=r.node: n.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 90, f"{r.node.name}'s API", r.node)
        yield nodes, tor
    finally:
        for r in nodes:
            r.node.stop()
        tor.stop()
        sh("ip", "netns", "del", tor.ns, check=False)


def _call(node: Node, method: str, path: str, body: Any = None) -> Any:
    status, answer = node.api_call(method, path, body)
    assert status == 200, (method, path, answer)
    return answer


def bring_up(r: RoutedNode) -> None:
    """The node's pod network, one pod on it with its default route via the gateway, its Bgp object."""
    node, i = r.node, r.index
    subnet = f"198.18.{10 * i}"
    network = {"tenantName": "default", "networkName": "pods", "encap": "vlan", "subnet": f"{subnet}.0/24", "gateway": f"{subnet}.254"}
    _call(node, "POST", "/api/v1/networks/default:pods/", network)
    request = {"TenantName": "default", "NetworkName": "pods", "EndpointID": "pod", "ConfigEP": {"Container": "pod", "Host": node.name}}
    endpoint = _call(node, "POST", "/plugin/createEndpoint", request)["EndpointConfig"]
    attach_pod(node, 0, endpoint, bridge="contivVlanBridge")
    sh("ip", "netns", "exec", node.pods[0], "ip", "route", "add", "default", "via", f"{subnet}.254")
    r.pod_ip = endpoint["ipAddress"]
    bgp = {"hostname": node.name, "routerip": f"{router_ip(i)}/24", "as": str(TOR_AS + i), "neighbor": tor_ip(i), "neighbor-as": str(TOR_AS)}
    _call(node, "POST", f"/api/v1/Bgps/{node.name}/", bgp)


def kernel_route(tor: TorRouter, ip: str) -> str:
    return sh("ip", "-n", tor.ns, "route", "show", f"{ip}/32").stdout.strip()


def learned(node: Node) -> list[str]:
    oper = _call(node, "GET", f"/api/v1/inspect/Bgps/{node.name}/").get("Oper") or {}
    return list(oper.get("routes") or [])


def flows(node: Node) -> str:
    mgmt = f"unix:{node.data / 'ovs' / 'contivVlanBridge.mgmt'}"
    return sh("ip", "netns", "exec", node.ns, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", mgmt, check=False).stdout


def route_flow(node: Node, ip: str) -> bool:
    """Whether the node's switch holds the route flow sending pods' packets for `ip`/32 to the router."""
    return f"dl_dst=00:00:11:11:11:11,nw_dst={ip} " in flows(node)


def router_port_addresses(node: Node) -> str:
    return sh("ip", "-n", node.ns, "-4", "addr", "show", "dev", "cvrouter", check=False).stdout


def tcp_answer(client_pod: str, server_pod: str, address: str) -> str:
    """Start a one-shot TCP server in `server_pod`, connect from `client_pod`, return what it read."""
    serve = f"import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('0.0.0.0',{TCP_PORT}));s.listen();s.settimeout(30);c,_=s.accept();c.sendall(b'routed');c.close()"
    server = subprocess.Popen(["ip", "netns", "exec", server_pod, sys.executable, "-c", serve])
    try:
        connect = f"import socket,time\nfor _ in range(50):\n try:\n  c=socket.create_connection(('{address}',{TCP_PORT}),timeout=3);break\n except OSError:time.sleep(0.2)\nprint(c.recv(100).decode())"
        done = sh("ip", "netns", "exec", client_pod, sys.executable, "-c", connect, check=False)
        return done.stdout.strip()
    finally:
        server.kill()
        server.wait()


def test_pods_on_different_nodes_reach_each_other_through_the_router(routed: tuple[list[RoutedNode], TorRouter]) -> None:
    nodes, tor = routed
    for r in nodes:
        bring_up(r)
    one, two, three = nodes
    for r in nodes:
        wait_until(lambda r=r: tor.peer_state(router_ip(r.index)) == "Established", 90, f"{r.node.name}'s BGP session", r.node)
        wait_until(lambda r=r: kernel_route(tor, r.pod_ip), 60, f"{r.node.name}'s pod route in the router's kernel", r.node)
    for r in (two, three):
        wait_until(lambda r=r: reaches(one.node.pods[0], r.pod_ip), 60, f"node1's pod pinging {r.node.name}'s through the router", one.node)
    assert reaches(three.node.pods[0], two.pod_ip)
    assert route_flow(one.node, two.pod_ip) and route_flow(one.node, three.pod_ip)
    assert tcp_answer(one.node.pods[0], two.node.pods[0], two.pod_ip) == "routed"
    # `ctl trace` of that packet between two networks, on each end's node (each node is its own
    # cluster, so the other end is an outside address there): node1's OVS sends it to the ToR
    # (the pod addressed its gateway, the anycast MAC), node2's delivers it as routed in, untagged.
    path = f"/kubernetes/trace/{one.pod_ip}/{two.pod_ip}/tcp/{TCP_PORT}"
    status, traced = one.node.api_call("GET", path)
    assert status == 200 and traced["verdict"] == "allow" and traced["agree"] is True, traced
    assert traced["ovs"]["verdict"] == "allow" and ",dl_dst=00:00:11:11:11:11," in traced["ovs"]["flow"], traced
    status, traced = two.node.api_call("GET", path)
    assert status == 200 and traced["verdict"] == "allow" and traced["agree"] is True, traced
    uplink = sh(
        "ip", "netns", "exec", two.node.ns, "ovs-vsctl", f"--db=unix:{two.node.data / 'ovs' / 'db.sock'}", "get", "interface", "uplink0", "ofport"
    )
    arrival = traced["ovs_destination"]
    assert arrival["verdict"] == "allow" and f",in_port={uplink.stdout.strip()}," in arrival["flow"] and "dl_vlan" not in arrival["flow"], traced

    # A node stopped: its session closes, its routes are withdrawn, the others go on.
    three.node.stop()
    wait_until(lambda: not kernel_route(tor, three.pod_ip), 60, "node3's pod route withdrawn from the router", one.node)
    wait_until(lambda: f"{three.pod_ip}/32" not in learned(one.node), 30, "node3's pod route withdrawn on node1", one.node)
    assert not reaches(one.node.pods[0], three.pod_ip)
    assert reaches(one.node.pods[0], two.pod_ip), "traffic between the remaining nodes is unaffected"

    # An endpoint deleted: its route goes from the router and from node1; its traffic stops.
    _call(two.node, "POST", "/plugin/deleteEndpoint", {"TenantName": "default", "NetworkName": "pods", "EndpointID": "pod"})
    wait_until(lambda: not kernel_route(tor, two.pod_ip), 60, "the deleted endpoint's route withdrawn from the router", two.node)
    wait_until(lambda: f"{two.pod_ip}/32" not in learned(one.node), 30, "the deleted endpoint's route gone on node1", one.node)
    wait_until(lambda: not route_flow(one.node, two.pod_ip), 30, "the deleted endpoint's route flow gone from node1's switch", one.node)
    wait_until(lambda: not reaches(one.node.pods[0], two.pod_ip), 30, "traffic to the deleted endpoint stopped", one.node)

    # node1's Bgp object deleted: the session ends, node1's pod route leaves the router and the
    # router IP leaves node1's router port; nothing is bridged to the uplink instead.
    _call(one.node, "DELETE", f"/api/v1/Bgps/{one.node.name}/")
    wait_until(lambda: not kernel_route(tor, one.pod_ip), 60, "node1's route withdrawn with its Bgp object", one.node)
    wait_until(lambda: router_ip(1) not in router_port_addresses(one.node), 30, "the router IP gone from cvrouter", one.node)
    assert "push_vlan" not in flows(one.node)

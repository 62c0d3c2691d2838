"""A contivd node peering with a real router: Debian's FRR bgpd as the top-of-rack router in its
own namespace, linked to the node's namespace. The node's Bgp object starts the session; its
endpoints' /32s appear on the router and go away on delete; routes the router announces show
in `Bgp` inspect; a bad AS is refused and changes nothing; a node that dies or is cut off has
its routes withdrawn."""

from __future__ import annotations

import json
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

from tests.support.contivd_nodes import CHROMIUM
from tests.support.frr import TorRouter, frr_missing
from tests.support.nodes import Node, sh, wait_until

pytestmark = [
    pytest.mark.bgp,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
    pytest.mark.skipif(frr_missing() is not None, reason=str(frr_missing())),
]

TOR_IP, NODE_IP = "198.19.250.1", "198.19.250.2"
TOR_AS, NODE_AS = 65000, 65001
TOR_NETWORK = "198.19.251.0/24"  # announced by the router: shows in the node's learned routes
BGP_OBJECT = {"hostname": "node1", "routerip": f"{NODE_IP}/24", "as": str(NODE_AS), "neighbor": TOR_IP, "neighbor-as": str(TOR_AS)}
TOR_CONFIG = f"""router bgp {TOR_AS}
 bgp router-id {TOR_IP}
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor {NODE_IP} remote-as {NODE_AS}
 neighbor {NODE_IP} timers 3 9
 neighbor {NODE_IP} timers connect 1
 address-family ipv4 unicast
  network {TOR_NETWORK}
 exit-address-family
"""


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[tuple[Node, TorRouter]]:
    node = Node(tmp_path)
    tor = TorRouter(f"cdt-{uuid.uuid4().hex[:6]}-tor", tmp_path / "tor")
    try:
        node.create_namespace()
        sh("ip", "netns", "add", tor.ns)
        sh("ip", "-n", tor.ns, "link", "set", "lo", "up")
        sh("ip", "-n", node.ns, "link", "add", "uplink0", "type", "veth", "peer", "name", "tor0", "netns", tor.ns)
        sh("ip", "-n", node.ns, "addr", "add", f"{NODE_IP}/24", "dev", "uplink0")
        sh("ip", "-n", tor.ns, "addr", "add", f"{TOR_IP}/24", "dev", "tor0")
        sh("ip", "-n", node.ns, "link", "set", "uplink0", "up")
        sh("ip", "-n", tor.ns, "link", "set", "tor0", "up")
        tor.start(TOR_CONFIG)
        node.start()
        wait_until(lambda: node.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 40, "the node's API", node)
        yield node, tor
    finally:
        node.stop()
        tor.stop()
        sh("ip", "netns", "del", tor.ns, check=False)


def bgp_oper(node: Node) -> dict[str, Any]:
    status, answer = node.api_call("GET", "/api/v1/inspect/Bgps/node1/")
    assert status == 200, answer
    oper: dict[str, Any] = answer["Oper"]
    return oper


def status_bgp(node: Node) -> Any:
    """The node's BGP row in the status page's model (its member in the snapshot's cluster part),
    checked against the node's own report."""
    status, snapshot = node.api_call("GET", "/status/api/snapshot")
    assert status == 200, snapshot
    (member,) = [m for m in snapshot["cluster"]["members"] if m["name"] == "node1"]
    status, report = node.api_call("GET", "/status/api/node")
    assert status == 200 and report["bgp"]["neighbor"] == member["bgp"]["neighbor"], (report, member)
    return member["bgp"]


# The status page in Debian's chromium, run inside the node's namespace (where its API listens):
# prints the cells of node1's row in the BGP table once that row shows an error.
PAGE_BGP_ROW = """
import json, sys
from playwright.sync_api import sync_playwright
from tests.support.contivd_nodes import CHROMIUM, CHROMIUM_ARGS
ROW = "[...document.querySelectorAll('#bgp tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent))" \\
      ".find((cells) => cells[0] === 'node1')"
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
    page = browser.new_page()
    errors = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(sys.argv[1])
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    page.wait_for_function(f"({ROW} || [])[7] !== undefined && {ROW}[7] !== 'none'", timeout=15000)
    assert page.is_visible("#bgp"), "the BGP table is shown when a node peers"
    assert not errors, errors
    print(json.dumps(page.evaluate(ROW)))
    browser.close()
"""


def page_bgp_row(node: Node) -> list[str]:
    """node1's row in the page's BGP table, as chromium renders it."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["ip", "netns", "exec", node.ns, sys.executable, "-c", PAGE_BGP_ROW, node.url() + "/"],
        capture_output=True, text=True, timeout=90, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    cells: list[str] = json.loads(done.stdout)
    return cells


def create_endpoint(node: Node, name: str) -> dict[str, Any]:
    request = {"TenantName": "default", "NetworkName": "pods", "EndpointID": name, "ConfigEP": {"Container": name, "Host": "node1"}}
    status, answer = node.api_call("POST", "/plugin/createEndpoint", request)
    assert status == 200, answer
    endpoint: dict[str, Any] = answer["EndpointConfig"]
    return endpoint


def test_the_node_peers_with_its_router_and_advertises_its_endpoints(fabric: tuple[Node, TorRouter]) -> None:
    node, tor = fabric
    status, answer = node.api_call("POST", "/api/v1/Bgps/node1/", BGP_OBJECT)
    assert status == 200, answer
    wait_until(lambda: tor.peer_state(NODE_IP) == "Established", 40, "the BGP session on the router", node)
    oper = wait_until(lambda: (o := bgp_oper(node)).get("numRoutes") and o, 20, "the router's route in Bgp inspect", node)
    assert oper == {"neighborStatus": "established", "adminStatus": "up", "routes": [TOR_NETWORK], "numRoutes": 1}
    peering = {"neighbor": TOR_IP, "neighborAs": TOR_AS, "localAs": NODE_AS, "neighborStatus": "established", "adminStatus": "up"}
    assert status_bgp(node) == {**peering, "numRoutes": 1, "routes": [TOR_NETWORK], "error": ""}

    network = {"tenantName": "default", "networkName": "pods", "encap": "vlan", "subnet": "198.18.40.0/24", "gateway": "198.18.40.254"}
    status, answer = node.api_call("POST", "/api/v1/networks/default:pods/", network)
    assert status == 200, answer
    first, second = create_endpoint(node, "ep1"), create_endpoint(node, "ep2")
    wanted = {f"{first['ipAddress']}/32", f"{second['ipAddress']}/32"}
    wait_until(lambda: wanted <= set(tor.routes()), 20, "the endpoints' /32s on the router", node)
    (path,) = tor.routes()[f"{first['ipAddress']}/32"]
    assert path["nexthops"][0]["ip"] == NODE_IP

    status, answer = node.api_call("POST", "/plugin/deleteEndpoint", {"TenantName": "default", "NetworkName": "pods", "EndpointID": "ep1"})
    assert status == 200, answer
    wait_until(lambda: f"{first['ipAddress']}/32" not in tor.routes(), 20, "the deleted endpoint's route withdrawn", node)
    assert f"{second['ipAddress']}/32" in tor.routes()

    # A bad AS is refused at the API and the running session is left as it was.
    status, answer = node.api_call("POST", "/api/v1/Bgps/node1/", {**BGP_OBJECT, "neighbor-as": "AS65000"})
    assert 400 <= status < 500 and "AS number" in str(answer), answer
    assert tor.peer_state(NODE_IP) == "Established"
    assert f"{second['ipAddress']}/32" in tor.routes()

    # An AS the API accepts but BGP cannot use: the status page shows the Error beside the session left running.
    status, answer = node.api_call("POST", "/api/v1/Bgps/node1/", {**BGP_OBJECT, "neighbor-as": "4294967296"})
    assert status == 200, answer
    shown = wait_until(lambda: (b := status_bgp(node)) and b["error"] and b, 20, "the unusable Bgp object's error on the status page", node)
    assert "neighbor-as '4294967296' is not an AS number" in shown["error"] and shown["neighborStatus"] == "established", shown
    assert tor.peer_state(NODE_IP) == "Established"
    if os.path.exists(CHROMIUM):  # the page itself (Debian's chromium: packaging/deps.sh installs it)
        cells = page_bgp_row(node)
        assert cells[:6] == ["node1", f"{TOR_IP} AS {TOR_AS}", str(NODE_AS), "established", "up", "1"], cells
        assert cells[6] == TOR_NETWORK and "is not an AS number" in cells[7], cells

    # Deleting the Bgp object ends the session: the router withdraws the node's routes.
    status, answer = node.api_call("DELETE", "/api/v1/Bgps/node1/")
    assert status == 200, answer
    wait_until(lambda: f"{second['ipAddress']}/32" not in tor.routes(), 20, "the routes withdrawn with the Bgp object", node)


def test_a_lost_node_has_its_routes_withdrawn(fabric: tuple[Node, TorRouter]) -> None:
    node, tor = fabric
    network = {"tenantName": "default", "networkName": "pods", "encap": "vlan", "subnet": "198.18.41.0/24", "gateway": "198.18.41.254"}
    assert node.api_call("POST", "/api/v1/networks/default:pods/", network)[0] == 200
    endpoint = create_endpoint(node, "ep1")
    assert node.api_call("POST", "/api/v1/Bgps/node1/", BGP_OBJECT)[0] == 200
    prefix = f"{endpoint['ipAddress']}/32"
    wait_until(lambda: prefix in tor.routes(), 40, "the endpoint's route on the router", node)

    # Cut off (the link goes down on the router's side): the hold timer (9 s) withdraws it.
    sh("ip", "-n", tor.ns, "link", "set", "tor0", "down")
    wait_until(lambda: prefix not in tor.routes(), 30, "the cut-off node's routes withdrawn by the hold timer", node)
    sh("ip", "-n", tor.ns, "link", "set", "tor0", "up")
    wait_until(lambda: prefix in tor.routes(), 60, "the route back once the link is", node)

    # contivd killed: ExaBGP dies with it (no stale advertisements from an orphaned speaker).
    assert node.proc is not None
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait()
    wait_until(lambda: prefix not in tor.routes(), 20, "the killed node's routes withdrawn", node)

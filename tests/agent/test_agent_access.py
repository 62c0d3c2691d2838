"""Who may reach a node's agent API and its OpenFlow controller, tried on a real node (managed OVS
in a network namespace) as root and as the unprivileged user nobody (`setpriv`; it runs only
curl and the system's python3 with the standard library). Over TCP the agent API answers the
netmaster's signed calls only: no loopback caller, no token (even an admin's), no forged
signature; root uses the agent socket. ovs-vswitchd reaches the controller over a root-only unix
socket, and contivd listens on no TCP port for OpenFlow."""

from __future__ import annotations

import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.datapath_nodes import OVS_NODE, PODS_NET, provision, started_node
from tests.support.nodes import Node, reaches, sh, wait_until
from tests.support.waiting import free_ports

pytestmark = OVS_NODE

NOBODY = ("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups")
# Run as nobody by /usr/bin/python3 (the repo's python is not readable to it): how connecting to a unix socket ends.
CONNECT = "import socket,sys\ntry:\n    socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print('connected')\nexcept OSError as e:\n    print(type(e).__name__)"


@pytest.fixture
def node() -> Iterator[Node]:
    """A node under a directory every user may enter (pytest's own is root-only), so that only
    contivd's permissions keep nobody from its sockets."""
    root = Path(tempfile.mkdtemp(prefix="cdt-access-", dir="/tmp"))
    root.chmod(0o755)
    try:
        with started_node(root) as n:
            yield n
    finally:
        shutil.rmtree(root, ignore_errors=True)


def curl(node: Node, method: str, url: str, *options: str, user: tuple[str, ...] = ()) -> tuple[int, str]:
    """(HTTP status, body) of one request from the node's namespace, as `user` (root when empty);
    status 0 when no connection was made."""
    out = sh("ip", "netns", "exec", node.ns, *user, "curl", "-sS", "-X", method, "-w", "\n%{http_code}", *options, url, check=False)
    body, _, status = out.stdout.rpartition("\n")
    return int(status or 0), body + out.stderr


def bridge_ports(node: Node) -> str:
    return sh("ip", "netns", "exec", node.ns, "ovs-vsctl", f"--db=unix:{node.data / 'ovs' / 'db.sock'}", "list-ports", "contivVxlanBridge").stdout


def test_agent_api_over_tcp_answers_signed_calls_only(node: Node) -> None:
    endpoints = provision(node, [PODS_NET], ("c1", "c2"))
    wait_until(lambda: reaches(node.pods[0], endpoints[1]["ipAddress"]), 30, "the pods to reach each other", node)
    agent = f"http://{node.host}:{node.agent}"
    reclaim = f"/debug/reclaimEndpoint/{endpoints[1]['id']}"
    status, minted = node.api_call("POST", "/api/v1/auth/tokens/agent-admin/", {"role": "admin"})
    assert status == 200, minted
    callers = {
        "root on loopback": (),
        "an admin token": ("-H", f"Authorization: Bearer {minted['token']}"),
        "a forged node signature": ("-H", "X-Contivd-Signature: 1700000000.000:" + "0" * 64),
    }
    for caller, headers in callers.items():
        for method, path in (("GET", "/inspect/driver"), ("DELETE", reclaim)):
            status, body = curl(node, method, agent + path, "-H", "Accept: application/json", *headers)
            assert status == 401, (caller, method, path, body)
            if caller != "a forged node signature":  # that one is told its signature is invalid
                assert "signed calls only" in body and str(node.agent_socket) in body, (caller, body)  # names the way in
    status, body = curl(node, "DELETE", agent + reclaim, user=NOBODY)
    assert status == 401 and "signed calls only" in body, body
    # Nothing changed: the port is on the bridge, the endpoint in the store, the pods still talk.
    assert "vh1" in bridge_ports(node)
    assert node.api_call("GET", f"/api/v1/inspect/endpoints/{endpoints[1]['id']}/")[0] == 200
    assert reaches(node.pods[0], endpoints[1]["ipAddress"]), "the refused reclaim changed nothing"
    # Root over the agent socket is answered; the netmaster's own calls (epcleanup) go there too.
    status, driver = node.agent_call("GET", "/inspect/driver")
    assert status == 200 and driver["vxlan"]["ports"] == 2, driver
    status, answer = node.api_call("DELETE", "/debug/epcleanup/tenant/default/ep/c2")
    assert status == 200, answer
    wait_until(lambda: "vh1" not in bridge_ports(node), 30, "the reclaimed port to leave the bridge", node)


def wait_controller_connected(node: Node, target: str) -> None:
    """Until OVS reports the bridge's one controller, `target`, connected (vswitchd writes
    is_connected lazily), and the agent its switch."""
    wait_until(lambda: node.agent_call("GET", "/inspect/driver")[1]["vxlan"]["connected"], 30, "the switch to connect", node)
    db = f"--db=unix:{node.data / 'ovs' / 'db.sock'}"

    def controllers() -> list[tuple[str, str]]:
        listed = sh("ip", "netns", "exec", node.ns, "ovs-vsctl", db, "--columns=target,is_connected", "list", "controller").stdout
        return re.findall(r'target\s*: "([^"]+)"\s*is_connected\s*: (\w+)', listed)

    wait_until(lambda: controllers() == [(target, "true")], 30, f"OVS to report its controller {target} connected", node)


def test_sockets_are_root_only_and_openflow_comes_in_over_unix(node: Node) -> None:
    wait_controller_connected(node, f"unix:{node.openflow_socket}")
    for socket_path in (node.agent_socket, node.openflow_socket):
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600 and socket_path.stat().st_uid == 0, socket_path
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700, socket_path.parent
        out = sh("ip", "netns", "exec", node.ns, *NOBODY, "/usr/bin/python3", "-c", CONNECT, str(socket_path))
        assert out.stdout.strip() == "PermissionError", (socket_path, out.stdout, out.stderr)
        status, body = curl(node, "GET", "http://agent/inspect/driver", "--unix-socket", str(socket_path), user=NOBODY)
        assert status == 0, body
    # contivd listens on TCP for its API, Raft and the agent API's signed calls only: no OpenFlow port.
    assert node.proc is not None
    listening = sh("ip", "netns", "exec", node.ns, "ss", "-Hltnp").stdout
    ports = {int(line.split()[3].rpartition(":")[2]) for line in listening.splitlines() if f"pid={node.proc.pid}," in line}
    assert ports == {node.api, node.raft, node.agent}, listening


def test_a_second_node_on_the_same_agent_socket_stops_with_a_clear_message(node: Node) -> None:
    second = Node(node.data.parent, name="node2")
    try:
        second.create_namespace()
        second.start("--agent-socket", str(node.agent_socket))
        assert second.proc is not None and second.proc.wait(timeout=60) == 1, second.log_text()
        assert f"cannot start: {node.agent_socket} is served by another process" in second.log_text(), second.log_text()
    finally:
        second.stop()
    assert node.agent_call("GET", "/inspect/driver")[0] == 200, "the first node keeps its socket"


def test_a_loopback_openflow_port_still_works_and_is_logged_as_less_safe(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    with started_node(tmp_path, "--openflow-listen", f"127.0.0.1:{port}") as node:
        wait_controller_connected(node, f"tcp:127.0.0.1:{port}")
        assert (
            f"OpenFlow controller on TCP 127.0.0.1:{port}: any local process can connect to it as the switch"
            in (node.data / "contivd.log").read_text()
        )
        assert not node.openflow_socket.exists()

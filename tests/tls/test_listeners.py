"""TLS on every listener, tried as an operator on another host would: nodes in network
namespaces on a fabric (tests/support/nodes.py), calls from one node's namespace to another node's
addresses. Clear HTTP is refused, TLS with the cluster CA accepted, a wrong CA rejected;
followers forward writes to the leader over verified TLS; `contivd ctl` trusts the server by
--ca-file or by --fingerprint, and tells an untrusting user the fingerprint to check."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contivd.tls.fingerprint import fingerprint_pem
from contivd.tls.pki import create_ca
from tests.support.nodes import Node, cluster_of_nodes, sh, wait_until

pytestmark = [
    pytest.mark.ovs,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

# argv: method, url, verify ("" = system CAs, "plain" = no TLS expected, else a CA file), token
PROBE = (
    "import httpx,json,ssl,sys; v=sys.argv[3]; h={'Accept': 'application/json', 'Authorization': 'Bearer '+sys.argv[4]};\n"
    "try:\n"
    "    r=httpx.request(sys.argv[1], sys.argv[2], headers=h, timeout=10, verify=ssl.create_default_context(cafile=v) if v not in ('', 'plain') else True)\n"
    "    print(json.dumps([r.status_code, r.text[:2000]]))\n"
    "except httpx.HTTPError as exc:\n"
    "    print(json.dumps([0, repr(exc)]))\n"
)


def probe(client: Node, url: str, verify: str = "", method: str = "GET") -> tuple[int, str]:
    """One request from `client`'s namespace: (status, body) or (0, the error)."""
    out = sh("ip", "netns", "exec", client.ns, sys.executable, "-c", PROBE, method, url, verify, client.token)
    status, text = json.loads(out.stdout)
    return status, text


def ctl(client: Node, *args: str) -> tuple[int, str]:
    out = sh("ip", "netns", "exec", client.ns, sys.executable, "-m", "contivd", "ctl", "--token", client.token, *args, check=False)
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with cluster_of_nodes(tmp_path_factory.mktemp("tls"), 2) as started:
        yield started


@pytest.fixture(scope="module")
def wrong_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wrong-ca") / "ca.crt"
    path.write_text(create_ca("not this cluster").certificate)
    return path


def listeners(node: Node) -> dict[str, tuple[int, str, int]]:
    """Every listener of `node` with a path and what it answers a caller with an admin token over
    verified TLS: 200, but 401 from the agent API (it answers the netmaster's signed calls only)."""
    return {"api": (node.api, "/api/v1/tenants/", 200), "status page": (node.api, "/", 200), "agent API": (node.agent, "/inspect/driver", 401)}


def test_one_cluster_ca_and_private_node_keys(nodes: list[Node]) -> None:
    first, second = nodes
    assert first.ca_file.read_text() == second.ca_file.read_text()
    for node in nodes:
        assert (node.data / "tls" / "node.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("listener", ["api", "status page", "agent API"])
def test_listener_refuses_clear_http_from_another_host(nodes: list[Node], listener: str) -> None:
    server, client = nodes
    port, path, _ = listeners(server)[listener]
    status, error = probe(client, f"http://{server.host}:{port}{path}", "plain")
    assert status == 0, f"clear HTTP was answered {status}: {error}"


@pytest.mark.parametrize("listener", ["api", "status page", "agent API"])
def test_listener_accepts_tls_with_the_cluster_ca_and_rejects_another(nodes: list[Node], wrong_ca: Path, listener: str) -> None:
    server, client = nodes
    port, path, answered = listeners(server)[listener]
    url = f"https://{server.host}:{port}{path}"
    status, text = probe(client, url, str(client.ca_file))
    assert status == answered, text
    status, error = probe(client, url, str(wrong_ca))
    assert status == 0 and "CERTIFICATE_VERIFY_FAILED" in error, error


def _leader_and_follower(nodes: list[Node]) -> tuple[Node, Node]:
    def roles() -> dict[str, Node] | None:
        by_role = {}
        for node in nodes:
            status, info = node.api_call("GET", "/info")
            if status != 200:
                return None
            by_role[info["current-state"]] = node
        return by_role if {"leader", "follower"} <= set(by_role) else None

    found = wait_until(roles, 60, "a leader and a follower", nodes[0])
    return found["leader"], found["follower"]


def test_followers_forward_writes_to_the_leader_over_tls(nodes: list[Node]) -> None:
    leader, follower = _leader_and_follower(nodes)
    network = {"tenantName": "default", "networkName": "tlsnet", "encap": "vxlan", "subnet": "198.18.60.0/24", "gateway": "198.18.60.254"}
    status, answer = follower.api_call("POST", "/api/v1/networks/default:tlsnet/", network)
    assert status == 200, answer
    status, answer = leader.api_call("GET", "/api/v1/networks/default:tlsnet/")
    assert status == 200 and answer["subnet"] == "198.18.60.0/24", answer
    body = {"TenantName": "default", "NetworkName": "tlsnet", "EndpointID": "tls-ep-1", "ConfigEP": {"Container": "tls-ep-1"}}
    status, answer = follower.api_call("POST", "/plugin/createEndpoint", body)
    assert status == 200, answer
    assert "https://" in leader.api_call("GET", "/info")[1]["leader-ip"]


def test_the_leader_calls_another_node_agent_over_tls(nodes: list[Node]) -> None:
    """epcleanup on the leader has the endpoint's node agent (the follower's, https) drop its port."""
    leader, follower = _leader_and_follower(nodes)
    network = {"tenantName": "default", "networkName": "tlsagent", "encap": "vxlan", "subnet": "198.18.61.0/24", "gateway": "198.18.61.254"}
    assert leader.api_call("POST", "/api/v1/networks/default:tlsagent/", network)[0] == 200
    body = {
        "TenantName": "default",
        "NetworkName": "tlsagent",
        "EndpointID": "tls-ep-2",
        "ConfigEP": {"Container": "tls-ep-2", "Host": follower.name},
    }
    status, answer = leader.api_call("POST", "/plugin/createEndpoint", body)
    assert status == 200, answer
    status, answer = leader.api_call("DELETE", "/debug/epcleanup/tenant/default/ep/tls-ep-2")
    assert status == 200, answer
    wait_until(
        lambda: f"node {follower.name}'s agent reclaimed endpoint tlsagent.default-tls-ep-2" in leader.log_text(), 30, "the reclaim over TLS", leader
    )


def test_status_page_reads_its_peers_over_tls(nodes: list[Node]) -> None:
    first, _ = nodes

    def peers_reported() -> bool:
        status, snapshot = first.api_call("GET", "/status/api/snapshot")
        members: list[dict[str, Any]] = snapshot["cluster"]["members"] if status == 200 else []
        return len(members) == 2 and all(member["term"] is not None for member in members)

    wait_until(peers_reported, 30, "both members' reports on the status page", first)


def test_snapshot_save_over_tls(nodes: list[Node], tmp_path: Path) -> None:
    server, client = nodes
    fingerprint = fingerprint_pem(server.ca_file.read_text())
    code, out = ctl(client, "--server", server.url(), "--fingerprint", fingerprint, "cluster", "snapshot", "save", str(tmp_path / "store.snap"))
    assert code == 0 and "saved" in out, out


def test_ctl_trusts_the_server_by_ca_file_or_fingerprint(nodes: list[Node], wrong_ca: Path) -> None:
    server, client = nodes
    fingerprint = fingerprint_pem(server.ca_file.read_text())
    url = server.url()
    code, out = ctl(client, "--server", url, "cluster", "status")
    assert code == 3 and fingerprint in out and "--fingerprint" in out, out
    code, out = ctl(client, "--server", url, "--ca-file", str(client.ca_file), "cluster", "status")
    assert code == 0 and f"TLS CA (sha256): {fingerprint}" in out, out
    code, out = ctl(client, "--server", url, "--fingerprint", fingerprint.replace(":", "").lower(), "network", "ls")
    assert code == 0, out
    code, out = ctl(client, "--server", url, "--ca-file", str(wrong_ca), "version")
    assert code == 3 and fingerprint in out, out
    wrong = fingerprint_pem(wrong_ca.read_text())
    code, out = ctl(client, "--server", url, "--fingerprint", wrong, "version")
    assert code == 3 and f"not the pinned {wrong}" in out, out

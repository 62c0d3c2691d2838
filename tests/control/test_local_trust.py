"""Trust on the node (issue 26): root on the API's unix socket is admin without a token; a
loopback TCP caller without one only reads (--loopback-access viewer) or nothing (none); an
unprivileged local user (uid 65534, through setpriv and curl: the repo's python is root's)
can neither write over loopback nor connect to the socket, and changes nothing in the store."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from contivd.api.routes import ROUTES, Route, required_role
from contivd.backup.protocol import SNAPSHOT_PATH
from contivd.cli import cli
from contivd.http.tokens import Role
from contivd.migrate.commit import IMPORT_PATH
from tests.support.contivd_nodes import ContivdProcess, running_cluster
from tests.support.waiting import free_ports, wait_for

pytestmark = pytest.mark.cluster
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
OPEN_PATHS = ("/healthz", "/readyz", "/ca.crt")
NETWORK = {"tenantName": "default", "networkName": "local", "encap": "vxlan", "subnet": "198.18.40.0/24", "gateway": "198.18.40.254"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContivdProcess]:
    with running_cluster(tmp_path_factory.mktemp("trust"), 1) as cluster:
        yield cluster.nodes[0]


def tcp(node: ContivdProcess, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """A call on loopback TCP, as any local process can make it."""
    return httpx.request(method, node.url + path, json=body, headers={"Accept": "application/json", **(headers or {})}, timeout=15)


def concrete(route: Route) -> tuple[str, dict[str, str]]:
    params = {"collection": "tenants", "key": "default", "name": "loopback-probe", "tenant": "default", "category": "bogus", "spec": "x"}
    path = route.path
    used = {}
    for name, value in params.items():
        for template in (f"<{name}>", f"<path:{name}>"):
            if template in path:
                path, used[name] = path.replace(template, value), value
    return path, used


def store_view(node: ContivdProcess) -> tuple[int, list[Any]]:
    """The store's revision and the objects a local user would target (read as root)."""
    revision = node.get("/info").json()["cluster"]["revision"]
    return revision, [node.get(path).json() for path in ("/api/v1/tenants/", "/api/v1/networks/", "/api/v1/auth/tokens/")]


def wait_audited(node: ContivdProcess, written: dict[str, Any]) -> None:
    """Until root's write `written` is in the stored audit trail (stored in batches: a revision of its own)."""
    wait_for(lambda: any(written.items() <= entry.items() for entry in node.get("/api/v1/audit/").json()), 10, f"the audit entry {written}")


def test_root_on_the_socket_is_admin_without_a_token(node: ContivdProcess) -> None:
    assert stat.S_IMODE(os.stat(node.socket.parent).st_mode) == 0o700 and stat.S_IMODE(os.stat(node.socket).st_mode) == 0o600
    assert node.post("/api/v1/tenants/by-root/", {"tenantName": "by-root"}).status_code == 200
    minted = node.post("/api/v1/auth/tokens/by-root/", {"role": "viewer"})
    assert minted.status_code == 200 and minted.json()["token"].startswith("ctd1.by-root.")
    wait_audited(node, {"who": "root", "method": "POST", "route": "/api/v1/auth/tokens/<name>/", "object": "by-root", "status": 200})


@pytest.mark.parametrize("route", [r for r in ROUTES if r.write or r.role > Role.VIEWER], ids=lambda r: f"{r.method} {r.path}")
def test_loopback_without_a_token_may_not_write_or_manage_tokens(node: ContivdProcess, route: Route) -> None:
    before = store_view(node)
    path, params = concrete(route)
    answer = tcp(node, route.method, path, {"tenantName": "default"} if route.method in ("POST", "PUT") else None)
    assert answer.status_code == 403, (route, answer.text)
    message = answer.json()["error"]
    assert f"needs role {required_role(route, params).label}" in message and "contivd ctl` as root" in message, message
    assert store_view(node) == before, "a refused write leaves the store as it was (no audit entry either)"


def test_loopback_without_a_token_reads_and_the_open_paths_stay_open(node: ContivdProcess) -> None:
    for path in ("/api/v1/tenants/", "/api/v1/networks/", "/info", "/metrics", "/status/api/node", "/"):
        assert tcp(node, "GET", path).status_code == 200, path
    for path in OPEN_PATHS:
        assert tcp(node, "GET", path).status_code in (200, 404), path  # /ca.crt: 404 without TLS, never 401
    for method, path in (("GET", SNAPSHOT_PATH), ("POST", IMPORT_PATH)):
        refused = tcp(node, method, path, {"values": {}} if method == "POST" else None)
        assert refused.status_code == 403 and "needs role admin" in refused.json()["error"], (path, refused.text)


def test_netctls_x_auth_token_is_a_token(node: ContivdProcess) -> None:
    token = node.post("/api/v1/auth/tokens/via-netctl/", {"role": "admin"}).json()["token"]
    assert tcp(node, "POST", "/api/v1/tenants/by-netctl/", {"tenantName": "by-netctl"}, {"X-Auth-Token": token}).status_code == 200
    wrong = tcp(node, "POST", "/api/v1/tenants/by-netctl2/", {"tenantName": "by-netctl2"}, {"X-Auth-Token": "ctd1.via-netctl.wrong"})
    assert wrong.status_code == 401 and wrong.json()["error"] == "unknown token"


def test_loopback_access_none_refuses_even_reads(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 1) as cluster:
        node = cluster.nodes[0]
        node.stop()
        node.extra = ("--loopback-access", "none")
        node.start()
        cluster.wait_ready()
        for path in ("/api/v1/tenants/", "/metrics", "/status/api/node"):
            refused = tcp(node, "GET", path)
            assert refused.status_code == 401 and "root on the node's unix socket" in refused.json()["error"], (path, refused.text)
        for path in OPEN_PATHS:
            assert tcp(node, "GET", path).status_code in (200, 404), path
        assert node.get("/api/v1/tenants/").status_code == 200, "root's socket still answers"


def curl_as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    command = [*NOBODY, "curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "-H", "Accept: application/json", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def test_an_unprivileged_user_changes_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("curl") is None:
        pytest.skip("needs root, setpriv and curl")
    reachable = Path(
        tempfile.mkdtemp(prefix="cdt-trust-", dir="/tmp")
    )  # pytest's tmp dirs are root's only: the user must reach the socket's directory
    try:
        os.chmod(reachable, 0o755)
        with running_cluster(tmp_path, 1) as cluster:
            node = cluster.nodes[0]
            node.stop()
            node.socket = reachable / "run" / "api.sock"
            node.start()
            cluster.wait_ready()
            assert node.post("/api/v1/networks/default:local/", NETWORK).status_code == 200
            wait_audited(node, {"who": "root", "route": "/api/v1/<collection>/<key>/", "object": "networks/default:local", "status": 200})
            before = store_view(node)
            for path, body in (("/api/v1/auth/tokens/pwn/", {"role": "admin"}), ("/api/v1/tenants/pwn/", {"tenantName": "pwn"}),
                               ("/api/v1/networks/default:pwn/", {**NETWORK, "networkName": "pwn"})):  # fmt: skip
                done = curl_as_nobody("-X", "POST", "-H", "Content-Type: application/json", "-d", json.dumps(body), node.url + path)
                text, _, status = done.stdout.rpartition("\n")
                assert status == "403" and "contivd ctl` as root" in json.loads(text)["error"], (path, done.stdout, done.stderr)
                assert curl_as_nobody("-X", "DELETE", node.url + "/api/v1/networks/default:local/").stdout.endswith("403")
            assert stat.S_IMODE(os.stat(node.socket.parent).st_mode) == 0o700
            closed = curl_as_nobody("--unix-socket", str(node.socket), "http://contivd/api/v1/tenants/")  # the directory keeps it out
            assert node.socket.is_socket() and closed.returncode == 7 and "Couldn't connect" in closed.stderr, (closed.returncode, closed.stderr)
            assert "from uid 65534" not in node.log_text(), "refused by the file system, before contivd"
            os.chmod(node.socket.parent, 0o755)  # an operator loosens the permissions: SO_PEERCRED still cuts the user
            os.chmod(node.socket, 0o666)
            cut = curl_as_nobody("-X", "POST", "-d", "{}", "--unix-socket", str(node.socket), "http://contivd/api/v1/tenants/pwn/")
            # Cut at accept: curl sees a reset or an empty reply, depending on when the close lands.
            assert cut.returncode in (7, 52, 56) and cut.stdout.strip() == "000", (cut.returncode, cut.stdout, cut.stderr)
            wait_for(lambda: "refused a connection" in node.log_text() and "from uid 65534" in node.log_text(), 10, "the refusal logged")
            assert store_view(node) == before, "nothing the user sent changed the store"
    finally:
        shutil.rmtree(reachable, ignore_errors=True)


def test_a_socket_in_use_is_logged_and_the_node_keeps_serving(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "first", 1) as first, running_cluster(tmp_path / "second", 1) as second:
        other = second.nodes[0]
        other.stop()
        other.socket = first.nodes[0].socket
        other.start()
        wait_for(lambda: "API socket not served" in other.log_text(), 30, "the socket conflict logged")
        assert "served by another process" in other.log_text()
        wait_for(lambda: tcp(other, "GET", "/api/v1/tenants/").status_code == 200, 30, "the second node's TCP API")
        assert first.nodes[0].post("/api/v1/tenants/still-first/", {"tenantName": "still-first"}).status_code == 200


def ctl(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"CONTIVD_SERVER": None, "CONTIVD_TOKEN": None, "NETMASTER": None})
    assert "Traceback" not in result.output + result.stderr
    return result


def test_ctl_and_bootstrap_over_the_socket(node: ContivdProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    server = f"unix:{node.socket}"
    assert ctl("ctl", "--server", server, "tenant", "create", "via-ctl").exit_code == 0
    assert "via-ctl" in ctl("ctl", "--server", server, "tenant", "ls", "-q").stdout.split()
    refused = ctl("ctl", "--server", node.url, "tenant", "create", "via-tcp")
    assert refused.exit_code == 3 and "contivd ctl` as root" in refused.stderr, refused.stderr
    missing = ctl("ctl", "--server", f"unix:{tmp_path / 'none.sock'}", "tenant", "ls")
    assert missing.exit_code == 3 and "no contivd API socket at" in missing.stderr, missing.stderr
    relative = ctl("ctl", "--server", "unix:api.sock", "tenant", "ls")
    assert relative.exit_code == 1 and "unix:/absolute/path" in relative.stderr, relative.stderr
    api, raft = free_ports(2)
    minted = ctl("auth", "bootstrap", "by-bootstrap", "--api-socket", str(node.socket), "--data-dir", str(tmp_path / "d"),
                 "--api-listen", f"127.0.0.1:{api}", "--raft-listen", f"127.0.0.1:{raft}")  # fmt: skip
    assert minted.exit_code == 0, minted.stderr
    token = minted.stdout.strip()
    assert (
        token.startswith("ctd1.by-bootstrap.")
        and tcp(node, "GET", "/api/v1/auth/tokens/", {}, {"Authorization": f"Bearer {token}"}).status_code == 200
    )

"""A local user is not an administrator (issue 26): every route of the API, called over
loopback TCP by an unprivileged process (`setpriv --reuid 65534`, curl) without a token.

Reads a viewer may make answer; every write and every route that needs more than viewer is
refused (401/403) and changes nothing in the store; the same with `--loopback-access none`
refuses the reads too. The root-only socket is out of the user's reach. Against a real node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from contivd.api.routes import required_role
from contivd.backup.protocol import SNAPSHOT_PATH
from contivd.http.tokens import Role
from contivd.migrate.commit import IMPORT_PATH
from contivd.model.objects import COLLECTIONS
from tests.control.test_access import concrete, matrix
from tests.support.contivd_nodes import ContivdProcess, running_cluster
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster
NOBODY = ("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups")


def as_nobody(method: str, url: str, body: bytes = b'{"bogus": 1}', *, unix_socket: Path | None = None) -> tuple[int, str]:
    """(HTTP status, body) of one curl call made by uid 65534; status 0 when the connection failed."""
    command = [
        *NOBODY,
        "curl",
        "-s",
        "-X",
        method,
        "-H",
        "Accept: application/json",
        "-H",
        "Content-Type: application/json",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
    ]
    if method in ("POST", "PUT"):
        command += ["--data-binary", body.decode()]
    if unix_socket is not None:
        command += ["--unix-socket", str(unix_socket)]
    answer = subprocess.run([*command, url], capture_output=True, text=True, timeout=30)
    text, _, status = answer.stdout.rpartition("\n")
    return int(status or 0), text


def store_objects(node: ContivdProcess) -> dict[str, Any]:
    """What a local user must not change: every Contiv collection and the token records (as root reads them)."""
    seen = {name: node.get(f"/api/v1/{name}/").json() for name in COLLECTIONS}
    seen["tokens"] = sorted(t["name"] for t in node.get("/api/v1/auth/tokens/").json())
    return seen


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_cluster(tmp_path_factory.mktemp("localuser"), 1) as cluster:
        yield cluster.nodes[0]


def test_every_route_over_loopback_without_a_token_is_at_most_a_viewer(node: ContivdProcess) -> None:
    before = store_objects(node)
    refused, served = [], []
    for route, collection in matrix():
        path, params = concrete(route, collection)
        needed = required_role(route, params)
        status, text = as_nobody(route.method, node.url + path)
        assert status != 0, f"{route.method} {path}: no answer"
        if needed > Role.VIEWER or route.write:
            assert status in (401, 403), f"a local user got {status} for {route.method} {path}: {text[:200]}"
            assert json.loads(text)["error"], text
            refused.append(path)
        else:
            assert status not in (401, 403), f"a viewer read refused: {route.method} {path}: {text[:200]}"
            served.append(path)
    for method, path in (("POST", IMPORT_PATH), ("GET", SNAPSHOT_PATH), ("POST", "/api/v1/auth/tokens/pwn/")):
        status, text = as_nobody(method, node.url + path, b'{"role": "admin"}')
        assert status in (401, 403), f"{method} {path}: {status} {text[:200]}"
    assert refused and served
    assert store_objects(node) == before, "a local user's calls changed the store"


def test_the_root_only_socket_refuses_a_local_user(node: ContivdProcess) -> None:
    socket_path = node.data_dir / "api.sock"
    assert socket_path.exists(), "the harness's node serves its API socket under its data dir"
    status, _ = as_nobody("POST", "http://contivd/api/v1/auth/tokens/pwn/", b'{"role": "admin"}', unix_socket=socket_path)
    assert status == 0  # the directory is 0700 root: connect() fails with EACCES
    assert "pwn" not in store_objects(node)["tokens"]


def test_loopback_access_none_refuses_reads_too(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 1) as cluster:
        node = cluster.nodes[0]
        node.extra += ("--loopback-access", "none")
        node.stop()
        node.start()
        wait_for(node.ready, 30, "the restarted node to be ready")
        for path in ("/healthz", "/ca.crt"):
            assert as_nobody("GET", node.url + path)[0] != 401
        assert as_nobody("GET", node.url + "/api/v1/tenants/")[0] == 401
        assert as_nobody("GET", node.url + "/metrics")[0] == 401

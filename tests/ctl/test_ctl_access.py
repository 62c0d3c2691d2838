"""`contivd ctl auth token …`, `ctl audit ls`, `ctl login` and ctl.toml, and `contivd auth bootstrap`, against a real contivd."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from contivd.ctl.config import config_path
from tests.support.contivd_nodes import SECRET, ContivdProcess
from tests.support.ctl_runner import NO_CTL_ENV, invoke
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster


def test_token_create_ls_revoke_through_ctl(node: ContivdProcess) -> None:
    admin = node.mint_token("ctl-admin")
    as_admin = ["ctl", "--server", node.url, "--token", admin]
    token = invoke([*as_admin, "auth", "token", "create", "ctl-viewer", "--role", "viewer", "--ttl", "3600"]).stdout.strip()
    assert token.startswith("ctd1.ctl-viewer.")
    listed = invoke([*as_admin, "auth", "token", "ls"]).stdout
    row = next(line for line in listed.splitlines() if line.startswith("ctl-viewer "))
    assert row.split()[1:3] == ["viewer", "active"] and token not in listed
    as_viewer = ["ctl", "--server", node.url, "--token", token]
    assert "default" in invoke([*as_viewer, "tenant", "ls", "-q"]).stdout.split()
    refused = invoke([*as_viewer, "tenant", "create", "viewers-cannot"], code=3)
    assert "has role viewer; this request needs role admin" in refused.stderr
    assert invoke([*as_admin, "auth", "token", "revoke", "ctl-viewer"]).stdout == "revoked ctl-viewer\n"
    assert "has been revoked" in invoke([*as_viewer, "tenant", "ls"], code=3).stderr
    bad_role = invoke([*as_admin, "auth", "token", "create", "x", "--role", "root"], code=1)
    assert "'root' is not one of" in bad_role.stderr


def test_audit_ls_shows_the_writes(node: ContivdProcess) -> None:
    admin = node.mint_token("ctl-audit")
    as_admin = ["ctl", "--server", node.url, "--token", admin]
    invoke([*as_admin, "tenant", "create", "audited"])

    def shown() -> str | None:
        text = invoke([*as_admin, "audit", "ls", "--last", "50"]).stdout
        return text if any("token:ctl-audit" in line and "tenants/audited" in line and line.endswith(" 200") for line in text.splitlines()) else None

    text = wait_for(shown, 15, "the tenant creation in `audit ls`")
    assert text.splitlines()[0].split() == ["Time", "Node", "Who", "Method", "Route", "Object", "Status"]
    entries = invoke([*as_admin, "audit", "ls", "--json"]).stdout
    assert '"who": "token:ctl-audit"' in entries


def test_login_stores_server_and_token_with_mode_0600_and_ctl_uses_them(node: ContivdProcess) -> None:
    token = node.mint_token("ctl-login", "viewer")
    said = invoke(["ctl", "--server", node.url, "--token", token, "login"]).stdout
    path = config_path()
    assert said == f"logged in to {node.url}; saved {path} (mode 0600)\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == f'server = "{node.url}"\ntoken = "{token}"\n'
    assert "default" in invoke(["ctl", "tenant", "ls", "-q"]).stdout.split(), "server and token from the file"
    invoke(["ctl", "--server", node.url, "--token", "ctd1.ctl-login.wrong", "login"], code=3)  # refused: the file is kept
    assert token in path.read_text()
    admin = node.mint_token("ctl-login-admin")
    invoke(["ctl", "--server", node.url, "--token", admin, "auth", "token", "revoke", "ctl-login"])
    stale = invoke(["ctl", "tenant", "ls"], code=3)
    assert stale.stderr == "Error: token 'ctl-login' has been revoked\n", "the file's token is sent"
    assert "default" in invoke(["ctl", "tenant", "ls", "-q"], env={**NO_CTL_ENV, "CONTIVD_TOKEN": admin}).stdout.split(), "env over the file"
    os.chmod(path, 0o644)
    loose = invoke(["ctl", "tenant", "ls"], code=3)
    assert "others may read it (mode 0644)" in loose.stderr


def test_the_files_token_is_not_sent_to_another_server(node: ContivdProcess, tmp_path: Path) -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('server = "http://127.0.0.1:1"\ntoken = "ctd1.elsewhere.x"\n')
    os.chmod(path, 0o600)
    assert "default" in invoke(["ctl", "--server", node.url, "tenant", "ls", "-q"]).stdout.split(), "loopback: no token needed, none sent"
    path.write_text('server = "http://127.0.0.1:1"\nbogus = "x"\n')
    assert "unknown setting(s) bogus" in invoke(["ctl", "tenant", "ls"], code=3).stderr


def test_bootstrap_mints_a_token_as_root_with_the_nodes_configuration(node: ContivdProcess) -> None:
    if os.geteuid() != 0:
        pytest.skip("contivd auth bootstrap is root-only")
    env = {**NO_CTL_ENV, "CONTIVD_CLUSTER_SECRET": SECRET, "CONTIVD_API_LISTEN": node.api_listen}
    token = invoke(["auth", "bootstrap", "first-admin"], env=env).stdout.strip()
    assert token.startswith("ctd1.first-admin.")
    assert "first-admin" in invoke(["ctl", "--server", node.url, "--token", token, "auth", "token", "ls"]).stdout
    wrong = invoke(["auth", "bootstrap", "second"], env={**env, "CONTIVD_CLUSTER_SECRET": "not-the-secret"}, code=1)
    assert "refused to create token 'second': HTTP 401 invalid node signature" in wrong.stderr

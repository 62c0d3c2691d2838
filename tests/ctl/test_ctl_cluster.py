"""`contivd ctl` as a client: server and token selection, connection failures, usage
errors, `version` and `cluster status`, against a real contivd."""

from __future__ import annotations

import json

from contivd import __version__
from tests.support.contivd_nodes import SECRET, ContivdProcess
from tests.support.ctl_runner import Ctl, invoke
from tests.support.waiting import free_ports


def test_version(ctl: Ctl) -> None:
    text = ctl("version").stdout
    assert text.startswith(f"Client Version:\nVersion: {__version__}\n")
    assert f"\nServer Version:\nVersion: {__version__}\n" in text
    assert json.loads(ctl("version", "--json").stdout)["Version"] == __version__


def test_cluster_status(ctl: Ctl, node: ContivdProcess) -> None:
    info = node.info()
    assert info is not None
    raft = info["cluster"]
    text = ctl("cluster", "status").stdout
    assert f"Leader: node0 ({raft['leader']})\n" in text
    assert f"Leader API: {node.url}\n" in text and "Quorum: yes\n" in text and f"Members: {raft['self_address']}\n" in text
    assert "\nTerm: " in text and "\nCommit index: " in text
    node_row = text.split("Registered nodes:\n")[1].splitlines()[2].split()
    assert node_row == ["node0", raft["self_address"], node.url, "127.0.0.1", "leader", __version__]
    assert json.loads(ctl("cluster", "status", "--json").stdout)["cluster"]["role"] == "leader"


def test_connection_refused_names_the_server_and_the_flag() -> None:
    server = f"http://127.0.0.1:{free_ports(1)[0]}"
    result = invoke(["ctl", "--server", server, "tenant", "ls"], code=3)
    assert result.stdout == ""
    assert result.stderr.startswith(f"Error: cannot connect to contivd at {server}")
    assert "--server" in result.stderr and len(result.stderr.splitlines()) == 1


def test_server_url_must_be_http() -> None:
    result = invoke(["ctl", "--server", "127.0.0.1:9999", "tenant", "ls"], code=1)
    assert "not an http:// or https:// URL" in result.stderr


def test_server_and_token_from_the_environment(node: ContivdProcess) -> None:
    assert "default" in invoke(["ctl", "tenant", "ls", "-q"], env={"CONTIVD_SERVER": node.url}).stdout.split()
    wrong = invoke(["ctl", "tenant", "ls"], env={"CONTIVD_SERVER": node.url, "CONTIVD_TOKEN": "guess"}, code=3)
    assert wrong.stderr == "Error: unknown token\n"
    secret = invoke(["ctl", "--token", SECRET, "tenant", "ls"], env={"CONTIVD_SERVER": node.url}, code=3)
    assert "cluster secret is accepted from cluster nodes only" in secret.stderr
    right = invoke(["ctl", "--token", node.mint_token("ctl-env", "viewer"), "tenant", "ls", "-q"], env={"CONTIVD_SERVER": node.url})
    assert "default" in right.stdout.split()


def test_netctl_server_flag_and_environment(node: ContivdProcess) -> None:
    """netctl's `--netmaster` and NETMASTER name the server too (CONTIVD_SERVER wins over NETMASTER)."""
    assert "default" in invoke(["ctl", "--netmaster", node.url, "tenant", "ls", "-q"]).stdout.split()
    assert "default" in invoke(["ctl", "tenant", "ls", "-q"], env={"NETMASTER": node.url}).stdout.split()
    unreachable = f"http://127.0.0.1:{free_ports(1)[0]}"
    both = invoke(["ctl", "tenant", "ls", "-q"], env={"CONTIVD_SERVER": unreachable, "NETMASTER": node.url}, code=3)
    assert unreachable in both.stderr
    assert "default" in invoke(["ctl", "--insecure", "--server", node.url, "tenant", "ls", "-q"]).stdout.split()


def test_usage_errors_exit_1_without_a_request(ctl: Ctl) -> None:
    """netctl's exit status for usage errors (its exitHelp), where click's default is 2; the
    arguments netctl counts itself are refused with its message and its help."""
    assert ctl.refuses("tenant", "create", message="Tenant name required", shows_help=True) == (
        "NAME:\n   contivd ctl tenant create - Create a tenant\n\nUSAGE:\n   contivd ctl tenant create [tenant]\n"
    )
    ctl.refuses("tenant", "create", "a", "b", message="Tenant name required", shows_help=True)
    ctl.refuses("group", "create", "onlynetwork", message="Network and group name required", shows_help=True)
    ctl.refuses("net", "ls", "extra", message="More arguments than required", shows_help=True)
    ctl.refuses("version", "extra", message="More arguments than required", shows_help=True)
    ctl("policy", "rule-add", "p", "1", "--port", "eighty", code=1)
    ctl("network", "frobnicate", code=1)
    ctl("frobnicate", code=1)

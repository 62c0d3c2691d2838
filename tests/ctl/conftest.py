"""Fixtures for `contivd ctl`: one real contivd per module, and a CliRunner wrapper that
checks the invariants every invocation must keep (exit status, no traceback)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest
from click.testing import CliRunner, Result

from contivd.cli import cli
from tests.support.contivd_nodes import ContivdProcess, running_cluster

NO_CTL_ENV: Mapping[str, str | None] = {"CONTIVD_SERVER": None, "CONTIVD_TOKEN": None, "NETMASTER": None, "INSECURE": None}


@pytest.fixture(autouse=True)
def own_ctl_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """ctl reads ~/.config/contivd/ctl.toml: never the real user's here."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContivdProcess]:
    """One contivd (single-node cluster), shared by a module's tests: they use distinct names."""
    with running_cluster(tmp_path_factory.mktemp("ctl"), 1) as cluster:
        yield cluster.nodes[0]


def invoke(args: list[str], env: Mapping[str, str | None] = NO_CTL_ENV, code: int = 0) -> Result:
    """Run `contivd <args>` in-process through the real top-level group (so the mount is
    covered too) and assert the exit status and that no traceback escaped."""
    result = CliRunner().invoke(cli, args, env=dict(env))
    shown = result.output + result.stderr
    assert result.exit_code == code, f"exit {result.exit_code} != {code} for {args}:\n{shown}"
    assert result.exception is None or isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in shown
    return result


@dataclass
class Ctl:
    """`contivd ctl --server <node> ...`."""

    server: str

    def __call__(self, *args: str, code: int = 0) -> Result:
        return invoke(["ctl", "--server", self.server, *args], code=code)

    def fails(self, *args: str, message: str) -> str:
        """The server refused: exit 3 (netctl's), nothing on stdout, `Error: <message>` on stderr."""
        result = self(*args, code=3)
        assert result.stdout == "", result.stdout
        assert result.stderr.startswith("Error: ") and message in result.stderr, result.stderr
        return result.stderr

    def refuses(self, *args: str, message: str) -> str:
        """Refused before any request, as netctl's client-side checks: exit 1, usage and message on stderr."""
        result = self(*args, code=1)
        assert result.stdout == "", result.stdout
        assert result.stderr.startswith("Usage: ") and f"Error: {message}" in result.stderr, result.stderr
        return result.stderr


@pytest.fixture(scope="module")
def ctl(node: ContivdProcess) -> Ctl:
    """ctl as root on the node: over its API socket, admin without a token."""
    return Ctl(f"unix:{node.socket}")

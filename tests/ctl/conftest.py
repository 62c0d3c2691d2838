"""Fixtures for `contivd ctl`: one real contivd per module, ctl's own config directory, and ctl as root
on that node (the CliRunner wrapper is tests/support/ctl_runner.py: other folders drive ctl too)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.contivd_nodes import ContivdProcess, running_cluster
from tests.support.ctl_runner import Ctl


@pytest.fixture(autouse=True)
def own_ctl_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """ctl reads ~/.config/contivd/ctl.toml: never the real user's here."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContivdProcess]:
    """One contivd (single-node cluster), shared by a module's tests: they use distinct names."""
    with running_cluster(tmp_path_factory.mktemp("ctl"), 1) as cluster:
        yield cluster.nodes[0]


@pytest.fixture(scope="module")
def ctl(node: ContivdProcess) -> Ctl:
    """ctl as root on the node: over its API socket, admin without a token."""
    return Ctl(f"unix:{node.socket}")

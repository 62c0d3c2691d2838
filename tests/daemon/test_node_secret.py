"""A node without a configured cluster secret runs with its own, kept in its data dir."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from contivd.config import load
from contivd.node_secret import generated_secret_path, with_cluster_secret


def test_generated_once_then_reused_and_private(tmp_path: Path) -> None:
    config = load({"data_dir": str(tmp_path / "data")}, environ={})
    first = with_cluster_secret(config)
    assert first.cluster_secret and len(first.cluster_secret) >= 32
    path = generated_secret_path(config)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert with_cluster_secret(config).cluster_secret == first.cluster_secret


def test_a_configured_secret_wins_and_nothing_is_written(tmp_path: Path) -> None:
    config = load({"data_dir": str(tmp_path), "cluster_secret": "operator-secret"}, environ={})
    assert with_cluster_secret(config).cluster_secret == "operator-secret"
    assert not generated_secret_path(config).exists()


def test_an_unusable_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    config = load({"data_dir": str(tmp_path)}, environ={})
    generated_secret_path(config).write_text("\n")
    with pytest.raises(ValueError, match="remove it to have a new one generated"):
        with_cluster_secret(config)

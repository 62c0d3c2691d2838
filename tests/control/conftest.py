from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contivd.testing import ContivdCluster, ContivdProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContivdProcess]:
    """One contivd (single-node cluster), shared by a module's tests: they use distinct names."""
    cluster = ContivdCluster(tmp_path_factory.mktemp("single"), 1)
    try:
        cluster.start()
        yield cluster.nodes[0]
    finally:
        cluster.close()


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[ContivdCluster]:
    cluster = ContivdCluster(tmp_path, 3)
    try:
        yield cluster.start()
    finally:
        cluster.close()

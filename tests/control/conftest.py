from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.contivd_nodes import ContivdCluster, ContivdProcess, running_cluster
from tests.support.disk import small_filesystem as small_filesystem  # a fixture: a tmpfs the test fills


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContivdProcess]:
    """One contivd (single-node cluster), shared by a module's tests: they use distinct names."""
    with running_cluster(tmp_path_factory.mktemp("single"), 1) as cluster:
        yield cluster.nodes[0]


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[ContivdCluster]:
    with running_cluster(tmp_path, 3) as cluster:
        yield cluster

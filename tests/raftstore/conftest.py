from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.disk import small_filesystem as small_filesystem  # a fixture: a tmpfs the test fills
from tests.support.raft_processes import Cluster


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, 3)
    try:
        yield cluster.start()
    finally:
        cluster.close()

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from raftstore.testing import Cluster


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, 3)
    try:
        yield cluster.start()
    finally:
        cluster.close()

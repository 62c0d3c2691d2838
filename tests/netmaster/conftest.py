"""The real Netmaster on a MemoryStore: the leader's logic in-process, no Raft and no processes."""

from __future__ import annotations

import pytest

from contivd.netmaster.service import Netmaster
from raftstore import MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
async def netmaster(store: MemoryStore) -> Netmaster:
    master = Netmaster(store, "node0")
    await master.ensure_defaults()
    return master

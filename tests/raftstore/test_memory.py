"""MemoryStore's own parts: the injected clock for leases, injected outcomes, leadership and statistics.

Its CRUD, validation and watch behaviour is the store contract, run on both kinds in test_store.py.
"""

from __future__ import annotations

import pytest
import trio

from raftstore import LeaseNotFoundError, MemoryStore, Put, UnavailableError, absent


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def test_leases_expire_by_the_injected_clock_only_when_asked() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    kept, dropped = await store.grant_lease(10), await store.grant_lease(10)
    await store.put("/nodes/kept", 1, lease=kept)
    await store.put("/nodes/dropped", 2, lease=dropped)
    clock.now += 9
    await store.keepalive(kept)  # now expires at 1019
    clock.now += 2  # 1011: dropped's deadline (1010) passed, and the store has led for more than one ttl
    await store.expire_leases()
    assert [kv.key for kv in store.list_nowait("/nodes/")] == ["/nodes/kept"]
    with pytest.raises(LeaseNotFoundError):
        await store.keepalive(dropped)
    assert store.statistics().leases == 1


async def test_a_new_leader_grants_every_lease_one_ttl_first() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    lease = await store.grant_lease(10)
    await store.put("/nodes/n", 1, lease=lease)
    clock.now += 5
    await store.expire_leases()
    assert await store.get("/nodes/n") is not None
    clock.now += 5.5
    await store.expire_leases()
    assert await store.get("/nodes/n") is None


async def test_an_injected_compare_failure_runs_the_failure_branch_once() -> None:
    store = MemoryStore()
    store.fail_next_compare()
    first = await store.txn([absent("/k")], [Put("/k", "then")], [Put("/other", "else")])
    second = await store.txn([absent("/k")], [Put("/k", "then")], [Put("/other", "else")])
    assert (first.succeeded, second.succeeded) == (False, True)
    assert {kv.key: kv.value for kv in store.list_nowait("/")} == {"/k": "then", "/other": "else"}
    assert store.proposals["txn"] == 2


async def test_injected_errors_with_and_without_the_write_applied() -> None:
    store = MemoryStore()
    store.fail_next("txn", UnavailableError("lost before commit"))
    store.fail_next("txn", UnavailableError("lost after commit"), applied=True)
    with pytest.raises(UnavailableError, match="before commit"):
        await store.put("/a", 1)
    assert store.get_nowait("/a") is None and store.proposals["txn"] == 0
    with pytest.raises(UnavailableError, match="after commit"):
        await store.put("/a", 2)
    kv = store.get_nowait("/a")
    assert kv is not None and kv.value == 2 and store.proposals["txn"] == 1
    assert await store.put("/a", 3) == 2


async def test_an_injected_sync_failure_reaches_linearizable_reads_not_stale_ones() -> None:
    store = MemoryStore()
    await store.put("/a", 1)
    store.fail_next("sync", UnavailableError("no quorum"))
    with pytest.raises(UnavailableError):
        await store.get("/a")
    got = await store.get("/a", stale=True)
    assert got is not None and got.value == 1
    assert await store.sync() == 1


async def test_it_leads_from_the_start_and_reports_statistics() -> None:
    store = MemoryStore(address="memory-1")
    await store.put("/a", 1)
    await store.grant_lease(5)
    changes = store.leadership_changes()
    first = await changes.__anext__()
    assert (first.is_leader, first.leader) == (True, "memory-1") and store.is_leader()
    with trio.move_on_after(0.01) as waited:  # no further change ever comes
        await changes.__anext__()
    assert waited.cancelled_caught
    stats = store.statistics()
    assert (stats.role, stats.revision, stats.keys, stats.leases, stats.commit_index, stats.has_quorum) == ("leader", 1, 1, 1, 2, True)
    assert store.apply_latency() == (2, 0.0)

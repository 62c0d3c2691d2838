"""A real single-member store (PySyncObj, journal on disk) driven from trio in-process.

The store contract (CRUD, validation, watches) runs on MemoryStore as well: it must behave the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from raftstore import (
    Event,
    EventType,
    InvalidKeyError,
    InvalidValueError,
    KeyValueStore,
    LeaseNotFoundError,
    MemoryStore,
    Put,
    Store,
    StoreConfig,
    StoreConfigError,
    UnavailableError,
    absent,
    open_store,
)
from tests.support.waiting import free_ports


def config(tmp_path: Path, **kwargs: object) -> StoreConfig:
    (port,) = free_ports(1)
    return StoreConfig(listen=f"127.0.0.1:{port}", data_dir=tmp_path / "data", **kwargs)  # type: ignore[arg-type]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(config(tmp_path)) as s:
        await s.wait_leader(timeout=10)
        yield s


@asynccontextmanager
async def open_any(kind: str, tmp_path: Path, history_limit: int = 10_000) -> AsyncIterator[KeyValueStore]:
    if kind == "memory":
        yield MemoryStore(history_limit=history_limit)
        return
    async with open_store(config(tmp_path, history_limit=history_limit)) as s:
        await s.wait_leader(timeout=10)
        yield s


@pytest.fixture(params=["raft", "memory"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def any_store(store_kind: str, tmp_path: Path) -> AsyncIterator[KeyValueStore]:
    async with open_any(store_kind, tmp_path) as s:
        yield s


async def test_single_member_elects_itself_and_reports_statistics(store: Store) -> None:
    assert store.is_leader()
    await store.put("/a", 1)
    stats = store.statistics()
    assert stats.role == "leader" and stats.leader == stats.self_address
    assert stats.revision == 1 and stats.keys == 1 and stats.fsync is True and stats.has_quorum


async def test_crud_and_listing(any_store: KeyValueStore) -> None:
    store = any_store
    rev = await store.put("/contiv.io/state/nw/default:n1", {"subnet": "198.18.0.0/24"})
    await store.put("/contiv.io/state/nw/default:n2", {"subnet": "198.18.1.0/24"})
    await store.put("/contiv.io/state/nwx", 0)
    got = await store.get("/contiv.io/state/nw/default:n1")
    assert got is not None and got.value == {"subnet": "198.18.0.0/24"} and got.mod_revision == rev
    listed = await store.list("/contiv.io/state/nw/")
    assert [kv.key for kv in listed] == ["/contiv.io/state/nw/default:n1", "/contiv.io/state/nw/default:n2"]
    assert await store.delete("/contiv.io/state/nw/default:n1") is True
    assert await store.delete("/contiv.io/state/nw/default:n1") is False
    assert await store.delete_prefix("/contiv.io/") == 2
    assert await store.list("/") == [] and await store.get("/contiv.io/state/nwx", stale=True) is None


async def test_bad_input_raises_and_writes_nothing(any_store: KeyValueStore) -> None:
    store = any_store
    with pytest.raises(InvalidKeyError):
        await store.put("no-slash", 1)
    with pytest.raises(InvalidValueError):
        await store.txn([], [Put("/ok", 1), Put("/bad", {1, 2})])
    with pytest.raises(LeaseNotFoundError):
        await store.txn([], [Put("/ok", 1), Put("/leased", 1, lease=999)])
    assert await store.list("/") == [] and store.revision == 0


async def test_watch_delivers_changes_in_commit_order(any_store: KeyValueStore) -> None:
    store = any_store
    await store.put("/w/before", 0)
    events = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            async def collect() -> None:
                async for event in store.watch("/w/"):
                    events.append(event)
                    if len(events) == 4:
                        nursery.cancel_scope.cancel()

            nursery.start_soon(collect)
            await trio.testing.wait_all_tasks_blocked()
            await store.put("/w/a", 1)
            await store.put("/other", 1)
            await store.txn([absent("/w/b")], [Put("/w/b", 2), Put("/w/a", 3)])
            await store.delete("/w/a")
    assert [(e.type, e.key, e.prev_value, e.value) for e in events] == [
        (EventType.PUT, "/w/a", None, 1),
        (EventType.PUT, "/w/b", None, 2),
        (EventType.PUT, "/w/a", 1, 3),
        (EventType.DELETE, "/w/a", 3, None),
    ]
    assert events[1].revision == events[2].revision, "one transaction, one revision"


async def test_wait_past_wakes_once_a_later_revision_is_applied(any_store: KeyValueStore) -> None:
    store = any_store
    before = await store.put("/p/a", 1)
    assert await store.wait_past(before - 1) == before, "already past: returns at once"
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            woke: list[int] = []

            async def waiter() -> None:
                woke.append(await store.wait_past(before))

            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert not woke, "nothing newer yet"
            after = await store.put("/p/b", 2)
    assert woke == [after] and store.keys_nowait("/p/") == ["/p/a", "/p/b"]


async def first_events(store: KeyValueStore, prefix: str, start: int, count: int) -> list[Event]:
    events: list[Event] = []
    with trio.fail_after(10):
        async for event in store.watch(prefix, start_revision=start):
            events.append(event)
            if len(events) == count:
                return events
    raise AssertionError("unreachable")


async def test_watch_resumes_from_a_revision(any_store: KeyValueStore) -> None:
    store = any_store
    revisions = [await store.put(f"/r/{i}", i) for i in range(5)]
    events = await first_events(store, "/r/", revisions[2], 3)
    assert [e.key for e in events] == ["/r/2", "/r/3", "/r/4"]


async def test_watch_from_compacted_history_gets_an_explicit_resync(store_kind: str, tmp_path: Path) -> None:
    async with open_any(store_kind, tmp_path, history_limit=3) as store:
        for i in range(6):
            await store.put(f"/r/{i}", i)
        (resync,) = await first_events(store, "/r/", 1, 1)
        assert resync.type is EventType.RESYNC and resync.revision == 6
        assert [kv.key for kv in resync.kvs] == [f"/r/{i}" for i in range(6)]


async def test_lease_expires_keys_when_not_renewed(store: Store) -> None:
    lease = await store.grant_lease(1.0)
    await store.put("/nodes/n1", {"ip": "198.18.0.1"}, lease=lease)
    with trio.fail_after(10):
        async for event in store.watch("/nodes/", start_revision=1):
            if event.type is EventType.DELETE:
                break
    assert await store.get("/nodes/n1") is None
    with pytest.raises(LeaseNotFoundError):
        await store.keepalive(lease)


async def test_kept_alive_lease_survives_beyond_its_ttl(store: Store) -> None:
    lease = await store.grant_lease(1.0)
    await store.put("/nodes/n2", 1, lease=lease)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.keep_lease_alive, lease, 1.0)
        await trio.sleep(2.5)  # the property under test is the passage of time itself
        assert await store.get("/nodes/n2") is not None
        nursery.cancel_scope.cancel()
    await store.revoke_lease(lease)
    assert await store.get("/nodes/n2") is None


async def test_no_quorum_fails_within_the_timeout(tmp_path: Path) -> None:
    (missing,) = free_ports(1)
    cfg = StoreConfig(listen=config(tmp_path).listen, peers=(f"127.0.0.1:{missing}",), data_dir=tmp_path / "d", request_timeout=1.0)
    async with open_store(cfg) as store:
        with trio.fail_after(5):
            with pytest.raises(UnavailableError, match="no leader"):
                await store.put("/x", 1)
            with pytest.raises(UnavailableError):
                await store.get("/x")
        assert await store.get("/x", stale=True) is None


@pytest.mark.parametrize("secret", [None, "long-enough-secret"])
async def test_restart_from_disk_keeps_every_write(tmp_path: Path, secret: str | None) -> None:
    cfg = config(tmp_path, compaction_min_entries=50, secret=secret)
    async with open_store(cfg) as store:
        await store.wait_leader(timeout=10)
        for i in range(120):  # crosses the compaction threshold: snapshot + journal tail
            await store.put(f"/k/{i}", i)
        revision = store.revision
        with trio.fail_after(10):  # the snapshot is written by a forked child: poll for it
            while store.statistics().log_length >= 120:
                await trio.sleep(0.05)
        assert (tmp_path / "data" / "raft.snapshot").exists()
    async with open_store(cfg) as store:
        await store.wait_leader(timeout=10)
        listed = await store.list("/k/")
        assert sorted(kv.value for kv in listed) == list(range(120))
        assert store.revision == revision
        assert await store.put("/k/next", 1) == revision + 1


async def test_crash_between_snapshot_and_journal_truncation_loses_nothing(tmp_path: Path) -> None:
    """PySyncObj writes a snapshot, then truncates the journal in a later tick. A stop in
    between leaves a snapshot newer than the journal head; the tail must survive it."""
    cfg = config(tmp_path, compaction_min_entries=50)
    async with open_store(cfg) as store:
        await store.wait_leader(timeout=10)
        syncobj = store.node._syncobj
        snapshots = []
        syncobj._SyncObj__deleteEntriesTo = snapshots.append  # the "crash": never truncate
        for i in range(120):
            await store.put(f"/k/{i}", i)
        with trio.fail_after(10):
            while not snapshots:
                await trio.sleep(0.05)
        for i in range(120, 140):  # written after the snapshot: only the journal holds them
            await store.put(f"/k/{i}", i)
    async with open_store(cfg) as store:
        await store.wait_leader(timeout=10)
        assert sorted(kv.value for kv in await store.list("/k/")) == list(range(140))


async def test_a_member_off_this_host_is_refused_without_a_cluster_secret(store: Store) -> None:
    """As the flags are: unauthenticated Raft traffic must not leave the host (198.18.0.5 is
    never dialled: the change is refused before it is proposed)."""
    with pytest.raises(StoreConfigError, match="non-loopback member address 198.18.0.5:9002 without a cluster secret"):
        await store.add_member("198.18.0.5:9002", until_committed=False)
    with pytest.raises(StoreConfigError, match="must be host:port"):
        await store.add_member("no-port")
    assert store.statistics().voters == (store.config.listen,)

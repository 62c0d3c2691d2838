"""Coalesced lease keepalives: the state machine's `lease_keepalive_many` (pure), the voter's
batcher over the real state machine (MemoryStore, trio's mock clock), and the gate on the
members' wire formats."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from raftstore import LeaseNotFoundError, MemoryStore, UnavailableError
from raftstore._commands import encode
from raftstore._consensus import ConsensusStatus
from raftstore._fsm import StateMachine
from raftstore._lease_batch import WINDOW_SECONDS, KeepaliveBatcher, every_member_speaks, hold_seconds


def granted(*ttls: float, now: float = 100.0) -> StateMachine:
    fsm = StateMachine()
    for ttl in ttls:
        fsm.apply(encode({"op": "lease_grant", "rid": f"grant-{fsm.lease_count()}", "ttl": ttl, "now": now}))
    return fsm


def keepalive_many(fsm: StateMachine, ids: list[int], now: float, rid: str = "batch") -> Any:
    return fsm.apply(encode({"op": "lease_keepalive_many", "rid": rid, "ids": ids, "now": now}))


def keepalive(fsm: StateMachine, lease: int, now: float, rid: str) -> Any:
    return fsm.apply(encode({"op": "lease_keepalive", "rid": rid, "id": lease, "now": now}))


# ---- the state machine op ------------------------------------------------------------------


def test_many_renews_each_lease_as_a_single_keepalive_would() -> None:
    batched, single = granted(10, 20), granted(10, 20)
    result = keepalive_many(batched, [1, 2], now=105.0)
    alone = [keepalive(single, 1, 105.0, "a"), keepalive(single, 2, 105.0, "b")]
    assert result == {"results": alone} == {"results": [{"lease": 1, "expires_at": 115.0}, {"lease": 2, "expires_at": 125.0}]}
    assert batched.export_image() == single.export_image()


def test_unknown_ids_fail_alone_and_duplicates_are_fine() -> None:
    fsm = granted(10)
    result = keepalive_many(fsm, [1, 99, 1], now=103.0)
    assert result["results"][0] == result["results"][2] == {"lease": 1, "expires_at": 113.0}
    assert result["results"][1]["error"] == "lease_not_found" and "99" in result["results"][1]["message"]


def test_expiry_semantics_match_the_single_keepalive() -> None:
    """A renewal never shortens a lease (an older `now` keeps the later deadline), and a lease
    not renewed expires by the same rule."""
    fsm = granted(10, 10)
    keepalive_many(fsm, [1], now=108.0, rid="late")
    assert keepalive_many(fsm, [1], now=104.0, rid="early")["results"][0]["expires_at"] == 118.0
    assert [lease for lease, _ in fsm.expired_leases(now=115.0, leader_since=0.0)] == [2]
    assert fsm.expired_leases(now=118.5, leader_since=0.0) == [(1, 118.0), (2, 110.0)]


def test_the_result_is_a_function_of_the_state_and_the_batch_is_deduplicated() -> None:
    one, two = granted(10, 10), granted(10, 10)
    assert keepalive_many(one, [2, 1, 7], now=102.0) == keepalive_many(two, [2, 1, 7], now=102.0)
    assert keepalive_many(one, [2], now=150.0) == keepalive_many(one, [2, 1, 7], now=102.0)  # same rid: the first result
    assert one.export_image().leases[1].expires_at == 112.0


# ---- the batcher ---------------------------------------------------------------------------


async def renew_all(batcher: KeepaliveBatcher, leases: list[int]) -> list[Any]:
    """Renew every lease concurrently; each caller's result, or the exception it raised."""
    outcomes: list[Any] = [None] * len(leases)

    async def one(i: int) -> None:
        try:
            outcomes[i] = await batcher.renew({"op": "lease_keepalive", "rid": f"k{i}", "id": leases[i], "now": 0.0})
        except Exception as exc:
            outcomes[i] = exc

    async with trio.open_nursery() as nursery:
        for i in range(len(leases)):
            nursery.start_soon(one, i)
    return outcomes


async def store_with_leases(n: int, ttl: float = 15.0) -> MemoryStore:
    store = MemoryStore(clock=lambda: 1000.0)
    for _ in range(n):
        await store.grant_lease(ttl)
    return store


async def test_concurrent_keepalives_are_one_proposal_each_caller_with_its_own_answer(autojump_clock: trio.testing.MockClock) -> None:
    """Lease 6 is revoked while the batch waits: its caller alone learns the lease is gone."""
    store = await store_with_leases(6)
    outcomes: list[Any] = []
    async with trio.open_nursery() as nursery:
        batcher = KeepaliveBatcher(store, lambda: True)
        nursery.start_soon(batcher.run)

        async def renew() -> None:
            outcomes.extend(await renew_all(batcher, [1, 2, 3, 4, 5, 6, 3]))

        async with trio.open_nursery() as callers:
            callers.start_soon(renew)
            await trio.sleep(WINDOW_SECONDS / 2)
            await store.revoke_lease(6)
        nursery.cancel_scope.cancel()
    assert store.proposals["lease_keepalive_many"] == 1 and store.proposals["lease_keepalive"] == 0
    assert [o["lease"] for o in outcomes[:5]] == [1, 2, 3, 4, 5] and outcomes[6]["lease"] == 3
    assert all(o["expires_at"] == 1015.0 for o in outcomes[:5])
    assert isinstance(outcomes[5], LeaseNotFoundError)


async def test_keepalives_wait_at_most_the_window(autojump_clock: trio.testing.MockClock) -> None:
    """Two keepalives within the window share a command; one after it goes in the next; a
    short lease waits a tenth of its ttl; an unknown lease does not wait."""
    store = await store_with_leases(2)
    short = await store.grant_lease(1.0)
    async with trio.open_nursery() as nursery:
        batcher = KeepaliveBatcher(store, lambda: True)
        nursery.start_soon(batcher.run)
        started = trio.current_time()
        async with trio.open_nursery() as callers:
            callers.start_soon(renew_all, batcher, [1])
            await trio.sleep(WINDOW_SECONDS * 0.8)
            callers.start_soon(renew_all, batcher, [2])
        assert trio.current_time() - started == pytest.approx(WINDOW_SECONDS)
        assert store.proposals["lease_keepalive_many"] == 1
        await renew_all(batcher, [1])
        assert store.proposals["lease_keepalive_many"] == 2
        started = trio.current_time()
        await renew_all(batcher, [short])
        assert trio.current_time() - started == pytest.approx(0.1)
        started = trio.current_time()
        assert isinstance((await renew_all(batcher, [77]))[0], LeaseNotFoundError)
        assert trio.current_time() == started
        nursery.cancel_scope.cancel()
    assert hold_seconds(15.0) == WINDOW_SECONDS and hold_seconds(None) == 0.0


async def test_a_failed_batch_fails_every_caller_with_its_error(autojump_clock: trio.testing.MockClock) -> None:
    store = await store_with_leases(3)
    store.fail_next("lease_keepalive_many", UnavailableError("this member lost the Raft leadership"))
    async with trio.open_nursery() as nursery:
        batcher = KeepaliveBatcher(store, lambda: True)
        nursery.start_soon(batcher.run)
        outcomes = await renew_all(batcher, [1, 2, 3])
        again = await renew_all(batcher, [1, 2, 3])
        nursery.cancel_scope.cancel()
    assert all(isinstance(o, UnavailableError) and "leadership" in str(o) for o in outcomes)
    assert [o["lease"] for o in again] == [1, 2, 3]


async def test_without_every_member_on_the_new_format_each_keepalive_goes_alone(autojump_clock: trio.testing.MockClock) -> None:
    store = await store_with_leases(3)
    async with trio.open_nursery() as nursery:
        batcher = KeepaliveBatcher(store, lambda: False)
        nursery.start_soon(batcher.run)
        started = trio.current_time()
        outcomes = await renew_all(batcher, [1, 2, 3, 9])
        assert trio.current_time() == started  # not held either
        nursery.cancel_scope.cancel()
    assert store.proposals["lease_keepalive_many"] == 0 and store.proposals["lease_keepalive"] == 4
    assert [o["lease"] for o in outcomes[:3]] == [1, 2, 3] and isinstance(outcomes[3], LeaseNotFoundError)


async def test_a_gate_closed_while_a_batch_waited_sends_its_keepalives_alone(autojump_clock: trio.testing.MockClock) -> None:
    store = await store_with_leases(2)
    gate = [True]
    async with trio.open_nursery() as nursery:
        batcher = KeepaliveBatcher(store, lambda: gate[0])
        nursery.start_soon(batcher.run)
        async with trio.open_nursery() as callers:
            callers.start_soon(renew_all, batcher, [1, 2])
            await trio.sleep(WINDOW_SECONDS / 2)
            gate[0] = False  # an older member linked meanwhile
        nursery.cancel_scope.cancel()
    assert store.proposals["lease_keepalive_many"] == 0 and store.proposals["lease_keepalive"] == 2


# ---- the gate ------------------------------------------------------------------------------


def status(voters: dict[str, bool], formats: dict[str, int]) -> ConsensusStatus:
    return ConsensusStatus("follower", 1, 0, 0, 0, tuple(sorted(voters.items())), 0, True, tuple(sorted(formats.items())), {})


@pytest.mark.parametrize(
    ("own", "voters", "formats", "allowed"),
    [
        (3, {"a": True, "b": True}, {"a": 3, "b": 3}, True),
        (3, {}, {}, True),  # a single voter
        (2, {"a": True, "b": True}, {"a": 2, "b": 2}, False),  # this member is pinned to the old format
        (3, {"a": True, "b": True}, {"a": 3, "b": 2}, False),  # a voter of the previous release
        (3, {"a": True, "b": False}, {"a": 3}, False),  # a voter not linked may be of any release
        (3, {"a": True}, {"a": 3, "readonly-0": 2}, False),  # a read-only member applies the log too
    ],
)
def test_batches_only_when_every_member_speaks_the_format(own: int, voters: dict[str, bool], formats: dict[str, int], allowed: bool) -> None:
    assert every_member_speaks(own, status(voters, formats)) is allowed

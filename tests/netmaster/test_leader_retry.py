"""The leader's guarded commits when the store says no: replan and retry, exactly once, or give up loudly."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from contivd.netmaster.service import COMMIT_ATTEMPTS, ConflictRetryError, Netmaster
from contivd.state import keys as layout
from raftstore import MemoryStore, UnavailableError
from tests.netmaster.helpers import create, endpoint_request, net_state, network, state, under


@pytest.fixture
async def with_network(netmaster: Netmaster) -> Netmaster:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.40.0/24", "198.18.40.254"))
    return netmaster


async def test_a_configuration_write_whose_guard_fails_once_commits_exactly_once(netmaster: Netmaster, store: MemoryStore) -> None:
    version, txns = state(store, layout.CONFIG_VERSION), store.proposals["txn"]
    store.fail_next_compare()
    await netmaster.put_object("networks", "default:n", network("n", "198.18.41.0/24"))
    assert store.proposals["txn"] == txns + 2, "the refused attempt and the retry"
    assert state(store, layout.CONFIG_VERSION) == version + 1, "one configuration change"
    assert net_state(store, "n")["extPktTag"] == 1, "the network's tag was allocated once"


async def test_an_endpoint_batch_whose_guard_fails_once_allocates_exactly_once(with_network: Netmaster, store: MemoryStore) -> None:
    txns = store.proposals["txn"]
    store.fail_next_compare()
    assert (await create(with_network, "e", "n"))["ipAddress"] == "198.18.40.1"
    assert store.proposals["txn"] == txns + 2
    net = net_state(store, "n")
    assert (net["epCount"], net["epAddrCount"]) == (1, 1)
    assert (await create(with_network, "f", "n"))["ipAddress"] == "198.18.40.2", "the retry left no address behind"


@pytest.mark.parametrize("write", ["config", "endpoint"])
async def test_guards_failing_every_attempt_raise_conflict_retry_and_write_nothing(with_network: Netmaster, store: MemoryStore, write: str) -> None:
    revision, txns = store.revision, store.proposals["txn"]
    store.fail_next_compare(COMMIT_ATTEMPTS)
    with pytest.raises(ConflictRetryError, match="kept changing"):
        if write == "config":
            await with_network.put_object("networks", "default:m", network("m", "198.18.42.0/24"))
        else:
            await create(with_network, "e", "n")
    assert store.proposals["txn"] == txns + COMMIT_ATTEMPTS
    assert store.revision == revision
    assert (await create(with_network, "e", "n"))["ipAddress"] == "198.18.40.1", "the next attempt works"


async def test_an_unavailable_store_fails_every_waiter_of_the_batch_and_a_retry_succeeds(with_network: Netmaster, store: MemoryStore) -> None:
    store.fail_next("txn", UnavailableError("no quorum"))
    with pytest.raises(UnavailableError, match="no quorum"):
        await create(with_network, "e", "n")
    assert under(store, layout.EPS_PREFIX) == {}
    assert (await create(with_network, "e", "n"))["ipAddress"] == "198.18.40.1"


async def test_a_write_committed_before_its_answer_was_lost_is_not_repeated(with_network: Netmaster, store: MemoryStore) -> None:
    store.fail_next("txn", UnavailableError("answer lost"), applied=True)
    with pytest.raises(UnavailableError):
        await with_network.create_endpoint(endpoint_request("e", "n"))
    retried = await create(with_network, "e", "n")
    assert retried["ipAddress"] == "198.18.40.1"
    assert net_state(store, "n")["epCount"] == 1, "the client's retry found the endpoint instead of allocating again"


async def test_a_failed_sync_before_a_configuration_write_writes_nothing(netmaster: Netmaster, store: MemoryStore) -> None:
    revision = store.revision
    store.fail_next("sync", UnavailableError("no quorum for a linearizable read"))
    with pytest.raises(UnavailableError):
        await netmaster.put_object("networks", "default:n", network("n", "198.18.43.0/24"))
    assert store.revision == revision and net_state(store, "n") is None


async def test_a_cancelled_committer_tells_the_rest_of_its_batch_and_a_retry_succeeds(
    with_network: Netmaster, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committing request is cancelled mid-commit (its node stopped leading, so the API
    gave up on it). The other request of its batch learns it as UnavailableError, rather than
    hanging or committing someone else's batch and finding no answer."""
    committer: list[trio.lowlevel.Task] = []

    async def blocks(*args: Any, **kwargs: Any) -> Any:
        committer.append(trio.lowlevel.current_task())
        await trio.sleep_forever()

    monkeypatch.setattr(store, "txn", blocks)
    scopes: dict[trio.lowlevel.Task, trio.CancelScope] = {}
    outcomes: dict[str, str] = {}

    async def request(endpoint: str) -> None:
        with trio.CancelScope() as scope:
            scopes[trio.lowlevel.current_task()] = scope
            try:
                await create(with_network, endpoint, "n")
                outcomes[endpoint] = "created"
            except UnavailableError as exc:
                outcomes[endpoint] = str(exc)
        if scope.cancelled_caught:
            outcomes[endpoint] = "cancelled"

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request, "e")
            nursery.start_soon(request, "f")  # both queue before the first commit takes the batch
            while not committer:
                await trio.sleep(0.01)
            scopes[committer[0]].cancel()
    assert sorted(outcomes.values(), key=len)[0] == "cancelled" and "abandoned" in max(outcomes.values(), key=len), outcomes
    monkeypatch.undo()
    assert (await create(with_network, "g", "n"))["ipAddress"] == "198.18.40.1", "nothing was half-written"


async def test_a_create_answered_from_local_state_syncs_first(with_network: Netmaster, store: MemoryStore) -> None:
    """A retried create finds its endpoint and writes nothing: it still goes through the log
    (a barrier), so a leader cut off from the majority answers 503 instead of acknowledging."""
    first = await create(with_network, "e", "n")
    store.fail_next("sync", UnavailableError("no quorum for the barrier"))
    with pytest.raises(UnavailableError, match="no quorum for the barrier"):
        await create(with_network, "e", "n")
    assert await create(with_network, "e", "n") == first, "with a quorum, the retry gets the first answer"

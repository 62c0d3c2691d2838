"""Endpoint requests on the leader: idempotency, per-network batching, updates and labels."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from contivd.model import ConflictError, NotFoundError, ValidationError
from contivd.netmaster.service import Netmaster
from contivd.state import keys as layout
from raftstore import MemoryStore
from tests.netmaster.helpers import TENANT, create, delete_request, endpoint_request, net_state, network, state, under


@pytest.fixture
async def two_networks(netmaster: Netmaster) -> Netmaster:
    await netmaster.put_object("networks", "default:a", network("a", "198.18.10.0/24", "198.18.10.254"))
    await netmaster.put_object("networks", "default:b", network("b", "198.18.11.0/24", "198.18.11.254"))
    return netmaster


async def test_create_is_idempotent_per_endpoint_id(two_networks: Netmaster, store: MemoryStore) -> None:
    first = await create(two_networks, "x", "a")
    txns = store.proposals["txn"]
    assert await create(two_networks, "x", "a") == first
    assert store.proposals["txn"] == txns, "a repeated create commits nothing"
    assert net_state(store, "a")["epCount"] == 1


async def test_delete_is_idempotent_and_returns_what_it_removed(two_networks: Netmaster, store: MemoryStore) -> None:
    created = await create(two_networks, "x", "a")
    assert (await two_networks.delete_endpoint(delete_request("x", "a")))["EndpointConfig"] == created
    txns = store.proposals["txn"]
    assert await two_networks.delete_endpoint(delete_request("x", "a")) == {"EndpointConfig": None}
    assert store.proposals["txn"] == txns
    assert net_state(store, "a")["epCount"] == 0 and under(store, layout.EPS_PREFIX) == {}


async def run_concurrently(*calls: Any) -> list[Any]:
    """Start every call in one nursery (so they queue together) and collect answers or errors."""
    results: list[Any] = [None] * len(calls)

    async def one(i: int, call: Any) -> None:
        try:
            results[i] = await call
        except Exception as exc:
            results[i] = exc

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            nursery.start_soon(one, i, call)
    return results


async def test_concurrent_creates_on_one_network_commit_in_one_transaction(two_networks: Netmaster, store: MemoryStore) -> None:
    txns = store.proposals["txn"]
    answers = await run_concurrently(*(two_networks.create_endpoint(endpoint_request(f"e{i}", "a")) for i in range(8)))
    assert store.proposals["txn"] == txns + 1
    assert sorted(a["EndpointConfig"]["ipAddress"] for a in answers) == [f"198.18.10.{i}" for i in range(1, 9)]
    assert net_state(store, "a")["epCount"] == 8 and len(under(store, layout.EPS_PREFIX)) == 8


async def test_each_network_batches_separately(two_networks: Netmaster, store: MemoryStore) -> None:
    txns = store.proposals["txn"]
    requests = [endpoint_request(f"e{i}", "a" if i % 2 else "b") for i in range(6)]
    await run_concurrently(*(two_networks.create_endpoint(r) for r in requests))
    assert store.proposals["txn"] == txns + 2
    assert (net_state(store, "a")["epCount"], net_state(store, "b")["epCount"]) == (3, 3)


async def test_a_failing_request_in_a_batch_leaves_the_others_committed(two_networks: Netmaster, store: MemoryStore) -> None:
    await create(two_networks, "taken", "a", ip="198.18.10.5")
    answers = await run_concurrently(
        two_networks.create_endpoint(endpoint_request("ok1", "a")),
        two_networks.create_endpoint(endpoint_request("clash", "a", ip="198.18.10.5")),
        two_networks.create_endpoint(endpoint_request("ok2", "a")),
        two_networks.create_endpoint(endpoint_request("nogroup", "a", group="missing")),
    )
    assert sorted(a["EndpointConfig"]["ipAddress"] for a in (answers[0], answers[2])) == ["198.18.10.1", "198.18.10.2"]
    assert isinstance(answers[1], ConflictError) and isinstance(answers[3], NotFoundError)
    assert sorted(under(store, layout.EPS_PREFIX)) == ["a.default-ok1", "a.default-ok2", "a.default-taken"]
    assert net_state(store, "a")["epCount"] == 3


async def test_concurrent_deletes_free_every_address_in_one_transaction(two_networks: Netmaster, store: MemoryStore) -> None:
    for i in range(4):
        await create(two_networks, f"e{i}", "a")
    txns = store.proposals["txn"]
    answers = await run_concurrently(*(two_networks.delete_endpoint(delete_request(f"e{i}", "a")) for i in range(4)))
    assert store.proposals["txn"] == txns + 1
    assert sorted(a["EndpointConfig"]["ipAddress"] for a in answers) == [f"198.18.10.{i}" for i in range(1, 5)]
    assert under(store, layout.EPS_PREFIX) == {} and net_state(store, "a")["epCount"] == 0
    assert (await create(two_networks, "y", "a"))["ipAddress"] == "198.18.10.1"


async def test_bad_requests_name_the_field(two_networks: Netmaster) -> None:
    with pytest.raises(ValidationError, match="EndpointID"):
        await two_networks.create_endpoint({"TenantName": TENANT, "NetworkName": "a"})
    with pytest.raises(NotFoundError, match="network default:nope not found"):
        await create(two_networks, "x", "nope")
    await create(two_networks, "x", "a")
    with pytest.raises(ValidationError, match="Labels must map strings to strings"):
        await two_networks.update_endpoint({"Tenant": TENANT, "Network": "a", "EndpointID": "x", "Labels": {"app": 1}})


async def test_update_merges_labels_and_a_dead_container_drops_them(two_networks: Netmaster, store: MemoryStore) -> None:
    await create(two_networks, "x", "a")
    start = {"Tenant": TENANT, "Network": "a", "EndpointID": "x", "Event": "start", "ContainerID": "c1"}
    await two_networks.update_endpoint({**start, "Labels": {"app": "web"}})
    await two_networks.update_endpoint({**start, "Labels": {"tier": "front"}})
    ep = state(store, layout.ep_state("a.default-x"))
    assert ep["labels"] == {"app": "web", "tier": "front"} and ep["containerId"] == "c1"
    assert await two_networks.update_endpoint({**start, "Event": "die"}) == {"IPAddress": "198.18.10.1"}
    assert state(store, layout.ep_state("a.default-x"))["labels"] is None


async def test_a_network_with_endpoints_cannot_be_deleted(two_networks: Netmaster, store: MemoryStore) -> None:
    await create(two_networks, "x", "a")
    with pytest.raises(ConflictError, match=r"Network default:a has active endpoints \(1\)"):
        await two_networks.delete_object("networks", "default:a")
    assert net_state(store, "a") is not None
    await two_networks.delete_endpoint(delete_request("x", "a"))
    assert await two_networks.delete_object("networks", "default:a") == "default:a"
    assert net_state(store, "a") is None and store.get_nowait(layout.model("network", "default:a")) is None

"""The typed ControlPlane: the leader's local implementation and a follower's forwarding one give
the same records and the same exceptions (class and message) for the same requests, even when
the leader answers Contiv's clients in `--contiv-error-compat` mode."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from contivd.api.app import ApiServer, create_app
from contivd.http.audit import AuditTrail
from contivd.http.auth import Authenticator, store_lookup
from contivd.http.control import RemoteControlPlane
from contivd.http.forwarder import ForwardingClient
from contivd.http.leader_forwarder import LeaderForwarder
from contivd.main import api_contexts
from contivd.metrics import Metrics, StoreSummaries
from contivd.model import ModelError
from contivd.netmaster.control import ControlPlane, CreateEndpoint, DeleteEndpoint, LocalControlPlane, UpdateEndpoint
from contivd.netmaster.service import Netmaster
from contivd.state import NodeRecord, StateCache, keys
from raftstore import StoreConfig, open_store
from tests.support.waiting import free_ports

SECRET = "control-plane-test-secret"


@pytest.fixture
async def planes(tmp_path: Path) -> AsyncIterator[tuple[LocalControlPlane, RemoteControlPlane, StateCache]]:
    raft, api = free_ports(2)
    async with open_store(StoreConfig(listen=f"127.0.0.1:{raft}", data_dir=tmp_path / "store")) as store, trio.open_nursery() as nursery:
        await store.wait_leader(timeout=10)
        netmaster = Netmaster(store, "node1")
        await netmaster.ensure_defaults()
        for name, subnet in (("pods", "198.18.30.0/24"), ("tiny", "198.18.31.0/30")):
            body = {"tenantName": "default", "networkName": name, "encap": "vxlan", "subnet": subnet}
            await netmaster.put_object("networks", f"default:{name}", body)
        record = NodeRecord("node1", f"127.0.0.1:{raft}", f"http://127.0.0.1:{api}", "127.0.0.1", "127.0.0.1", False, "test")
        await store.put(keys.node("node1"), record.to_json())
        cache = StateCache(store)
        await nursery.start(cache.run)
        http = ForwardingClient(timeout=10)
        forwarder = LeaderForwarder(store, http, SECRET)
        access = Authenticator(SECRET, store_lookup(store))
        metrics = Metrics(store, None, StoreSummaries(cache))
        server = ApiServer(store, access, AuditTrail(store, "node1"), forwarder, metrics, contiv_error_compat=True)
        config = HypercornConfig()
        config.bind = [f"127.0.0.1:{api}"]
        stop = trio.Event()
        app = create_app(server, api_contexts(store, cache, netmaster, http, node_name="node1", control_ip="127.0.0.1", secret=SECRET))
        await nursery.start(partial(serve, app.asgi, config, shutdown_trigger=stop.wait))
        yield LocalControlPlane(netmaster), RemoteControlPlane(forwarder), cache
        stop.set()
        await http.aclose()
        nursery.cancel_scope.cancel()


async def _outcome(call: Callable[[], Awaitable[Any]]) -> tuple[str, str]:
    try:
        await call()
    except ModelError as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


def _bad_requests(plane: ControlPlane, suffix: str) -> list[Callable[[], Awaitable[Any]]]:
    return [
        lambda: plane.create_endpoint(CreateEndpoint("default", "nosuch", f"a{suffix}", "node1")),
        lambda: plane.create_endpoint(CreateEndpoint("default", "pods", f"b{suffix}", "node1", group="nogroup")),
        lambda: plane.create_endpoint(CreateEndpoint("nosuchtenant", "pods", f"c{suffix}", "node1")),
        lambda: plane.create_endpoint(CreateEndpoint("default", "", f"d{suffix}", "node1")),
        lambda: plane.update_endpoint(UpdateEndpoint("default", "pods", f"missing{suffix}", "c1", {"app": "x"})),
    ]


async def test_local_and_forwarded_calls_raise_the_same_typed_errors(planes: tuple[LocalControlPlane, RemoteControlPlane, StateCache]) -> None:
    local, remote, _ = planes
    local_errors = [await _outcome(call) for call in _bad_requests(local, "-l")]
    remote_errors = [await _outcome(call) for call in _bad_requests(remote, "-l")]
    assert [name for name, _ in local_errors] == ["NotFoundError", "NotFoundError", "NotFoundError", "ValidationError", "NotFoundError"]
    assert remote_errors == local_errors


async def test_exhaustion_is_a_conflict_on_both_paths(planes: tuple[LocalControlPlane, RemoteControlPlane, StateCache]) -> None:
    local, remote, _ = planes
    first = await local.create_endpoint(CreateEndpoint("default", "tiny", "one", "node1"))
    second = await remote.create_endpoint(CreateEndpoint("default", "tiny", "two", "node1"))
    assert {first.endpoint.ip_address, second.endpoint.ip_address} == {"198.18.31.1", "198.18.31.2"}
    assert await _outcome(lambda: local.create_endpoint(CreateEndpoint("default", "tiny", "three", "node1"))) == await _outcome(
        lambda: remote.create_endpoint(CreateEndpoint("default", "tiny", "four", "node1"))
    )
    assert (await _outcome(lambda: remote.create_endpoint(CreateEndpoint("default", "tiny", "four", "node1"))))[0] == "ConflictError"


async def test_both_paths_answer_records_and_a_revision_the_cache_reaches(planes: tuple[LocalControlPlane, RemoteControlPlane, StateCache]) -> None:
    local, remote, cache = planes
    for plane, name in ((local, "viaLocal"), (remote, "viaRemote")):
        committed = await plane.create_endpoint(CreateEndpoint("default", "pods", name, "node1", container=name))
        snapshot = await cache.wait_revision(committed.revision)
        assert snapshot.endpoints[committed.endpoint.id] == committed.endpoint
        assert committed.endpoint.container_id == name and committed.endpoint.homing_host == "node1"
        again = await plane.create_endpoint(CreateEndpoint("default", "pods", name, "node1", container=name))
        assert again.endpoint == committed.endpoint, "create is idempotent per endpoint id"
        gone = await plane.delete_endpoint(DeleteEndpoint.of(committed.endpoint))
        assert committed.endpoint.id not in (await cache.wait_revision(gone)).endpoints


async def test_objects_through_both_paths_are_the_same_objects_and_errors(planes: tuple[LocalControlPlane, RemoteControlPlane, StateCache]) -> None:
    local, remote, _ = planes
    body = {"tenantName": "default", "networkName": "objs", "encap": "vxlan", "subnet": "198.18.32.0/24"}
    stored = await remote.put_object("networks", "default:objs", body)
    assert stored == await local.get_object("networks", "default:objs") == await remote.get_object("networks", "default:objs")
    assert await remote.put_object("networks", "default:objs", body) == stored, "an identical put changes nothing"
    assert await remote.list_objects("networks") == await local.list_objects("networks")
    assert await remote.inspect_object("networks", "default:objs") == await local.inspect_object("networks", "default:objs")
    endpoint = await local.create_endpoint(CreateEndpoint("default", "objs", "inspected", "node1"))
    assert await remote.inspect_object("endpoints", endpoint.endpoint.id) == await local.inspect_object("endpoints", endpoint.endpoint.id)
    await local.delete_endpoint(DeleteEndpoint.of(endpoint.endpoint))
    refused: list[Callable[[ControlPlane], Awaitable[Any]]] = [
        lambda plane: plane.get_object("networks", "default:nosuch"),
        lambda plane: plane.put_object("networks", "default:bad", {**body, "networkName": "bad", "subnet": "not-a-subnet"}),
        lambda plane: plane.delete_object("tenants", "nosuch"),
        lambda plane: plane.list_objects("nosuchcollection"),
    ]
    local_errors = [await _outcome(partial(call, local)) for call in refused]
    assert [name for name, _ in local_errors] == ["NotFoundError", "ValidationError", "NotFoundError", "NotFoundError"]
    assert [await _outcome(partial(call, remote)) for call in refused] == local_errors
    assert await remote.delete_object("networks", "default:objs") == "default:objs"
    assert (await _outcome(lambda: local.get_object("networks", "default:objs")))[0] == "NotFoundError"
    with pytest.raises(ModelError, match="cannot be a path segment"):
        await remote.get_object("networks", "default:a b")

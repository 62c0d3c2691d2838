"""One door to the leader: on a member that does not lead, a REST write a client sends and the
CNI server's typed ControlPlane call leave through the same LeaderForwarder, so both reach the
leader signed, with the hops header, the principal they act for and the error contract their
caller wants, and both get the leader's revision back.

The follower here is the real REST app (create_app, served by hypercorn) over an in-memory store
that names another member as the leader; that leader is a fake that records what it receives."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from contivd.api.app import ApiServer, create_app
from contivd.http import auth
from contivd.http.audit import AuditTrail
from contivd.http.control import RemoteControlPlane
from contivd.http.errors import TYPED_ERRORS_HEADER
from contivd.http.forwarder import ForwardingClient
from contivd.http.leader_forwarder import HOPS_HEADER, REVISION_HEADER, LeaderForwarder
from contivd.main import api_contexts
from contivd.metrics import Metrics, StoreSummaries
from contivd.netmaster.control import CreateEndpoint
from contivd.netmaster.service import Netmaster
from contivd.state import NodeRecord, StateCache, keys
from raftstore import UnavailableError
from raftstore.memory import MemoryStore
from tests.support.waiting import free_ports

SECRET = "one-door-test-secret"
LEADER_RAFT = "127.0.0.1:1"  # the raft address the store names as leader; the registry maps it to the fake's API
REVISION = 4242


class FollowingStore(MemoryStore):
    """A MemoryStore that follows: another member (`LEADER_RAFT`) leads."""

    def is_leader(self) -> bool:
        return False

    def leader(self) -> str | None:
        return LEADER_RAFT


@dataclass
class FakeLeader:
    """Records each request and answers 200 with a JSON body and a revision."""

    received: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.received.append((scope["method"], scope["path"], headers, body))
        answer = {"EndpointConfig": {"id": "pods.default-ep1", "netID": "pods.default", "containerId": ""}}
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (REVISION_HEADER.lower().encode(), str(REVISION).encode()), (b"x-leader-only", b"1")],
        }
        await send(start)
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


@dataclass
class Follower:
    url: str
    leader: FakeLeader
    plane: RemoteControlPlane
    client: ForwardingClient


async def _serve(nursery: trio.Nursery, app: Any, port: int, stop: trio.Event) -> None:
    config = HypercornConfig()
    config.bind = [f"127.0.0.1:{port}"]
    await nursery.start(partial(serve, app, config, shutdown_trigger=stop.wait))


@pytest.fixture
async def follower() -> AsyncIterator[Follower]:
    leader_port, follower_port = free_ports(2)
    store = FollowingStore()
    leader_record = NodeRecord("node1", LEADER_RAFT, f"http://127.0.0.1:{leader_port}", "127.0.0.1", "127.0.0.1", False, "test")
    await store.put(keys.node("node1"), leader_record.to_json())
    cache = StateCache(store)
    http = ForwardingClient(timeout=10)
    client = ForwardingClient(timeout=10)
    forwarder = LeaderForwarder(store, http, SECRET)  # one forwarder, as main.py builds it for the REST API and the CNI server
    server = ApiServer(
        store,
        auth.Authenticator(SECRET, auth.store_lookup(store)),
        AuditTrail(store, "node2"),
        forwarder,
        Metrics(store, None, StoreSummaries(cache)),
    )
    contexts = api_contexts(store, cache, Netmaster(store, "node2"), http, node_name="node2", control_ip="127.0.0.2", secret=SECRET)
    leader = FakeLeader()
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await _serve(nursery, leader, leader_port, stop)
        await _serve(nursery, create_app(server, contexts).asgi, follower_port, stop)
        yield Follower(f"http://127.0.0.1:{follower_port}", leader, RemoteControlPlane(forwarder, "node2"), client)
        stop.set()
        await http.aclose()
        await client.aclose()


def _signed_by_a_node(received: tuple[str, str, dict[str, str], bytes]) -> bool:
    method, path, headers, body = received
    return auth.verify(SECRET, headers[auth.SIGNATURE_HEADER.lower()], method, path, body)


async def test_a_rest_write_and_a_control_plane_call_leave_through_the_same_door(follower: Follower) -> None:
    body = json.dumps({"TenantName": "default", "NetworkName": "pods", "EndpointID": "ep1", "ConfigEP": {"Host": "node2"}}).encode()
    client_headers = {"Content-Type": "application/json", "Accept": "application/json", auth.PRINCIPAL_HEADER: "token:alice"}
    client_headers[auth.SIGNATURE_HEADER] = auth.sign(SECRET, "POST", "/plugin/createEndpoint", body)
    status, answer_headers, _ = await follower.client.request("POST", follower.url, "/plugin/createEndpoint", client_headers, body)
    committed = await follower.plane.create_endpoint(CreateEndpoint("default", "pods", "ep1", "node2", container="c1"))

    assert status == 200 and answer_headers[REVISION_HEADER.lower()] == str(REVISION) and "x-leader-only" not in answer_headers
    assert committed.revision == REVISION and committed.endpoint.container_id == "c1"
    (rest, rest_path, rest_headers, rest_body), (typed, typed_path, typed_headers, typed_body) = follower.leader.received
    assert (rest, rest_path, rest_body) == ("POST", "/plugin/createEndpoint", body)
    assert (typed, typed_path) == ("POST", "/plugin/createEndpoint")
    for received in follower.leader.received:
        assert received[2][HOPS_HEADER.lower()] == "1"
        assert _signed_by_a_node(received)
    assert rest_headers[auth.PRINCIPAL_HEADER.lower()] == "token:alice", "the leader's audit trail names the original caller"
    assert typed_headers[auth.PRINCIPAL_HEADER.lower()] == "node:node2"
    assert rest_headers["accept"] == "application/json" and TYPED_ERRORS_HEADER.lower() not in rest_headers, "the client's error contract"
    assert typed_headers[TYPED_ERRORS_HEADER.lower()] == "typed", "a typed caller turns statuses back into exceptions"


async def test_a_request_that_bounced_twice_or_finds_no_leader_reaches_none(follower: Follower) -> None:
    body = b"{}"
    headers = {"Accept": "application/json", HOPS_HEADER: "2", auth.SIGNATURE_HEADER: auth.sign(SECRET, "POST", "/plugin/deleteEndpoint", body)}
    status, answer_headers, answer = await follower.client.request("POST", follower.url, "/plugin/deleteEndpoint", headers, body)
    assert status == 503 and answer_headers["retry-after"] == "1" and "no leader is known" in json.loads(answer)["error"]
    await follower.plane.forwarder.store.delete(keys.node("node1"))  # the leader is no longer registered
    with pytest.raises(UnavailableError, match="no leader is known"):
        await follower.plane.create_endpoint(CreateEndpoint("default", "pods", "ep2", "node2"))
    assert follower.leader.received == []

"""HTTP face of the status page: the page and its assets, the snapshot, this node's report and
the live event stream, on the API listener.

Read-only, and authenticated like every other read (contivd.http.auth: root on the API
socket, a node signature or an operator token of any role; a tokenless loopback caller is a
viewer unless --loopback-access none). The store part
of the snapshot is built from the node's StateCache and cached per snapshot revision, the
cluster part (peer reports, with each node's BGP peering, fetched over HTTP, signed like forwarded requests) for
CLUSTER_TTL_SECONDS, so many open pages cost one build. The event stream waits on the cache
and sends at most one `store` event per BATCH_SECONDS: the first change is announced at once,
what follows within the interval goes into the next event (a burst of 10,000 endpoint writes
becomes a handful of refreshes), and it pushes the cluster part every HEALTH_SECONDS, since
agent and Raft health change without any store write.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

import trio
from quart import Response, make_response, request
from quart_trio import QuartTrio

from raftstore import KeyValueStore

from ..http import auth
from ..http.audit import stored
from ..http.errors import UnauthorizedError, answer_for
from ..http.forwarder import ForwardingClient
from ..http.tokens import Role
from ..nodes import registered_nodes
from ..state import StateCache
from .snapshot import cluster_model, node_report, recent_writes, store_model

if TYPE_CHECKING:  # annotations only: a follower of the store, or a node without the OVS datapath, loads none of these
    from ..agent.service import Agent
    from ..k8s.status import KubeHealth
    from ..tls.serving import ServingTls

log = logging.getLogger("contivd.status")

PEER_TIMEOUT_SECONDS = 1.0
CLUSTER_TTL_SECONDS = 1.0
BATCH_SECONDS = 0.25
HEALTH_SECONDS = 2.0
NODE_PATH = "/status/api/node"
ASSETS = {"status.js": "text/javascript; charset=utf-8", "status.css": "text/css; charset=utf-8"}
# Everything the page loads comes from this listener; no inline script can run even if some
# string escaped the DOM-building code.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def _asset(name: str) -> bytes:
    return (resources.files("contivd.status") / "static" / name).read_bytes()


@dataclass(frozen=True)
class StatusContext:
    """What the page reads: this node's store, typed state and agent, and how its readers are
    authenticated (as every API read: contivd.http.auth)."""

    store: KeyValueStore
    cache: StateCache
    node_name: str
    secret: str | None  # signs this node's requests for its peers' reports
    access: auth.Authenticator
    agent: Agent | None = None  # None when the node runs without a datapath
    # Local endpoint id → [datapath state, healthy], from the CNI server's orphan scan (None: no CNI server here).
    endpoint_datapath: Callable[[], Mapping[str, list[Any]]] | None = None
    peer_tls: ServingTls | None = None  # verifies peers' https:// API certificates (the cluster CA(s), following rotations)
    # The node's BGP speaker's `/inspect/bgp` answer (BgpSpeaker.inspect; None: no speaker, i.e. no datapath).
    bgp_inspect: Callable[[], Mapping[str, Any]] | None = None
    kube: KubeHealth | None = None  # Kubernetes mode: the node's watch (the leader's lists and watches)


class StatusService:
    """Builds and caches the page model for one node's API."""

    def __init__(self, ctx: StatusContext):
        self.ctx = ctx
        self.peers = ForwardingClient(timeout=PEER_TIMEOUT_SECONDS)
        if ctx.peer_tls is not None:
            ctx.peer_tls.attach(self.peers)
        self._store_part: tuple[int, str] = (-1, "")
        self._cluster_part: tuple[float, dict[str, Any]] = (0.0, {})
        self._cluster_lock = trio.Lock()

    def local_report(self) -> dict[str, Any]:
        agent = self.ctx.agent.statistics() if self.ctx.agent is not None else None
        datapath = self.ctx.endpoint_datapath() if self.ctx.endpoint_datapath is not None else None
        bgp = self.ctx.bgp_inspect() if self.ctx.bgp_inspect is not None else None
        kube = self.ctx.kube.view() if self.ctx.kube is not None else None
        return node_report(self.ctx.node_name, self.ctx.store.statistics(), agent, time.time(), datapath, bgp, kube)

    async def _peer_report(self, name: str, api_url: str, out: dict[str, Any]) -> None:
        headers = {}
        if self.ctx.secret:
            headers[auth.SIGNATURE_HEADER] = auth.sign(self.ctx.secret, "GET", NODE_PATH, b"")
        with trio.move_on_after(PEER_TIMEOUT_SECONDS):
            try:
                status, _, body = await self.peers.request("GET", api_url, NODE_PATH, headers, b"")
                if status == 200:
                    out[name] = json.loads(body)
                else:
                    log.info("status: %s answered %d for its report", name, status)
            except (OSError, ConnectionError, ValueError, trio.TooSlowError) as exc:
                log.info("status: no report from %s: %s", name, exc)

    async def cluster_part(self) -> dict[str, Any]:
        async with self._cluster_lock:  # concurrent pages share one round of peer requests
            built_at, part = self._cluster_part
            if time.monotonic() - built_at < CLUSTER_TTL_SECONDS:
                return part
            nodes = registered_nodes(self.ctx.store)
            reports: dict[str, Any] = {self.ctx.node_name: self.local_report()}
            async with trio.open_nursery() as nursery:
                for node in nodes:
                    if node.name != self.ctx.node_name:
                        nursery.start_soon(self._peer_report, node.name, node.api_url, reports)
            part = cluster_model(self.ctx.store.statistics(), self.ctx.node_name, nodes, reports)
            self._cluster_part = (time.monotonic(), part)
            return part

    def store_part(self) -> tuple[int, str]:
        """The store part as JSON text, rebuilt only when the snapshot's revision moved."""
        snapshot = self.ctx.cache.catch_up()
        if self._store_part[0] != snapshot.revision:
            self._store_part = (snapshot.revision, json.dumps(store_model(snapshot), separators=(",", ":")))
        return self._store_part

    async def snapshot(self) -> str:
        cluster = await self.cluster_part()
        revision, store = self.store_part()
        writes = json.dumps(recent_writes(stored(self.ctx.store)))
        return f'{{"revision":{revision},"generatedAt":{time.time():.3f},"cluster":{json.dumps(cluster)},"store":{store},"writes":{writes}}}'

    async def events(self) -> AsyncIterator[str]:
        """Server-sent events: `store` (revision moved; refetch the snapshot), `cluster` (the
        cluster part itself), and a comment now and then so proxies keep the stream open."""
        yield "retry: 1000\n\n"
        cache = self.ctx.cache
        seen = cache.catch_up().revision
        next_health = trio.current_time()
        while True:
            changed = False
            with trio.move_on_at(next_health):
                await cache.wait_revision(seen + 1)
                changed = True
            if changed:
                seen = cache.catch_up().revision
                yield f"event: store\ndata: {json.dumps({'revision': seen})}\n\n"
                await trio.sleep(BATCH_SECONDS)  # throttle: what changes meanwhile goes into the next event
            if trio.current_time() >= next_health:
                yield f"event: cluster\ndata: {json.dumps(await self.cluster_part())}\n\n"
                next_health = trio.current_time() + HEALTH_SECONDS


def register_status_routes(app: QuartTrio, ctx: StatusContext) -> None:
    """Add the status page's routes to the API app (none under /plugin/: the fast path owns those)."""
    service = StatusService(ctx)
    page = _asset("index.html")
    assets = {name: _asset(name) for name in ASSETS}

    async def denied() -> Response | None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            ctx.access.check(request.method, request.full_path.rstrip("?"), b"", headers, request.remote_addr, Role.VIEWER)
        except UnauthorizedError as exc:
            return Response(json.dumps({"error": str(exc)}) + "\n", status=401, headers={"content-type": "application/json"})
        return None

    def answer(body: bytes | str, content_type: str) -> Response:
        return Response(body, status=200, headers={"content-type": content_type, **SECURITY_HEADERS})

    async def data(build: Callable[[], Awaitable[str]]) -> Response:
        """JSON from `build`, or the API's usual JSON error (e.g. 503 while the store is closing)."""
        try:
            return answer(await build(), "application/json")
        except Exception as exc:  # noqa: BLE001 - every error becomes an answer, as in the Dispatcher
            error = answer_for(exc)
            return Response(json.dumps({"error": error.message}) + "\n", status=error.status, headers={"content-type": "application/json"})

    @app.get("/")
    async def index() -> Response:
        return await denied() or answer(page, "text/html; charset=utf-8")

    @app.get("/status/static/<name>")
    async def asset(name: str) -> Response:
        if name not in assets:
            return Response(json.dumps({"error": f"no status asset {name!r}"}) + "\n", status=404, headers={"content-type": "application/json"})
        return await denied() or answer(assets[name], ASSETS[name])

    @app.get("/status/api/snapshot")
    async def snapshot() -> Response:
        return await denied() or await data(service.snapshot)

    @app.get(NODE_PATH)
    async def node() -> Response:
        async def report() -> str:
            return json.dumps(service.local_report())

        return await denied() or await data(report)

    @app.get("/status/events")
    async def events() -> Response:
        refused = await denied()
        if refused is not None:
            return refused
        response = cast(Response, await make_response(service.events(), 200, {"content-type": "text/event-stream", **SECURITY_HEADERS}))
        response.timeout = None  # an open page keeps its stream for as long as it likes
        return response

    @app.after_serving
    async def close_peer_connections() -> None:
        await service.peers.aclose()

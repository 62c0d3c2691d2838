"""The Quart application: every route of routes.ROUTES, authentication, leader forwarding.

Reads are answered by any member (they sync with the log first, so they are linearizable);
writes run on the Raft leader, and other members forward them there with a signed request,
so a client may talk to any node. The app holds no business logic: it parses, dispatches to
the Netmaster and renders answers and errors.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope
from quart import Response, request
from quart_trio import QuartTrio

from .. import __version__
from ..bgp import bgp_oper
from ..http import auth, tokens
from ..http.audit import AuditTrail, object_key, stored
from ..http.control import HOPS_HEADER, REVISION_HEADER
from ..http.errors import (
    CONTIV_NO_ROUTE,
    TYPED_ERRORS_HEADER,
    BadRequestError,
    NoRouteError,
    UnauthorizedError,
    answer_for,
    wants_contiv_errors,
)
from ..http.forwarder import ForwardingClient
from ..http.hardening import parse_json_limited
from ..http.leadership import unless_leader_changes
from ..k8s.listing import kubernetes_services
from ..metrics import Metrics, StoreSummaries
from ..model import COLLECTIONS, UNSUPPORTED_COLLECTIONS, NotFoundError, contiv_line
from ..model.netpolicy import TraceQuery, parse_trace
from ..model.rulehits import PolicyHits, netpol_policies, policy_hits
from ..nodes import leader_api_url, registered_nodes
from ..state import EndpointState, StateCache
from ..state.records import policy_rule_to_json
from . import access, ca_rotation, membership
from .health import OpsEndpoints
from .routes import ROUTES, Route, openapi_document, required_role

if TYPE_CHECKING:  # annotations only: a follower of the store, or a node without the OVS datapath, loads none of these
    from ..agent.service import Agent
    from ..k8s.status import KubeHealth
    from ..netmaster.service import Netmaster
    from ..nodes import NodeStore
    from ..tls.serving import ServingTls
    from .tracing import Half

log = logging.getLogger("contivd.api")
# A forwarded write may wait on the leader for the store's request timeout (5 s) before the
# leader answers 503 itself; a little more than that, not a value that outlasts every client.
# A leader that is gone is noticed sooner: connections time out after 1 s, and a forward is
# abandoned as soon as this member follows another leader (http/leadership.py).
FORWARD_TIMEOUT_SECONDS = 6.0


@dataclass
class ApiContext:
    """What the handlers need; built by the composition root."""

    store: NodeStore
    cache: StateCache  # the typed state readers use (status page, metrics, debug routes)
    netmaster: Netmaster
    node_name: str
    control_ip: str
    secret: str | None
    http: ForwardingClient
    contiv_error_compat: bool = False
    agent: Agent | None = None  # None when the node runs without a datapath (--datapath none)
    kube: KubeHealth | None = None  # Kubernetes mode (--kubeconfig): how the leader's watch is doing
    tls: ServingTls | None = None  # the node's TLS (the CAs its certificate chains to); None: plain HTTP
    loopback_role: tokens.Role | None = None  # a tokenless loopback TCP caller's role (--loopback-access); None: refused
    agent_socket: Path | None = None  # this node's agent API for root (--agent-socket): the netmaster's calls to its own agent
    # The store summary (endpoints per node, IPAM usage) the metrics and systemd's STATUS=
    # line both read: one cache, so a changed store is summarised once, not once per reader.
    summaries: StoreSummaries = field(init=False)
    access: auth.Authenticator = field(init=False)  # tokens from this node's replica, signatures with the secret
    audit: AuditTrail = field(init=False)  # main runs its store writer

    def __post_init__(self) -> None:
        self.summaries = StoreSummaries(self.cache)
        self.access = auth.Authenticator(self.secret, auth.store_lookup(self.store), loopback_role=self.loopback_role)
        self.audit = AuditTrail(self.store, self.node_name)


@dataclass(frozen=True)
class AtRevision:
    """A handler's answer to a write, with the store revision that holds it: sent as a header
    so a forwarding node can wait for its own state to reach it instead of syncing the log."""

    value: Any
    revision: int


class Handlers:
    def __init__(self, ctx: ApiContext):
        self.ctx = ctx
        self.nm = ctx.netmaster

    def _collection(self, collection: str) -> str:
        if collection not in COLLECTIONS and collection not in UNSUPPORTED_COLLECTIONS:
            raise NoRouteError(f"unknown collection {collection!r}")
        return collection

    @staticmethod
    def _unsupported_missing(collection: str) -> NotFoundError:
        """Contiv's generated lookups of the never-registered volume types (`volume not found`)."""
        return NotFoundError(f"{collection} not found", contiv=contiv_line("object-not-found", kind=collection.removesuffix("s")))

    async def list_objects(self, body: bytes, collection: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            return []
        return await self.nm.list_objects(collection)

    async def get_object(self, body: bytes, collection: str, key: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise self._unsupported_missing(collection)
        return await self.nm.get_object(collection, key)

    async def put_object(self, body: bytes, collection: str, key: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise BadRequestError(f"{collection} are not supported", contiv=contiv_line("unsupported-type"))
        return await self.nm.put_object(collection, key, parse_json_limited(body))

    async def delete_object(self, body: bytes, collection: str, key: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise self._unsupported_missing(collection)
        return await self.nm.delete_object(collection, key)

    async def inspect_object(self, body: bytes, collection: str, key: str) -> Any:
        if collection == "endpoints":
            return await self.nm.inspect_endpoint(key)
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise self._unsupported_missing(collection)
        answer = await self.nm.inspect_object(collection, key)
        if collection == "Bgps":
            answer["Oper"] = await self._bgp_oper(key)
        return answer

    async def _bgp_oper(self, hostname: str) -> dict[str, Any]:
        """The Bgp object's Oper from its node's speaker (`/inspect/bgp` on the node agent), as
        Contiv's netmaster filled it in; empty, and logged, when the node cannot answer."""
        try:
            called = await self._call_agent(hostname, "GET", "/inspect/bgp")
        except (OSError, ConnectionError, trio.TooSlowError) as exc:
            log.warning("Bgp %s: the node's /inspect/bgp did not answer: %s", hostname, exc)
            return {}
        if called is None or called[0] != 200:
            return {}
        return bgp_oper(json.loads(called[1]))

    async def _call_agent(self, node_name: str, method: str, path: str) -> tuple[int, bytes] | None:
        """A signed call to a node agent's API (this node's own over its root-only socket, which
        needs no cluster secret); None when the node is unknown or runs no agent."""
        node = next((n for n in registered_nodes(self.ctx.store) if n.name == node_name), None)
        if node is None or not node.agent_url:
            return None
        if node_name == self.ctx.node_name and self.ctx.agent_socket is not None:
            status, _, body = await self.ctx.http.request(method, f"unix:{self.ctx.agent_socket}", path, {}, b"")
            return status, body
        headers = {auth.SIGNATURE_HEADER: auth.sign(self.ctx.secret, method, path, b"")} if self.ctx.secret else {}
        headers[auth.PRINCIPAL_HEADER] = f"node:{self.ctx.node_name}"
        status, _, body = await self.ctx.http.request(method, node.agent_url, path, headers, b"")
        return status, body

    async def _plugin(self, body: bytes, call: Callable[[dict[str, Any]], Awaitable[Any]]) -> Any:
        payload = parse_json_limited(body)
        if not isinstance(payload, dict):
            raise BadRequestError("request body must be a JSON object")
        return await call(payload)

    async def alloc_address(self, body: bytes) -> Any:
        return await self._plugin(body, self.nm.alloc_address)

    async def release_address(self, body: bytes) -> Any:
        return await self._plugin(body, self.nm.release_address)

    async def create_endpoint(self, body: bytes) -> Any:
        """Contiv's answer leaves `containerId` empty (its netplugin sets it later, on the start
        event); contivd records it at once for its CNI server, but answers as Contiv did."""
        answer, revision = await self._plugin(body, self.nm.create_endpoint_at)
        return AtRevision({**answer, "EndpointConfig": {**answer["EndpointConfig"], "containerId": ""}}, revision)

    async def delete_endpoint(self, body: bytes) -> Any:
        return AtRevision(await self._plugin(body, self.nm.delete_endpoint), self.ctx.store.revision)

    async def update_endpoint(self, body: bytes) -> Any:
        return AtRevision(await self._plugin(body, self.nm.update_endpoint), self.ctx.store.revision)

    async def version(self, body: bytes) -> Any:
        return {"GitCommit": "", "Version": __version__, "BuildTime": ""}

    async def info(self, body: bytes) -> Any:
        store = self.ctx.store
        stats = store.statistics()
        nodes = registered_nodes(store)
        return {
            "local-ip": self.ctx.control_ip,
            "leader-ip": leader_api_url(store) or stats.leader or "",
            "current-state": "leader" if stats.role == "leader" else "follower",
            "netplugin-nodes": [n.control_ip for n in nodes],
            "netmaster-nodes": [n.control_ip for n in nodes if not n.readonly],
            "cluster": asdict(stats),
            "nodes": [n.to_json() for n in nodes],
            "agent": asdict(self.ctx.agent.statistics()) if self.ctx.agent is not None else None,
            "kubernetes": asdict(self.ctx.kube.view()) if self.ctx.kube is not None else None,
            "tls": {"caFingerprint": self.ctx.tls.fingerprint} if self.ctx.tls else None,
        }

    async def kubernetes_services(self, body: bytes) -> Any:
        return kubernetes_services(await self.ctx.cache.sync())

    async def kubernetes_trace(self, body: bytes, spec: str) -> Any:
        """One packet's fate (the first of a connection): the model's verdict over Contiv's and
        Kubernetes' policy, and OVS's own (ofproto/trace) on the source's node and, across nodes,
        the destination's, whichever node is asked (contivd/api/tracing.py); `agree` false is a bug."""
        from . import tracing  # here: its pure helpers live beside the agent's netlink code (pyroute2), which most nodes never load

        snapshot = await self.ctx.cache.sync()
        routing = self.ctx.agent.settings.routing if self.ctx.agent is not None else snapshot.forwarding_mode() == "routing"
        return await tracing.trace(snapshot, parse_trace(spec), self.ctx.node_name, self._trace_half, routing=routing)

    async def _trace_half(self, node: str, side: str, query: TraceQuery, src: str, dst: str) -> Half:
        """One half of a trace from `node`'s agent: this node's directly, another's by the signed agent call."""
        from . import tracing

        if node == self.ctx.node_name and self.ctx.agent is not None:
            from ..agent.trace import TraceError  # loaded with the agent (contivd.agent.service)

            try:
                traced = await self.ctx.agent.trace(
                    int(ipaddress.IPv4Address(src)), int(ipaddress.IPv4Address(dst)), query.proto, query.port, arrival=side == "destination"
                )
            except TraceError as exc:
                return {"node": node, "error": str(exc)}
            return (
                asdict(traced) if traced is not None else {"node": node, "skipped": f"{src if side == 'source' else dst} is not a pod on node {node}"}
            )
        try:
            called = await self._call_agent(node, "GET", f"/trace/{side}/{src}/{dst}/{query.proto}/{query.port}")
        except (OSError, ConnectionError, trio.TooSlowError) as exc:
            return {"node": node, "unanswered": f"node {node}'s agent did not answer: {exc or type(exc).__name__}"}
        try:
            parsed = json.loads(called[1]) if called is not None and called[0] == 200 else None
        except ValueError:
            parsed = None
        return tracing.half_from_agent(node, called, parsed)

    async def services(self, body: bytes) -> Any:
        snapshot = await self.ctx.cache.sync()
        return [service.to_json() for _, service in sorted(snapshot.services.items())]

    async def service(self, body: bytes, key: str) -> Any:
        """A 1-element list; a missing id answers `null`, as Contiv's did (its lookup error was
        shadowed, so the handler marshalled a nil list), e.g. `/service/netmaster`."""
        service, _, tenant = key.partition(":")
        found = (await self.ctx.cache.sync()).services.get(f"{service}:{tenant}")
        return None if found is None else [found.to_json()]

    async def policy_hits(self, body: bytes) -> Any:
        """Each node agent's `/rulestats` and `/netpolstats` summed (contivd.model.rulehits); a
        node that cannot answer is named in `unanswered` (its packets are missing from the sums,
        not an error)."""
        hits, unanswered = await self._gather_hits()
        return {**hits.to_json(), "unanswered": unanswered}

    async def policy_hits_of(self, body: bytes, scope: str) -> Any:
        """`policy_hits` of one tenant (`<tenant>`, a Kubernetes namespace too) or one policy
        (`<tenant>:<policy>`, a NetworkPolicy `<namespace>:<name>` too); unknown ones are 404."""
        tenant, _, policy = scope.partition(":")
        snapshot = await self.ctx.cache.sync()
        netpol = netpol_policies(rule.rule_id for pod in snapshot.k8s_netpol.values() for rule in pod.rules)
        if snapshot.object("tenant", tenant) is None and tenant not in netpol:
            raise NotFoundError(f"tenant {tenant!r} not found: no Contiv tenant nor namespace with NetworkPolicy rules has that name")
        if policy and snapshot.object("policy", f"{tenant}:{policy}") is None and policy not in netpol.get(tenant, set()):
            raise NotFoundError(f"policy {tenant}:{policy} not found: no Contiv policy nor NetworkPolicy with rules has that name")
        hits, unanswered = await self._gather_hits()
        return {**hits.scoped(tenant, policy or None).to_json(), "unanswered": unanswered}

    async def _gather_hits(self) -> tuple[PolicyHits, list[str]]:
        """Every agent node's rule counters, asked at once, and the nodes that did not answer both."""
        nodes = [node.name for node in registered_nodes(self.ctx.store) if node.agent_url]
        answers: dict[str, tuple[Any, Any]] = {}

        async def ask(name: str) -> None:
            try:
                rules = await self._call_agent(name, "GET", "/rulestats")
                netpol = await self._call_agent(name, "GET", "/netpolstats")
            except (OSError, ConnectionError, trio.TooSlowError) as exc:
                log.info("policy hits: node %s's agent did not answer: %s", name, exc)
                return
            if rules is not None and netpol is not None and rules[0] == netpol[0] == 200:
                answers[name] = (json.loads(rules[1]), json.loads(netpol[1]))

        async with trio.open_nursery() as nursery:
            for name in nodes:
                nursery.start_soon(ask, name)
        counted = [answers[name] for name in nodes if name in answers]
        return policy_hits((c[0] for c in counted), (c[1] for c in counted)), [name for name in nodes if name not in answers]

    async def debug_ofnet(self, body: bytes) -> Any:
        snapshot = await self.ctx.cache.sync()
        return {
            "MyAddr": self.ctx.control_ip,
            "EndpointDb": {id_: ep.to_json() for id_, ep in sorted(snapshot.endpoints.items())},
            "PolicyDb": {id_: policy_rule_to_json(rule) for id_, rule in sorted(snapshot.rules.items())},
        }

    async def debug_epcleanup(self, body: bytes, tenant: str, category: str, key: str) -> Any:
        names = {"net": "Network", "group": "EPG", "ep": "Endpoint"}
        if category not in names:
            raise BadRequestError(f"category must be net, group or ep, got {category!r}")
        snapshot = await self.ctx.cache.sync()
        for _, ep in sorted(snapshot.endpoints.items()):  # a copy: deleting changes the snapshot
            matches = {
                "net": ep.net_id == f"{key}.{tenant}",
                "group": ep.tenant == tenant and ep.service_name == key,
                "ep": ep.tenant == tenant and key in ep.endpoint_id,
            }[category]
            if matches:
                await self.nm.delete_endpoint({"TenantName": tenant, "NetworkName": ep.network, "EndpointID": ep.endpoint_id})
                await self._reclaim_on_node(ep)
        return f"Received request to cleanup {names[category]} with ID: {key}"

    async def _reclaim_on_node(self, ep: EndpointState) -> None:
        """Ask the endpoint's node agent to drop its OVS port (Contiv's reclaimEndpoint); a node
        that is down or runs no agent is only logged: its next sync drops the flows anyway."""
        try:
            called = await self._call_agent(ep.homing_host, "DELETE", f"/debug/reclaimEndpoint/{ep.id}")
        except (OSError, ConnectionError, trio.TooSlowError) as exc:
            log.warning("reclaiming endpoint %s on node %s failed: %s", ep.id, ep.homing_host, exc)
            return
        if called is None:
            return
        status, body = called
        if status != 200:
            log.warning("reclaiming endpoint %s on node %s: HTTP %d %s", ep.id, ep.homing_host, status, body[:200].decode(errors="replace"))
        else:
            log.info("node %s's agent reclaimed endpoint %s", ep.homing_host, ep.id)

    async def openapi(self, body: bytes) -> Any:
        return openapi_document(__version__)

    async def list_tokens(self, body: bytes) -> Any:
        return await access.list_tokens(self.ctx.store)

    async def create_token(self, body: bytes, name: str) -> Any:
        return AtRevision(*await access.create_token(self.ctx.store, name, parse_json_limited(body)))

    async def revoke_token(self, body: bytes, name: str) -> Any:
        return AtRevision(*await access.revoke_token(self.ctx.store, name))

    async def add_voter(self, body: bytes, address: str) -> Any:
        return AtRevision(*await membership.add_voter(self.ctx.store, address))

    async def remove_voter(self, body: bytes, address: str) -> Any:
        return AtRevision(*await membership.remove_voter(self.ctx.store, address))

    async def rotate_ca(self, body: bytes) -> Any:
        request = parse_json_limited(body) if body.strip() else None
        return AtRevision(*await ca_rotation.rotate_ca(self.ctx.store, self.ctx.secret, self.ctx.node_name, request))

    async def list_audit(self, body: bytes) -> Any:
        await self.ctx.store.sync()
        return [entry.to_json() for entry in stored(self.ctx.store)]


@dataclass(frozen=True)
class Incoming:
    """A request as the dispatcher needs it, whichever ASGI layer received it."""

    method: str
    path: str  # with the query string, as signed by forwarding nodes
    headers: Mapping[str, str]  # lower-case names
    remote: str | None
    body: bytes


Answer = tuple[int, dict[str, str], bytes]


def _answer(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    return status, {"content-type": "application/json", **(headers or {})}, (json.dumps(value) + "\n").encode()


def _contiv_text_answer(status: int, text: str) -> Answer:
    """Go's `http.Error`: the text and a newline, as text/plain, never sniffed."""
    return status, {"content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff"}, (text + "\n").encode()


def _error_answer(exc: BaseException, contiv_compat: bool = False) -> Answer:
    answer = answer_for(exc)
    if contiv_compat and isinstance(exc, NoRouteError):
        return _contiv_text_answer(404, CONTIV_NO_ROUTE)
    if contiv_compat and answer.status not in (401, 403):  # Contiv answered every error 500 with its text (Decision 1); it had no access control
        return _contiv_text_answer(500, answer.contiv_text)
    return _answer({"error": answer.message}, answer.status, {"retry-after": str(answer.retry_after)} if answer.retry_after else None)


class Dispatcher:
    """Authentication, leader forwarding and error mapping around the handlers."""

    def __init__(self, ctx: ApiContext, metrics: Metrics | None = None):
        self.ctx = ctx
        self.handlers = Handlers(ctx)
        self.metrics = metrics

    def authenticate(self, req: Incoming) -> tokens.Principal:
        return self.ctx.access.identify(req.method, req.path, req.body, req.headers, req.remote)

    async def forward(self, route: Route, req: Incoming, principal: tokens.Principal) -> Answer:
        hops = int(req.headers.get(HOPS_HEADER.lower(), "0") or 0)
        url = leader_api_url(self.ctx.store)
        contiv = wants_contiv_errors(req.headers, self.ctx.contiv_error_compat)
        if url is None or hops >= 2:
            return _error_answer(_no_leader(), contiv)
        headers = {"Content-Type": req.headers.get("content-type", "application/json"), HOPS_HEADER: str(hops + 1)}
        # The leader picks the error contract from the original client's headers.
        for name in (TYPED_ERRORS_HEADER, "Accept"):
            if name.lower() in req.headers:
                headers[name] = req.headers[name.lower()]
        if self.ctx.secret:
            headers[auth.SIGNATURE_HEADER] = auth.sign(self.ctx.secret, route.method, req.path, req.body)
        headers[auth.PRINCIPAL_HEADER] = principal.name  # the leader's audit trail names the caller
        try:
            status, answer_headers, body = await unless_leader_changes(
                self.ctx.store, lambda: self.ctx.http.request(route.method, url, req.path, headers, req.body), f"forwarding to the leader at {url}"
            )
        except (OSError, ConnectionError, trio.TooSlowError) as exc:
            log.warning("forwarding %s %s to the leader at %s failed: %s", route.method, req.path, url, exc)
            return _error_answer(_no_leader(f"the leader at {url} did not answer: {exc}"), contiv)
        kept = ("content-type", "retry-after", "x-content-type-options", REVISION_HEADER.lower())
        passthrough = {k: v for k, v in answer_headers.items() if k in kept}
        return status, passthrough, body

    async def dispatch(self, route: Route, params: Mapping[str, str], req: Incoming) -> Answer:
        started = time.perf_counter()
        answer = await self._dispatch(route, params, req)
        if self.metrics is not None:
            self.metrics.observe_request(route.path, route.method, answer[0], started)
        log.debug("%s %s from %s: %d in %.1f ms", req.method, req.path, req.remote, answer[0], (time.perf_counter() - started) * 1000)
        return answer

    async def _dispatch(self, route: Route, params: Mapping[str, str], req: Incoming) -> Answer:
        principal: tokens.Principal | None = None
        try:
            principal = self.authenticate(req)
            tokens.require(principal, required_role(route, params))
            if route.write and not self.ctx.store.is_leader():
                return await self.forward(route, req, principal)
            answer = await self._run(route, params, req)
        except Exception as exc:  # noqa: BLE001 - every error becomes an answer
            answer = _error_answer(exc, wants_contiv_errors(req.headers, self.ctx.contiv_error_compat))
        # Executed (or refused) here: the leader's trail. A tokenless loopback caller is anyone on
        # the node: its refusals are not stored, or any local user could flush the bounded trail.
        if route.write and principal is not None and principal is not self.ctx.access.loopback:
            self.ctx.audit.record(principal.name, route.method, route.path, object_key(params, req.body), answer[0])
        return answer

    async def _run(self, route: Route, params: Mapping[str, str], req: Incoming) -> Answer:
        handler = getattr(self.handlers, route.name)
        if route.write:  # on the leader: a write it can no longer commit ends when it steps down
            value = await unless_leader_changes(self.ctx.store, lambda: handler(req.body, **params), f"{route.method} {req.path}")
        else:
            value = await handler(req.body, **params)
        if isinstance(value, AtRevision):
            return _answer(value.value, headers={REVISION_HEADER.lower(): str(value.revision)})
        return _answer(value)


class PluginFastPath:
    """ASGI front that answers the `/plugin/*` routes without Quart's request machinery.

    Every pod start and stop goes through them; Quart's routing, contexts and response
    objects cost ~1 ms of CPU per request here, several times the work itself. Everything
    else falls through to the Quart app.
    """

    def __init__(self, app: QuartTrio, dispatcher: Dispatcher):
        self.app = app
        self.dispatcher = dispatcher
        self.routes = {route.path: route for route in ROUTES if route.path.startswith("/plugin/")}

    async def __call__(self, asgi_scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        scope = cast(dict[str, Any], asgi_scope)
        route = self.routes.get(scope.get("path", "")) if scope["type"] == "http" else None
        if route is None or scope["method"] != route.method:
            await self.app(asgi_scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = cast(dict[str, Any], await receive())
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        status, headers, body = await self.dispatcher.dispatch(route, {}, incoming_from_scope(scope, b"".join(chunks)))
        start = {"type": "http.response.start", "status": status, "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        await send(cast(Any, start))
        await send(cast(Any, {"type": "http.response.body", "body": body, "more_body": False}))


def incoming_from_scope(scope: dict[str, Any], body: bytes) -> Incoming:
    query = scope.get("query_string", b"").decode()
    return Incoming(
        method=scope["method"],
        path=scope["path"] + (f"?{query}" if query else ""),
        headers={k.decode().lower(): v.decode() for k, v in scope["headers"]},
        remote=(scope.get("client") or (None,))[0],
        body=body,
    )


@dataclass(frozen=True)
class ApiApp:
    """What `create_app` builds: `asgi` to serve, and the Quart app and dispatcher that the composition
    root adds further routes to (the status page's), so that this package needs none of them."""

    asgi: OpsEndpoints
    quart: QuartTrio
    dispatcher: Dispatcher


def create_app(ctx: ApiContext) -> ApiApp:
    """The ASGI application: health, readiness and metrics, then the plugin fast path, in front of the Quart app."""
    app = QuartTrio("contivd")
    app.url_map.strict_slashes = False
    metrics = Metrics(ctx.store, ctx.agent, ctx.summaries, ctx.kube)
    dispatcher = Dispatcher(ctx, metrics)

    def refusal(scope: dict[str, Any]) -> str | None:
        try:
            dispatcher.authenticate(incoming_from_scope(scope, b""))  # every role may read /metrics
        except UnauthorizedError as exc:
            return str(exc)
        return None

    def register(route: Route) -> None:
        async def view(**params: str) -> Response:
            req = Incoming(
                method=request.method,
                path=request.full_path.rstrip("?"),
                headers={k.lower(): v for k, v in request.headers.items()},
                remote=request.remote_addr,
                body=cast(bytes, await request.get_data(as_text=False)),
            )
            status, headers, body = await dispatcher.dispatch(route, params, req)
            return Response(body, status=status, headers=headers)

        app.add_url_rule(route.path, endpoint=f"{route.name}_{route.method}", view_func=view, methods=[route.method])

    for route in ROUTES:
        register(route)

    def no_route(status: int, message: str) -> Response:
        """gorilla/mux answered an unknown path, and (having no 405) an unknown method, with 404."""
        if wants_contiv_errors({k.lower(): v for k, v in request.headers.items()}, ctx.contiv_error_compat):
            status, headers, body = _contiv_text_answer(404, CONTIV_NO_ROUTE)
        else:
            status, headers, body = _answer({"error": message}, status)
        return Response(body, status=status, headers=headers)

    @app.errorhandler(404)
    async def not_found(_: Exception) -> Response:
        return no_route(404, f"no route {request.method} {request.path}")

    @app.errorhandler(405)
    async def not_allowed(_: Exception) -> Response:
        return no_route(405, f"method {request.method} not allowed on {request.path}")

    return ApiApp(OpsEndpoints(PluginFastPath(app, dispatcher), ctx.store, ctx.agent, metrics, refusal, ctx.kube, ctx.tls), app, dispatcher)


def _no_leader(detail: str = "no leader is known yet (election in progress or no quorum)") -> Exception:
    from raftstore import UnavailableError

    return UnavailableError(detail)

"""The Quart application: every route of routes.ROUTES, authentication, leader forwarding.

Reads are answered by any member (they sync with the log first, so they are linearizable);
writes run on the Raft leader, and other members send them there through the one forwarder
every call to the leader takes (contivd.http.leader_forwarder), so a client may talk to any
node. The app holds no business logic: it authenticates, forwards or runs the route's handler
(bound once at start to its area's context: handler.py), and renders answers and errors.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope
from quart import Response, request
from quart_trio import QuartTrio

from ..http import auth, tokens
from ..http.answer import send_answer
from ..http.audit import AuditTrail, object_key
from ..http.errors import CONTIV_NO_ROUTE, NoRouteError, UnauthorizedError, answer_for, wants_contiv_errors
from ..http.leader_forwarder import REVISION_HEADER, LeaderForwarder, LeaderUnreachableError, hops_of
from ..http.leadership import unless_leader_changes
from ..metrics import Metrics
from .handler import AtRevision, Run, contexts_by_type
from .health import OpsEndpoints
from .routes import ROUTES, Route, required_role

if TYPE_CHECKING:  # annotations only: a follower of the store, or a node without the OVS datapath, loads none of these
    from ..agent.service import Agent
    from ..k8s.status import KubeHealth
    from ..nodes import NodeStore
    from ..tls.serving import ServingTls

log = logging.getLogger("contivd.api")


@dataclass(frozen=True)
class ApiServer:
    """What the dispatcher needs around the handlers; built by the composition root."""

    store: NodeStore
    access: auth.Authenticator  # tokens from this node's replica, signatures with the secret
    audit: AuditTrail  # main runs its store writer
    forwarder: LeaderForwarder  # the one door to the leader (shared with the CNI server's ControlPlane)
    metrics: Metrics
    contiv_error_compat: bool = False


@dataclass(frozen=True)
class BoundRoute:
    """A route and its handler bound to its area's context: what a request runs, looked up once."""

    route: Route
    run: Run


def bind_routes(contexts: tuple[object, ...], routes: tuple[Route, ...] = ROUTES) -> tuple[BoundRoute, ...]:
    """Every route with its handler bound, at start: LookupError if an area's context is missing."""
    by_type = contexts_by_type(contexts)
    return tuple(BoundRoute(route, route.handler.bind(by_type)) for route in routes)


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
    """Authentication, leader forwarding, error mapping and the audit trail around the handlers."""

    def __init__(self, server: ApiServer):
        self.store = server.store
        self.access = server.access
        self.audit = server.audit
        self.forwarder = server.forwarder
        self.metrics = server.metrics
        self.contiv_error_compat = server.contiv_error_compat

    def authenticate(self, req: Incoming) -> tokens.Principal:
        return self.access.identify(req.method, req.path, req.body, req.headers, req.remote)

    async def forward(self, route: Route, req: Incoming, principal: tokens.Principal) -> Answer:
        """The leader's answer, passed on; the leader picks the error contract from the original
        client's headers, and its audit trail names `principal`. A request that reached no leader
        is answered here, in the client's contract (a forward abandoned on a leader change raises)."""
        try:
            return await self.forwarder.forward(
                route.method, req.path, req.body, principal=principal.name, headers=req.headers, hops=hops_of(req.headers)
            )
        except LeaderUnreachableError as exc:
            return _error_answer(exc, wants_contiv_errors(req.headers, self.contiv_error_compat))

    async def dispatch(self, bound: BoundRoute, params: Mapping[str, str], req: Incoming) -> Answer:
        started = time.perf_counter()
        answer = await self._dispatch(bound, params, req)
        self.metrics.observe_request(bound.route.path, bound.route.method, answer[0], started)
        log.debug("%s %s from %s: %d in %.1f ms", req.method, req.path, req.remote, answer[0], (time.perf_counter() - started) * 1000)
        return answer

    async def _dispatch(self, bound: BoundRoute, params: Mapping[str, str], req: Incoming) -> Answer:
        route = bound.route
        principal: tokens.Principal | None = None
        try:
            principal = self.authenticate(req)
            tokens.require(principal, required_role(route, params))
            if route.write and not self.store.is_leader():
                return await self.forward(route, req, principal)
            answer = await self._run(bound, params, req)
        except Exception as exc:  # noqa: BLE001 - every error becomes an answer
            answer = _error_answer(exc, wants_contiv_errors(req.headers, self.contiv_error_compat))
        # Executed (or refused) here: the leader's trail. A tokenless loopback caller is anyone on
        # the node: its refusals are not stored, or any local user could flush the bounded trail.
        if route.write and principal is not None and principal is not self.access.loopback:
            self.audit.record(principal.name, route.method, route.path, object_key(params, req.body), answer[0])
        return answer

    async def _run(self, bound: BoundRoute, params: Mapping[str, str], req: Incoming) -> Answer:
        run = bound.run
        if bound.route.write:  # on the leader: a write it can no longer commit ends when it steps down
            value = await unless_leader_changes(self.store, lambda: run(req.body, **params), f"{req.method} {req.path}")
        else:
            value = await run(req.body, **params)
        if isinstance(value, AtRevision):
            return _answer(value.value, headers={REVISION_HEADER.lower(): str(value.revision)})
        return _answer(value)


class PluginFastPath:
    """ASGI front that answers the `/plugin/*` routes without Quart's request machinery.

    Every pod start and stop goes through them; Quart's routing, contexts and response
    objects cost ~1 ms of CPU per request here, several times the work itself. Everything
    else falls through to the Quart app.
    """

    def __init__(self, app: QuartTrio, dispatcher: Dispatcher, bound_routes: tuple[BoundRoute, ...]):
        self.app = app
        self.dispatcher = dispatcher
        self.routes = {bound.route.path: bound for bound in bound_routes if bound.route.path.startswith("/plugin/")}

    async def __call__(self, asgi_scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        scope = cast(dict[str, Any], asgi_scope)
        bound = self.routes.get(scope.get("path", "")) if scope["type"] == "http" else None
        if bound is None or scope["method"] != bound.route.method:
            await self.app(asgi_scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = cast(dict[str, Any], await receive())
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        status, headers, body = await self.dispatcher.dispatch(bound, {}, incoming_from_scope(scope, b"".join(chunks)))
        await send_answer(send, status, [(k.encode(), v.encode()) for k, v in headers.items()], body)


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


def create_app(
    server: ApiServer, contexts: tuple[object, ...], *, agent: Agent | None = None, kube: KubeHealth | None = None, tls: ServingTls | None = None
) -> ApiApp:
    """The ASGI application: health, readiness and metrics, then the plugin fast path, in front of
    the Quart app. `contexts`: one per handler area (objects.Objects, plugin.Plugin, …), each
    route's handler is bound to its own here, once; `agent`, `kube` and `tls` are what /readyz reports."""
    app = QuartTrio("contivd")
    app.url_map.strict_slashes = False
    dispatcher = Dispatcher(server)
    bound_routes = bind_routes(contexts)

    def refusal(scope: dict[str, Any]) -> str | None:
        try:
            dispatcher.authenticate(incoming_from_scope(scope, b""))  # every role may read /metrics
        except UnauthorizedError as exc:
            return str(exc)
        return None

    def register(bound: BoundRoute) -> None:
        async def view(**params: str) -> Response:
            req = Incoming(
                method=request.method,
                path=request.full_path.rstrip("?"),
                headers={k.lower(): v for k, v in request.headers.items()},
                remote=request.remote_addr,
                body=cast(bytes, await request.get_data(as_text=False)),
            )
            status, headers, body = await dispatcher.dispatch(bound, params, req)
            return Response(body, status=status, headers=headers)

        route = bound.route
        app.add_url_rule(route.path, endpoint=f"{route.name}_{route.method}", view_func=view, methods=[route.method])

    for bound in bound_routes:
        register(bound)

    def no_route(status: int, message: str) -> Response:
        """gorilla/mux answered an unknown path, and (having no 405) an unknown method, with 404."""
        if wants_contiv_errors({k.lower(): v for k, v in request.headers.items()}, server.contiv_error_compat):
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

    fast_path = PluginFastPath(app, dispatcher, bound_routes)
    return ApiApp(OpsEndpoints(fast_path, server.store, agent, server.metrics, refusal, kube, tls), app, dispatcher)

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
from dataclasses import asdict, dataclass
from typing import Any, Awaitable, Callable

import httpx
from quart import Response, request
from quart_trio import QuartTrio

from raftstore import Store

from .. import __version__
from ..model import UNSUPPORTED_COLLECTIONS, COLLECTIONS, EndpointOper, NotFoundError
from ..netmaster import layout
from ..netmaster.service import Netmaster
from ..nodes import leader_api_url, registered_nodes
from . import auth
from .errors import BadRequestError, UnauthorizedError, answer_for
from .routes import ROUTES, Route, openapi_document

log = logging.getLogger("contivd.api")
HOPS_HEADER = "X-Contivd-Hops"
FORWARD_TIMEOUT_SECONDS = 15.0


@dataclass
class ApiContext:
    """What the handlers need; built by the composition root."""

    store: Store
    netmaster: Netmaster
    node_name: str
    control_ip: str
    secret: str | None
    http: httpx.AsyncClient


def _json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(value) + "\n", status=status, content_type="application/json", headers=headers)


def _error_response(exc: BaseException) -> Response:
    answer = answer_for(exc)
    headers = {"Retry-After": str(answer.retry_after)} if answer.retry_after else None
    return _json_response({"error": answer.message}, answer.status, headers)


def _parse_json(body: bytes) -> Any:
    if not body.strip():
        raise BadRequestError("request body is empty: expected a JSON object")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise BadRequestError(f"request body is not valid JSON: {exc}") from None


def _is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return address == "<local>"  # unix socket peers


class Handlers:
    def __init__(self, ctx: ApiContext):
        self.ctx = ctx
        self.nm = ctx.netmaster

    def _collection(self, collection: str) -> str:
        if collection not in COLLECTIONS and collection not in UNSUPPORTED_COLLECTIONS:
            raise NotFoundError(f"unknown collection {collection!r}")
        return collection

    async def list_objects(self, body: bytes, collection: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            return []
        return await self.nm.list_objects(collection)

    async def get_object(self, body: bytes, collection: str, key: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise NotFoundError(f"{collection} not found")
        return await self.nm.get_object(collection, key)

    async def put_object(self, body: bytes, collection: str, key: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise BadRequestError(f"{collection} are not supported")
        return await self.nm.put_object(collection, key, _parse_json(body))

    async def delete_object(self, body: bytes, collection: str, key: str) -> Any:
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise NotFoundError(f"{collection} not found")
        return await self.nm.delete_object(collection, key)

    async def inspect_object(self, body: bytes, collection: str, key: str) -> Any:
        if collection == "endpoints":
            return await self.nm.inspect_endpoint(key)
        if self._collection(collection) in UNSUPPORTED_COLLECTIONS:
            raise NotFoundError(f"{collection} not found")
        return await self.nm.inspect_object(collection, key)

    async def _plugin(self, body: bytes, call: Callable[[dict[str, Any]], Awaitable[Any]]) -> Any:
        payload = _parse_json(body)
        if not isinstance(payload, dict):
            raise BadRequestError("request body must be a JSON object")
        return await call(payload)

    async def alloc_address(self, body: bytes) -> Any:
        return await self._plugin(body, self.nm.alloc_address)

    async def release_address(self, body: bytes) -> Any:
        return await self._plugin(body, self.nm.release_address)

    async def create_endpoint(self, body: bytes) -> Any:
        return await self._plugin(body, self.nm.create_endpoint)

    async def delete_endpoint(self, body: bytes) -> Any:
        return await self._plugin(body, self.nm.delete_endpoint)

    async def update_endpoint(self, body: bytes) -> Any:
        return await self._plugin(body, self.nm.update_endpoint)

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
            "nodes": [asdict(n) for n in nodes],
        }

    async def services(self, body: bytes) -> Any:
        await self.ctx.store.sync()
        return [kv.value for kv in self.ctx.store.list_nowait(layout.SERVICE_LB_PREFIX)]

    async def service(self, body: bytes, key: str) -> Any:
        service, _, tenant = key.partition(":")
        found = await self.ctx.store.get(f"{layout.SERVICE_LB_PREFIX}{service}:{tenant}")
        if found is None:
            raise NotFoundError(f"service {key} not found")
        return [found.value]

    async def debug_ofnet(self, body: bytes) -> Any:
        await self.ctx.store.sync()
        return {
            "MyAddr": self.ctx.control_ip,
            "EndpointDb": {kv.value["id"]: kv.value for kv in self.ctx.store.list_nowait(layout.EPS_PREFIX)},
            "PolicyDb": {kv.value["id"]: kv.value for kv in self.ctx.store.list_nowait(layout.POLICY_RULE_PREFIX)},
        }

    async def debug_epcleanup(self, body: bytes, tenant: str, category: str, key: str) -> Any:
        names = {"net": "Network", "group": "EPG", "ep": "Endpoint"}
        if category not in names:
            raise BadRequestError(f"category must be net, group or ep, got {category!r}")
        await self.ctx.store.sync()
        for kv in self.ctx.store.list_nowait(layout.EPS_PREFIX):
            ep = kv.value
            network, _, ep_tenant = ep["netID"].rpartition(".")
            matches = {
                "net": ep["netID"] == f"{key}.{tenant}",
                "group": ep_tenant == tenant and ep.get("serviceName") == key,
                "ep": ep_tenant == tenant and key in ep["endpointID"],
            }[category]
            if matches:
                await self.nm.delete_endpoint({"TenantName": tenant, "NetworkName": network, "EndpointID": ep["endpointID"]})
        return f"Received request to cleanup {names[category]} with ID: {key}"

    async def openapi(self, body: bytes) -> Any:
        return openapi_document(__version__)


def create_app(ctx: ApiContext) -> QuartTrio:
    app = QuartTrio("contivd")
    app.url_map.strict_slashes = False
    handlers = Handlers(ctx)

    def authenticate(body: bytes) -> None:
        signature = request.headers.get(auth.SIGNATURE_HEADER)
        if signature is not None:
            if not ctx.secret or not auth.verify(ctx.secret, signature, request.method, request.full_path.rstrip("?"), body):
                raise UnauthorizedError("invalid node signature")
            return
        authorization = request.headers.get("Authorization")
        if authorization:
            if not ctx.secret or not auth.bearer_ok(ctx.secret, authorization):
                raise UnauthorizedError("invalid bearer token")
            return
        if not _is_loopback(request.remote_addr):
            raise UnauthorizedError(
                "requests from other hosts must be signed by a cluster node or carry the cluster secret as a bearer token"
            )

    async def forward(route: Route, body: bytes) -> Response:
        hops = int(request.headers.get(HOPS_HEADER, "0") or 0)
        url = leader_api_url(ctx.store)
        if url is None or hops >= 2:
            return _error_response(_no_leader())
        path = request.full_path.rstrip("?")
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json"), HOPS_HEADER: str(hops + 1)}
        if ctx.secret:
            headers[auth.SIGNATURE_HEADER] = auth.sign(ctx.secret, route.method, path, body)
        try:
            answer = await ctx.http.request(route.method, url.rstrip("/") + path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("forwarding %s %s to the leader at %s failed: %s", route.method, path, url, exc)
            return _error_response(_no_leader(f"the leader at {url} did not answer: {exc}"))
        passthrough = {k: v for k, v in answer.headers.items() if k.lower() in ("retry-after",)}
        return Response(answer.content, status=answer.status_code, content_type=answer.headers.get("content-type"), headers=passthrough)

    def register(route: Route) -> None:
        handler = getattr(handlers, route.name)

        async def view(**params: str) -> Response:
            body = await request.get_data()
            try:
                authenticate(body)
                if route.write and not ctx.store.is_leader():
                    return await forward(route, body)
                return _json_response(await handler(body, **params))
            except Exception as exc:  # noqa: BLE001 - every error becomes an answer
                return _error_response(exc)

        app.add_url_rule(route.path, endpoint=f"{route.name}_{route.method}", view_func=view, methods=[route.method])

    for route in ROUTES:
        register(route)

    @app.errorhandler(404)
    async def not_found(_: Exception) -> Response:
        return _json_response({"error": f"no route {request.method} {request.path}"}, 404)

    @app.errorhandler(405)
    async def not_allowed(_: Exception) -> Response:
        return _json_response({"error": f"method {request.method} not allowed on {request.path}"}, 405)

    return app


def _no_leader(detail: str = "no leader is known yet (election in progress or no quorum)") -> Exception:
    from raftstore import UnavailableError

    return UnavailableError(detail)

"""The HTTP routes, declared once as data: registration, dispatch, access control and the OpenAPI
document use the same table, so each covers every route by construction. Every route names the
handler that serves it and the role it needs (a route without either does not construct; the
handlers live by area in objects, plugin, cluster, debug, kubernetes and operators);
`required_role` lets operators write the collections of endpoint and service-level settings that
are otherwise admin's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..http.tokens import Role
from . import cluster, debug, kubernetes, objects, operators, plugin
from .handler import Handler

VIEWER, OPERATOR, ADMIN = Role.VIEWER, Role.OPERATOR, Role.ADMIN
# Collections whose writes operators may make (endpoint and service-level settings).
OPERATOR_COLLECTIONS = frozenset({"netprofiles", "serviceLBs"})


@dataclass(frozen=True)
class Route:
    handler: Handler[Any]  # what serves it (handler.py: bound to its area's context once, at start)
    method: str
    path: str  # Quart syntax: <collection>, <key>, <path:spec> (may hold slashes)
    summary: str
    write: bool = False  # executed by the leader: other members forward it
    body: str | None = None  # OpenAPI description of the JSON body
    role: Role = field(kw_only=True)  # the least role allowed to call it

    def __post_init__(self) -> None:
        if not isinstance(self.handler, Handler):
            raise TypeError(f"route {self.method} {self.path}: its handler must be a Handler (@handles), not {self.handler!r}")

    @property
    def name(self) -> str:
        """The handler's name: the OpenAPI operationId (with the method) and the app's endpoint name."""
        return self.handler.name


ROUTES: tuple[Route, ...] = (
    Route(objects.list_objects, "GET", "/api/v1/<collection>/", "List every object of a collection, sorted by key", role=VIEWER),
    Route(objects.get_object, "GET", "/api/v1/<collection>/<key>/", "Get one object", role=VIEWER),
    Route(objects.put_object, "POST", "/api/v1/<collection>/<key>/", "Create or update an object", True, "the object", role=ADMIN),
    Route(objects.put_object, "PUT", "/api/v1/<collection>/<key>/", "Create or update an object (same as POST)", True, "the object", role=ADMIN),
    Route(objects.delete_object, "DELETE", "/api/v1/<collection>/<key>/", "Delete an object; answers the key", True, role=ADMIN),
    Route(objects.inspect_object, "GET", "/api/v1/inspect/<collection>/<key>/", "Configuration and operational state", role=VIEWER),
    Route(plugin.alloc_address, "POST", "/plugin/allocAddress", "Allocate an address", True, "AddressAllocRequest", role=OPERATOR),
    Route(plugin.release_address, "POST", "/plugin/releaseAddress", "Release an address", True, "AddressReleaseRequest", role=OPERATOR),
    Route(plugin.create_endpoint, "POST", "/plugin/createEndpoint", "Create an endpoint (idempotent)", True, "CreateEndpointRequest", role=OPERATOR),
    Route(plugin.delete_endpoint, "POST", "/plugin/deleteEndpoint", "Delete an endpoint (idempotent)", True, "DeleteEndpointRequest", role=OPERATOR),
    Route(
        plugin.update_endpoint, "POST", "/plugin/updateEndpoint", "Update endpoint labels on start/die", True, "UpdateEndpointRequest", role=OPERATOR
    ),
    Route(cluster.version, "GET", "/version", "contivd version", role=VIEWER),
    Route(cluster.info, "GET", "/info", "Cluster membership, leader and registered nodes", role=VIEWER),
    Route(debug.services, "GET", "/services", "Every service load balancer state", role=VIEWER),
    Route(debug.service, "GET", "/service/<key>", "One service load balancer state", role=VIEWER),
    Route(
        kubernetes.kubernetes_services,
        "GET",
        "/kubernetes/services",
        "Kubernetes Services as the leader resolved them (Kubernetes mode), each with kind",
        role=VIEWER,
    ),
    Route(
        kubernetes.kubernetes_trace,
        "GET",
        "/kubernetes/trace/<path:spec>",
        "The verdict of Contiv's and NetworkPolicy's rules for SRC/DST[/PROTO/PORT] (IP, endpoint id or namespace/name), the rules deciding it,"
        " and OVS's ofproto/trace on the source's and the destination's node (`agree` false: a bug)",
        role=VIEWER,
    ),
    Route(
        kubernetes.policy_hits,
        "GET",
        "/policy/hits",
        "Packets and bytes per policy rule (Contiv: tenant:policy:ruleId and compiled; NetworkPolicy) and default drops, summed over the nodes' agents; nodes that did not answer",
        role=VIEWER,
    ),
    Route(
        kubernetes.policy_hits_of,
        "GET",
        "/policy/hits/<scope>",
        "/policy/hits of one tenant or namespace (`tenant`) or one policy or NetworkPolicy (`tenant:policy`); 404 when unknown",
        role=VIEWER,
    ),
    Route(debug.debug_ofnet, "GET", "/debug/ofnet", "Endpoints and policy rules as the datapath master sees them", role=VIEWER),
    Route(debug.debug_epcleanup, "DELETE", "/debug/epcleanup/tenant/<tenant>/<category>/<key>", "Delete stale endpoints", True, role=OPERATOR),
    Route(cluster.openapi, "GET", "/api/v1/openapi.json", "This document", role=VIEWER),
    Route(operators.list_tokens, "GET", "/api/v1/auth/tokens/", "Operator tokens (never the tokens themselves)", role=ADMIN),
    Route(
        operators.create_token,
        "POST",
        "/api/v1/auth/tokens/<name>/",
        "Create a token; the answer is the only time it is shown",
        True,
        "TokenRequest",
        role=ADMIN,
    ),
    Route(
        operators.revoke_token, "DELETE", "/api/v1/auth/tokens/<name>/", "Revoke a token (every node refuses it once replicated)", True, role=ADMIN
    ),
    Route(operators.list_audit, "GET", "/api/v1/audit/", "The audit trail: the newest writes, oldest first", role=VIEWER),
    Route(
        cluster.add_voter,
        "POST",
        "/api/v1/cluster/voters/<address>/",
        "Make a Raft listener address (host:port) a voter, before starting contivd there; answers the voters",
        True,
        role=ADMIN,
    ),
    Route(
        cluster.remove_voter,
        "DELETE",
        "/api/v1/cluster/voters/<address>/",
        "Remove a stopped voter (not the leader); answers the voters",
        True,
        role=ADMIN,
    ),
    Route(
        cluster.rotate_ca,
        "POST",
        "/api/v1/cluster/ca/rotate/",
        "Issue a new cluster CA: nodes trust old and new for the grace period, re-issue their certificates, then drop the old one; "
        "answers the new and old fingerprints",
        True,
        '{"grace": seconds} (optional; default 3600, 10 s to 30 days)',
        role=ADMIN,
    ),
)


def required_role(route: Route, params: Mapping[str, str]) -> Role:
    """The role one call needs: the route's, or operator for writes to OPERATOR_COLLECTIONS."""
    if route.role is ADMIN and route.write and params.get("collection") in OPERATOR_COLLECTIONS:
        return OPERATOR
    return route.role


def openapi_path(path: str) -> str:
    """A Quart route path in OpenAPI's form: `<key>` → `{key}`, `<path:spec>` → `{spec}`."""
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", path)


def openapi_document(version: str) -> dict[str, object]:
    paths: dict[str, dict[str, object]] = {}
    for route in ROUTES:
        path = openapi_path(route.path)
        params = [
            {"name": part[1:-1], "in": "path", "required": True, "schema": {"type": "string"}} for part in path.split("/") if part.startswith("{")
        ]
        operation: dict[str, object] = {
            "operationId": f"{route.name}_{route.method.lower()}",
            "summary": route.summary + (" (forwarded to the Raft leader)" if route.write else ""),
            "parameters": params,
            "responses": {
                "200": {"description": "success", "content": {"application/json": {}}},
                "400": {"description": "invalid input", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                "401": {"description": "no valid token or node signature (unknown, expired or revoked token; the reason is given)"},
                "403": {
                    "description": f"the token's role is below the one needed ({route.role.label}, operator for {', '.join(sorted(OPERATOR_COLLECTIONS))})"
                },
                "404": {"description": "unknown object"},
                "409": {"description": "conflict: exists, in use, overlap, address taken"},
                "503": {"description": "no leader or quorum; retry (Retry-After)"},
            },
        }
        if route.body:
            operation["requestBody"] = {"description": route.body, "content": {"application/json": {"schema": {"type": "object"}}}}
        paths.setdefault(path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "contivd (Contiv netmaster API)", "version": version},
        "paths": paths,
        "components": {"schemas": {"Error": {"type": "object", "properties": {"error": {"type": "string"}}}}},
    }

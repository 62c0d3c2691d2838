"""The HTTP routes, declared once as data: registration and the OpenAPI document use the same
table, so the document covers every route by construction."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str  # Quart syntax: <collection>, <key>, <path:spec> (may hold slashes)
    summary: str
    write: bool = False  # executed by the leader: other members forward it
    body: str | None = None  # OpenAPI description of the JSON body


ROUTES: tuple[Route, ...] = (
    Route("list_objects", "GET", "/api/v1/<collection>/", "List every object of a collection, sorted by key"),
    Route("get_object", "GET", "/api/v1/<collection>/<key>/", "Get one object"),
    Route("put_object", "POST", "/api/v1/<collection>/<key>/", "Create or update an object", True, "the object"),
    Route("put_object", "PUT", "/api/v1/<collection>/<key>/", "Create or update an object (same as POST)", True, "the object"),
    Route("delete_object", "DELETE", "/api/v1/<collection>/<key>/", "Delete an object; answers the key", True),
    Route("inspect_object", "GET", "/api/v1/inspect/<collection>/<key>/", "Configuration and operational state"),
    Route("alloc_address", "POST", "/plugin/allocAddress", "Allocate an address", True, "AddressAllocRequest"),
    Route("release_address", "POST", "/plugin/releaseAddress", "Release an address", True, "AddressReleaseRequest"),
    Route("create_endpoint", "POST", "/plugin/createEndpoint", "Create an endpoint (idempotent)", True, "CreateEndpointRequest"),
    Route("delete_endpoint", "POST", "/plugin/deleteEndpoint", "Delete an endpoint (idempotent)", True, "DeleteEndpointRequest"),
    Route("update_endpoint", "POST", "/plugin/updateEndpoint", "Update endpoint labels on start/die", True, "UpdateEndpointRequest"),
    Route("version", "GET", "/version", "contivd version"),
    Route("info", "GET", "/info", "Cluster membership, leader and registered nodes"),
    Route("services", "GET", "/services", "Every service load balancer state"),
    Route("service", "GET", "/service/<key>", "One service load balancer state"),
    Route("kubernetes_services", "GET", "/kubernetes/services", "Kubernetes Services as the leader resolved them (Kubernetes mode), each with kind"),
    Route(
        "kubernetes_trace",
        "GET",
        "/kubernetes/trace/<path:spec>",
        "NetworkPolicy's verdict for SRC/DST[/PROTO/PORT] (IP, endpoint id or namespace/name) and the rules deciding it",
    ),
    Route("debug_ofnet", "GET", "/debug/ofnet", "Endpoints and policy rules as the datapath master sees them"),
    Route("debug_epcleanup", "DELETE", "/debug/epcleanup/tenant/<tenant>/<category>/<key>", "Delete stale endpoints", True),
    Route("openapi", "GET", "/api/v1/openapi.json", "This document"),
)


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
                "401": {"description": "node-to-node call without valid credentials"},
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

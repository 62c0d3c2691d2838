"""The route table is the one source of registration, dispatch, access control and the OpenAPI
document: every route names its handler, every handler binds to a context the composition root
builds, and the document and the role table cover every route. Pure: no store, no sockets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contivd.api.app import bind_routes
from contivd.api.handler import Handler
from contivd.api.routes import ROUTES, VIEWER, Route, openapi_document, openapi_path, required_role
from contivd.main import api_contexts

ROOT = Path(__file__).resolve().parents[2]


def _contexts() -> tuple[object, ...]:
    """What main.py builds, over stand-ins: a context only holds its collaborators."""
    stand_in: Any = object()
    return api_contexts(stand_in, stand_in, stand_in, stand_in, node_name="n1", control_ip="127.0.0.1", secret=None)


def test_every_route_names_its_handler() -> None:
    for route in ROUTES:
        assert isinstance(route.handler, Handler), route
    operation_ids = {op["operationId"] for ops in openapi_document("test")["paths"].values() for op in ops.values()}
    assert operation_ids == {f"{r.handler.name}_{r.method.lower()}" for r in ROUTES}


def test_a_route_without_a_handler_does_not_construct() -> None:
    with pytest.raises(TypeError, match="handler"):
        Route(method="GET", path="/nothing", summary="no handler", role=VIEWER)
    with pytest.raises(TypeError, match="must be a Handler"):
        Route("by_name", "GET", "/nothing", "a name is no handler", role=VIEWER)


def test_every_handler_binds_to_a_context_the_composition_root_builds() -> None:
    bound = bind_routes(_contexts())
    assert [b.route for b in bound] == list(ROUTES)
    assert all(callable(b.run) for b in bound)


def test_a_missing_context_fails_at_start_naming_it() -> None:
    contexts = tuple(c for c in _contexts() if type(c).__name__ != "Plugin")
    with pytest.raises(LookupError, match="needs a Plugin"):
        bind_routes(contexts)


def test_the_openapi_document_and_the_role_table_cover_every_route() -> None:
    paths = openapi_document("test")["paths"]
    assert isinstance(paths, dict)
    documented = {(path, method) for path, operations in paths.items() for method in operations}
    assert documented == {(openapi_path(r.path), r.method.lower()) for r in ROUTES}
    for route in ROUTES:
        params = dict.fromkeys(part.strip("<>").partition(":")[2] or part.strip("<>") for part in route.path.split("/") if part.startswith("<"))
        assert required_role(route, {k: "x" for k in params}) >= VIEWER


def test_nothing_dispatches_by_name() -> None:
    """The REST API binds handlers by reference; `getattr` on handlers must not come back."""
    offenders = [path for path in (ROOT / "contivd" / "api").glob("*.py") if "getattr(" in path.read_text()]
    assert offenders == []

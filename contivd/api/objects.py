"""The configuration object routes: `/api/v1/<collection>/[<key>/]` and
`/api/v1/inspect/<collection>/<key>/`, Contiv's generated object API.

HTTP adapters over the leader's typed `LocalControlPlane` (the same door in-process callers
use; writes reach these handlers on the leader only, the dispatcher forwards them there). What
is here is Contiv's REST surface around it: an unknown collection is no route (Contiv's mux
answered 404 itself), the never-functional volume collections list empty, are never found and
refuse writes, and a Bgp's Oper comes from its node's BGP speaker as Contiv's netmaster filled it in.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import trio

from ..bgp import bgp_oper
from ..http.errors import BadRequestError, NoRouteError
from ..http.hardening import parse_json_limited
from ..model import COLLECTIONS, UNSUPPORTED_COLLECTIONS, NotFoundError, contiv_line
from ..netmaster.control import ENDPOINTS, LocalControlPlane
from .agents import AgentCalls
from .handler import handles

log = logging.getLogger("contivd.api")


@dataclass(frozen=True)
class Objects:
    """The object routes' collaborators: the control plane, and the agents for a Bgp's Oper."""

    plane: LocalControlPlane
    agents: AgentCalls


def _collection(collection: str) -> str:
    if collection not in COLLECTIONS and collection not in UNSUPPORTED_COLLECTIONS:
        raise NoRouteError(f"unknown collection {collection!r}")
    return collection


def _holding(collection: str) -> str:
    """`collection`, if its objects can exist; the never-registered volume types answer as
    Contiv's generated lookups did (`volume not found`), an unknown one is no route."""
    if _collection(collection) in UNSUPPORTED_COLLECTIONS:
        raise NotFoundError(f"{collection} not found", contiv=contiv_line("object-not-found", kind=collection.removesuffix("s")))
    return collection


@handles(Objects)
async def list_objects(objects: Objects, body: bytes, collection: str) -> Any:
    if _collection(collection) in UNSUPPORTED_COLLECTIONS:
        return []
    return await objects.plane.list_objects(collection)


@handles(Objects)
async def get_object(objects: Objects, body: bytes, collection: str, key: str) -> Any:
    return await objects.plane.get_object(_holding(collection), key)


@handles(Objects)
async def put_object(objects: Objects, body: bytes, collection: str, key: str) -> Any:
    if _collection(collection) in UNSUPPORTED_COLLECTIONS:
        raise BadRequestError(f"{collection} are not supported", contiv=contiv_line("unsupported-type"))
    return await objects.plane.put_object(collection, key, parse_json_limited(body))


@handles(Objects)
async def delete_object(objects: Objects, body: bytes, collection: str, key: str) -> Any:
    return await objects.plane.delete_object(_holding(collection), key)


@handles(Objects)
async def inspect_object(objects: Objects, body: bytes, collection: str, key: str) -> Any:
    answer = await objects.plane.inspect_object(collection if collection == ENDPOINTS else _holding(collection), key)
    if collection == "Bgps":
        answer["Oper"] = await _bgp_oper(objects.agents, key)
    return answer


async def _bgp_oper(agents: AgentCalls, hostname: str) -> dict[str, Any]:
    """The Bgp object's Oper from its node's speaker (`/inspect/bgp` on the node agent), as
    Contiv's netmaster filled it in; empty, and logged, when the node cannot answer."""
    try:
        called = await agents.call(hostname, "GET", "/inspect/bgp")
    except (OSError, ConnectionError, trio.TooSlowError) as exc:
        log.warning("Bgp %s: the node's /inspect/bgp did not answer: %s", hostname, exc)
        return {}
    if called is None or called[0] != 200:
        return {}
    return bgp_oper(json.loads(called[1]))

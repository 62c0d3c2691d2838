"""The `/plugin/*` routes Contiv's netplugin (and the original CNI plugin) call on every pod start
and stop: address allocation and endpoint create, delete and update.

Bodies are Contiv's request JSON, passed to the Netmaster as they came (its plans validate
them): no typed round trip on the busiest routes. Endpoint writes answer with the store
revision that holds them (`AtRevision`), so a forwarding member can wait for its own state.
These run on the leader only; app.PluginFastPath serves them without Quart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..http.errors import BadRequestError
from ..http.hardening import parse_json_limited
from .handler import AtRevision, handles

if TYPE_CHECKING:  # annotations only: the class is the composition root's to load
    from ..netmaster.service import Netmaster


@dataclass(frozen=True)
class Plugin:
    """The plugin routes' one collaborator: the Netmaster (its store gives the revision)."""

    netmaster: Netmaster


async def _request(body: bytes, call: Callable[[dict[str, Any]], Awaitable[Any]]) -> Any:
    payload = parse_json_limited(body)
    if not isinstance(payload, dict):
        raise BadRequestError("request body must be a JSON object")
    return await call(payload)


@handles(Plugin)
async def alloc_address(plugin: Plugin, body: bytes) -> Any:
    return await _request(body, plugin.netmaster.alloc_address)


@handles(Plugin)
async def release_address(plugin: Plugin, body: bytes) -> Any:
    return await _request(body, plugin.netmaster.release_address)


@handles(Plugin)
async def create_endpoint(plugin: Plugin, body: bytes) -> Any:
    """Contiv's answer leaves `containerId` empty (its netplugin sets it later, on the start
    event); contivd records it at once for its CNI server, but answers as Contiv did."""
    answer, revision = await _request(body, plugin.netmaster.create_endpoint_at)
    return AtRevision({**answer, "EndpointConfig": {**answer["EndpointConfig"], "containerId": ""}}, revision)


@handles(Plugin)
async def delete_endpoint(plugin: Plugin, body: bytes) -> Any:
    return AtRevision(await _request(body, plugin.netmaster.delete_endpoint), plugin.netmaster.store.revision)


@handles(Plugin)
async def update_endpoint(plugin: Plugin, body: bytes) -> Any:
    return AtRevision(await _request(body, plugin.netmaster.update_endpoint), plugin.netmaster.store.revision)

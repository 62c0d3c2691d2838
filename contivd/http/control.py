"""The ControlPlane on a follower: the same typed requests, sent to the leader's REST API through
the one forwarder every call to the leader takes (contivd.http.leader_forwarder).

Answers come back as the same records and the same exceptions `LocalControlPlane` raises: the
leader is asked for typed JSON errors (`TYPED_ERRORS_HEADER`, whatever its Contiv error
compatibility setting) and each status maps back to one exception class, the inverse of
`errors.answer_for`. `LeaderRouter` picks the local or the remote implementation per call, so
a leader change between two calls is followed without the caller noticing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

from raftstore import UnavailableError

from ..model import ConflictError, ModelError, NotFoundError, ValidationError
from ..netmaster.control import Committed, ControlPlane, CreateEndpoint, DeleteEndpoint, UpdateEndpoint
from ..state import EndpointState
from .leader_forwarder import REVISION_HEADER, TYPED_CALLER, LeaderForwarder
from .leadership import unless_leader_changes

if TYPE_CHECKING:  # annotations only: a follower loads neither PySyncObj nor the netmaster's write side
    from ..netmaster.control import LocalControlPlane
    from ..nodes import NodeStore

T = TypeVar("T")
_PATH_SAFE = ":@!$&'()*+,;=-._~"  # RFC 3986 pchar without percent-escapes


def error_from_answer(status: int, message: str) -> Exception:
    """The exception the leader raised, from its typed error answer."""
    if status == 400:
        return ValidationError("body", message)
    if status == 404:
        return NotFoundError(message)
    if status == 409:
        return ConflictError(message)
    if status == 503:
        return UnavailableError(message)
    return ModelError(f"the leader answered {status}: {message}")


class RemoteControlPlane:
    """The ControlPlane of a member that does not lead: each call goes through the one
    forwarder (signed, hops counted, abandoned when the leader changes) as this node."""

    def __init__(self, forwarder: LeaderForwarder, node_name: str = ""):
        self.forwarder = forwarder
        self.principal = f"node:{node_name}" if node_name else "node"  # the leader's audit trail names this node

    async def _call(self, method: str, path: str, body: object = None) -> tuple[Any, int]:
        """The leader's decoded answer and the revision it names; its typed error raised."""
        data = b"" if body is None else json.dumps(body).encode()
        status, answer_headers, raw = await self.forwarder.forward(method, path, data, principal=self.principal, headers=TYPED_CALLER)
        try:
            answer = json.loads(raw) if raw.strip() else None
        except ValueError:
            answer = raw.decode(errors="replace").strip()
        if status != 200:
            message = answer.get("error", "") if isinstance(answer, dict) else str(answer)
            raise error_from_answer(status, message)
        return answer, int(answer_headers.get(REVISION_HEADER.lower(), "0") or 0)

    async def create_endpoint(self, request: CreateEndpoint) -> Committed:
        answer, revision = await self._call("POST", "/plugin/createEndpoint", request.to_json())
        # The wire answer leaves containerId empty, as Contiv's did; the stored state has it.
        state = EndpointState.from_json(answer["EndpointConfig"])
        return Committed(dataclasses.replace(state, container_id=request.container), revision)

    async def delete_endpoint(self, request: DeleteEndpoint) -> int:
        return (await self._call("POST", "/plugin/deleteEndpoint", request.to_json()))[1]

    async def update_endpoint(self, request: UpdateEndpoint) -> int:
        return (await self._call("POST", "/plugin/updateEndpoint", request.to_json()))[1]

    async def put_object(self, collection: str, key: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], (await self._call("POST", _object_path(collection, key), body))[0])

    async def delete_object(self, collection: str, key: str) -> str:
        return cast(str, (await self._call("DELETE", _object_path(collection, key)))[0])

    async def get_object(self, collection: str, key: str) -> dict[str, Any]:
        return cast(dict[str, Any], (await self._call("GET", _object_path(collection, key)))[0])

    async def list_objects(self, collection: str) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], (await self._call("GET", f"/api/v1/{_path_part(collection)}/"))[0])

    async def inspect_object(self, collection: str, key: str) -> dict[str, Any]:
        return cast(dict[str, Any], (await self._call("GET", f"/api/v1/inspect/{_path_part(collection)}/{_path_part(key)}/"))[0])


def _path_part(name: str) -> str:
    """`name` as one path segment; a name that would need escaping is refused, since the leader
    checks the signature over the path it decoded."""
    if not name or quote(name, safe=_PATH_SAFE) != name:
        raise ValidationError("key", f"{name!r} cannot be a path segment")
    return name


def _object_path(collection: str, key: str) -> str:
    return f"/api/v1/{_path_part(collection)}/{_path_part(key)}/"


class LeaderRouter:
    """Writes: the local control plane while this member leads Raft, the remote one otherwise.
    Reads: the local one on every member, as the REST API answers them (they sync with the
    log first, so they are linearizable; contivd.netmaster.service)."""

    def __init__(self, store: NodeStore, local: LocalControlPlane, remote: RemoteControlPlane):
        self.store = store
        self.local = local
        self.remote = remote

    async def _route(self, what: str, call: Callable[[ControlPlane], Awaitable[T]]) -> T:
        """The remote plane abandons its own forwards when the leader changes; a local write
        is abandoned when this member stops leading (http/leadership.py)."""
        if self.store.is_leader():
            return await unless_leader_changes(self.store, lambda: call(self.local), what)
        return await call(self.remote)

    async def create_endpoint(self, request: CreateEndpoint) -> Committed:
        return await self._route("creating an endpoint", lambda plane: plane.create_endpoint(request))

    async def delete_endpoint(self, request: DeleteEndpoint) -> int:
        return await self._route("deleting an endpoint", lambda plane: plane.delete_endpoint(request))

    async def update_endpoint(self, request: UpdateEndpoint) -> int:
        return await self._route("updating an endpoint", lambda plane: plane.update_endpoint(request))

    async def put_object(self, collection: str, key: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._route(f"putting {collection} {key}", lambda plane: plane.put_object(collection, key, body))

    async def delete_object(self, collection: str, key: str) -> str:
        return await self._route(f"deleting {collection} {key}", lambda plane: plane.delete_object(collection, key))

    async def get_object(self, collection: str, key: str) -> dict[str, Any]:
        return await self.local.get_object(collection, key)

    async def list_objects(self, collection: str) -> list[dict[str, Any]]:
        return await self.local.list_objects(collection)

    async def inspect_object(self, collection: str, key: str) -> dict[str, Any]:
        return await self.local.inspect_object(collection, key)

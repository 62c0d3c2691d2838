"""The ControlPlane on a follower: the same typed requests, forwarded to the leader's REST API.

Answers come back as the same records and the same exceptions `LocalControlPlane` raises: the
leader is asked for typed JSON errors (`TYPED_ERRORS_HEADER`, whatever its Contiv error
compatibility setting) and each status maps back to one exception class, the inverse of
`errors.answer_for`. `LeaderRouter` picks the local or the remote implementation per call, so
a leader change between two calls is followed without the caller noticing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from raftstore import UnavailableError

from ..model import ConflictError, ModelError, NotFoundError, ValidationError
from ..netmaster.control import Committed, ControlPlane, CreateEndpoint, DeleteEndpoint, UpdateEndpoint
from ..nodes import leader_api_url
from ..state import EndpointState
from . import auth
from .errors import TYPED_ERRORS_HEADER
from .forwarder import ForwardingClient
from .leadership import unless_leader_changes

if TYPE_CHECKING:  # annotations only: a follower loads neither PySyncObj nor the netmaster's write side
    from ..netmaster.control import LocalControlPlane
    from ..nodes import NodeStore

log = logging.getLogger("contivd.control")
REVISION_HEADER = "X-Contivd-Revision"  # the store revision that holds a write's result
HOPS_HEADER = "X-Contivd-Hops"
T = TypeVar("T")


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
    """Forwards to whichever node the registry names as the Raft leader (signed with the secret)."""

    def __init__(self, store: NodeStore, http: ForwardingClient, secret: str | None, node_name: str = ""):
        self.store = store
        self.http = http
        self.secret = secret
        self.principal = f"node:{node_name}" if node_name else "node"  # the leader's audit trail names this node

    async def _post(self, path: str, body: dict[str, Any]) -> tuple[Any, int]:
        url = leader_api_url(self.store)
        if url is None:
            raise UnavailableError("no leader is known yet (election in progress or no quorum)")
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", TYPED_ERRORS_HEADER: "typed", HOPS_HEADER: "1", auth.PRINCIPAL_HEADER: self.principal}
        if self.secret:
            headers[auth.SIGNATURE_HEADER] = auth.sign(self.secret, "POST", path, data)
        try:
            status, answer_headers, raw = await unless_leader_changes(
                self.store, lambda: self.http.request("POST", url, path, headers, data), f"forwarding to the leader at {url}"
            )
        except (OSError, ConnectionError, trio.TooSlowError) as exc:
            raise UnavailableError(f"the leader at {url} did not answer: {exc}") from None
        try:
            answer = json.loads(raw) if raw.strip() else None
        except ValueError:
            answer = raw.decode(errors="replace").strip()
        if status != 200:
            message = answer.get("error", "") if isinstance(answer, dict) else str(answer)
            raise error_from_answer(status, message)
        return answer, int(answer_headers.get(REVISION_HEADER.lower(), "0") or 0)

    async def create_endpoint(self, request: CreateEndpoint) -> Committed:
        answer, revision = await self._post("/plugin/createEndpoint", request.to_json())
        # The wire answer leaves containerId empty, as Contiv's did; the stored state has it.
        state = EndpointState.from_json(answer["EndpointConfig"])
        return Committed(dataclasses.replace(state, container_id=request.container), revision)

    async def delete_endpoint(self, request: DeleteEndpoint) -> int:
        return (await self._post("/plugin/deleteEndpoint", request.to_json()))[1]

    async def update_endpoint(self, request: UpdateEndpoint) -> int:
        return (await self._post("/plugin/updateEndpoint", request.to_json()))[1]


class LeaderRouter:
    """The local control plane while this member leads Raft, the remote one otherwise."""

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

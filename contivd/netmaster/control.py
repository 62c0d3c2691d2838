"""The typed control-plane interface in-process callers use, and its implementation on the leader.

The CNI server (and anything else inside the daemon) creates and deletes endpoints through a
`ControlPlane`: typed requests in, typed records or `ModelError`s out. On the Raft leader that
is `LocalControlPlane` over the Netmaster; on a follower, `contivd.http.control` forwards the
same requests to the leader and turns its answers back into the same records and exceptions,
so callers cannot tell the two apart.

Not responsible for: HTTP (the REST dispatcher wraps the Netmaster for Contiv's clients), the
datapath (callers wait for the returned revision in their StateCache).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..state import EndpointState
from ..state import keys as layout

if TYPE_CHECKING:  # annotations only: a follower never loads the netmaster's write side
    from .service import Netmaster


@dataclass(frozen=True)
class CreateEndpoint:
    """Contiv's `CreateEndpointRequest` for one endpoint homed on `host`."""

    tenant: str
    network: str
    endpoint: str
    host: str
    group: str = ""
    container: str = ""
    common_name: str = ""
    k8s_pod: str = ""  # `<namespace>/<name>` of the Kubernetes pod, when the CNI server knows it

    @property
    def endpoint_id(self) -> str:
        return layout.ep_id(self.tenant, self.network, self.endpoint)

    def to_json(self) -> dict[str, Any]:
        """The `/plugin/createEndpoint` body (`K8sPod`, contivd's extension, only when set)."""
        body = {
            "TenantName": self.tenant,
            "NetworkName": self.network,
            "ServiceName": self.group,
            "EndpointID": self.endpoint,
            "EPCommonName": self.common_name,
            "ConfigEP": {"Container": self.container, "Host": self.host},
        }
        return body | ({"K8sPod": self.k8s_pod} if self.k8s_pod else {})


@dataclass(frozen=True)
class DeleteEndpoint:
    tenant: str
    network: str
    endpoint: str

    @classmethod
    def of(cls, endpoint: EndpointState) -> DeleteEndpoint:
        return cls(endpoint.tenant, endpoint.network, endpoint.endpoint_id)

    def to_json(self) -> dict[str, Any]:
        """The `/plugin/deleteEndpoint` body."""
        return {"TenantName": self.tenant, "NetworkName": self.network, "EndpointID": self.endpoint}


@dataclass(frozen=True)
class UpdateEndpoint:
    """A container `start` event carrying its labels (service providers are chosen by them)."""

    tenant: str
    network: str
    endpoint: str
    container: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `/plugin/updateEndpoint` body."""
        return {
            "Tenant": self.tenant,
            "Network": self.network,
            "EndpointID": self.endpoint,
            "ContainerID": self.container,
            "Labels": dict(self.labels),
            "Event": "start",
        }


@dataclass(frozen=True)
class Committed:
    """An endpoint as the leader committed it, and the store revision that holds it."""

    endpoint: EndpointState
    revision: int


class ControlPlane(Protocol):
    """What the daemon's own components ask of the netmaster. Errors: ModelError subclasses
    (ValidationError, NotFoundError, ConflictError) for refused requests, UnavailableError when
    no leader can take the request now."""

    async def create_endpoint(self, request: CreateEndpoint) -> Committed: ...

    async def delete_endpoint(self, request: DeleteEndpoint) -> int:
        """Idempotent; returns the revision after which the endpoint is gone."""
        ...

    async def update_endpoint(self, request: UpdateEndpoint) -> int:
        """Returns the revision that holds the update."""
        ...


class LocalControlPlane:
    """The ControlPlane on the Raft leader: the Netmaster itself, typed."""

    def __init__(self, netmaster: Netmaster):
        self.netmaster = netmaster

    async def create_endpoint(self, request: CreateEndpoint) -> Committed:
        answer, revision = await self.netmaster.create_endpoint_at(request.to_json())
        return Committed(EndpointState.from_json(answer["EndpointConfig"]), revision)

    async def delete_endpoint(self, request: DeleteEndpoint) -> int:
        await self.netmaster.delete_endpoint(request.to_json())
        return self.netmaster.store.revision

    async def update_endpoint(self, request: UpdateEndpoint) -> int:
        await self.netmaster.update_endpoint(request.to_json())
        return self.netmaster.store.revision

"""The typed control-plane interface in-process callers use, and its implementation on the leader.

The CNI server (and anything else inside the daemon) creates and deletes endpoints, and puts,
reads and deletes configuration objects, through a `ControlPlane`: typed requests in, typed
records (or Contiv's rendered objects) or `ModelError`s out. On the Raft leader that is
`LocalControlPlane` over the Netmaster; on a follower, `contivd.http.control` sends the same
requests through the one forwarder to the leader (contivd.http.leader_forwarder) and turns its
answers back into the same values and exceptions, so callers cannot tell the two apart. The REST
handlers of the object routes (contivd.api.objects) run over `LocalControlPlane` too.

Not responsible for: HTTP (the REST dispatcher decides where a request runs), the datapath
(callers wait for the returned revision in their StateCache), Contiv's never-functional volume
collections (the REST handlers answer those as Contiv's routes did).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..state import EndpointState, tables

if TYPE_CHECKING:  # annotations only: a follower never loads the netmaster's write side
    from .service import Netmaster

ENDPOINTS = "endpoints"  # inspect only: endpoints are no configuration collection (the /plugin/* routes write them)


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
        return tables.endpoint_id(self.tenant, self.network, self.endpoint)

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
    no leader can take the request now.

    Objects are named by their REST collection (`networks`, `policys`, `Bgps` …) and key
    (`tenant:name`); bodies and answers are Contiv's JSON objects, as its REST API has them."""

    async def create_endpoint(self, request: CreateEndpoint) -> Committed: ...

    async def delete_endpoint(self, request: DeleteEndpoint) -> int:
        """Idempotent; returns the revision after which the endpoint is gone."""
        ...

    async def update_endpoint(self, request: UpdateEndpoint) -> int:
        """Returns the revision that holds the update."""
        ...

    async def put_object(self, collection: str, key: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create or update; answers the object as stored (an identical put changes nothing)."""
        ...

    async def delete_object(self, collection: str, key: str) -> str:
        """Delete the object and what depends on it; answers the key."""
        ...

    async def get_object(self, collection: str, key: str) -> dict[str, Any]: ...

    async def list_objects(self, collection: str) -> list[dict[str, Any]]:
        """Every object of the collection, sorted by key."""
        ...

    async def inspect_object(self, collection: str, key: str) -> dict[str, Any]:
        """`Config` and `Oper` (collection `endpoints`: the first endpoint whose id contains `key`)."""
        ...


class LocalControlPlane:
    """The ControlPlane on the Raft leader: the Netmaster itself, typed."""

    def __init__(self, netmaster: Netmaster):
        self.netmaster = netmaster

    async def create_endpoint(self, request: CreateEndpoint) -> Committed:
        return Committed(*await self.netmaster.create_endpoint_state(request.to_json()))  # typed: no JSON round trip

    async def delete_endpoint(self, request: DeleteEndpoint) -> int:
        await self.netmaster.delete_endpoint(request.to_json())
        return self.netmaster.store.revision

    async def update_endpoint(self, request: UpdateEndpoint) -> int:
        await self.netmaster.update_endpoint(request.to_json())
        return self.netmaster.store.revision

    async def put_object(self, collection: str, key: str, body: object) -> dict[str, Any]:
        """`body` as parsed from JSON: the netmaster validates its shape (a REST body may be anything)."""
        return await self.netmaster.put_object(collection, key, body)

    async def delete_object(self, collection: str, key: str) -> str:
        return await self.netmaster.delete_object(collection, key)

    async def get_object(self, collection: str, key: str) -> dict[str, Any]:
        return await self.netmaster.get_object(collection, key)

    async def list_objects(self, collection: str) -> list[dict[str, Any]]:
        return await self.netmaster.list_objects(collection)

    async def inspect_object(self, collection: str, key: str) -> dict[str, Any]:
        if collection == ENDPOINTS:
            return await self.netmaster.inspect_endpoint(key)
        return await self.netmaster.inspect_object(collection, key)

"""Typed, frozen records of what the netmaster writes under `/contiv.io/state/` and `/contiv.io/nodes/`.

Each record is parsed once from the store's JSON (`from_json`) and renders it back with Contiv's
Go field names (`to_json`), so the REST and `/debug/ofnet` shapes do not change. Readers (the
agent, the CNI server, the status page, metrics) use the attributes and never see a key or a
JSON shape. `from_json` raises RecordError naming the object when a value is unusable: one bad
object is reported and skipped by the snapshot, never allowed to hide the rest.

Not responsible for: validation of configuration (contivd.model), allocation (the netmaster's
IPAM writes the bitmaps these records carry opaquely).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..model import PolicyRule

T = TypeVar("T")


class RecordError(ValueError):
    """A stored value that is not the shape its key promises; the message names the object."""


Labels = tuple[tuple[str, str], ...]


def _labels(value: Any) -> Labels:
    if not value:
        return ()
    if not isinstance(value, Mapping):
        raise TypeError(f"labels must be an object, got {type(value).__name__}")
    return tuple((str(k), str(v)) for k, v in value.items())  # stored order: to_json gives back the same object


def _parse(kind: str, value: Any, build: Callable[[Mapping[str, Any]], T]) -> T:
    """Run `build(value)` and turn any shape problem into one RecordError naming the object."""
    if not isinstance(value, Mapping):
        raise RecordError(f"{kind}: stored value is {type(value).__name__}, not an object")
    try:
        return build(value)
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{kind} {value.get('id', '?')}: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class EndpointState:
    """Contiv's `CfgEndpointState` (`/contiv.io/state/eps/<net>.<tenant>-<endpoint>`)."""

    id: str
    net_id: str
    endpoint_id: str
    service_name: str
    endpoint_group_id: int
    endpoint_group_key: str
    ip_address: str
    ipv6_address: str
    mac_address: str
    homing_host: str
    intf_name: str = ""
    vtep_ip: str = ""
    labels: Labels | None = None  # None: stored as null (never labelled), () an empty object
    container_id: str = ""
    ep_common_name: str = ""

    @property
    def tenant(self) -> str:
        return self.net_id.rpartition(".")[2]

    @property
    def network(self) -> str:
        return self.net_id.rpartition(".")[0]

    @classmethod
    def from_json(cls, value: Any) -> EndpointState:
        return _parse(
            "endpoint",
            value,
            lambda v: cls(
                str(v["id"]),
                str(v["netID"]),
                str(v.get("endpointID", "")),
                str(v.get("serviceName", "")),
                int(v.get("endpointGroupId", 0)),
                str(v.get("endpointGroupKey", "")),
                str(v.get("ipAddress", "")),
                str(v.get("ipv6Address", "")),
                str(v.get("macAddress", "")),
                str(v.get("homingHost", "")),
                str(v.get("intfName", "")),
                str(v.get("vtepIP", "")),
                None if v.get("labels") is None else _labels(v["labels"]),
                str(v.get("containerId", "")),
                str(v.get("epCommonName", "")),
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "netID": self.net_id,
            "endpointID": self.endpoint_id,
            "serviceName": self.service_name,
            "endpointGroupId": self.endpoint_group_id,
            "endpointGroupKey": self.endpoint_group_key,
            "ipAddress": self.ip_address,
            "ipv6Address": self.ipv6_address,
            "macAddress": self.mac_address,
            "homingHost": self.homing_host,
            "intfName": self.intf_name,
            "vtepIP": self.vtep_ip,
            "labels": None if self.labels is None else dict(self.labels),
            "containerId": self.container_id,
            "epCommonName": self.ep_common_name,
        }


@dataclass(frozen=True, slots=True)
class NetworkState:
    """Contiv's `CfgNetworkState` (`/contiv.io/state/nets/<net>.<tenant>`).

    The address bitmaps stay in their stored encodings (`ip_alloc_map` base64, the IPv6 map an
    object): only the netmaster's IPAM and the usage summary read them.
    """

    id: str
    tenant: str
    network_name: str
    nw_type: str
    pkt_tag_type: str
    pkt_tag: int
    ext_pkt_tag: int
    subnet_ip: str
    subnet_len: int
    gateway: str
    ip_addr_range: str
    ep_addr_count: int
    ep_count: int
    ip_alloc_map: str
    network_tag: str
    ipv6: tuple[tuple[str, Any], ...] = ()
    """The IPv6 fields (ipv6SubnetIP, ipv6SubnetLen, ipv6Gateway, ipv6AllocMap, ipv6LastHost) as
    stored, present only for dual-stack networks."""

    @property
    def subnet(self) -> str:
        return f"{self.subnet_ip}/{self.subnet_len}"

    @classmethod
    def from_json(cls, value: Any) -> NetworkState:
        return _parse(
            "network",
            value,
            lambda v: cls(
                str(v["id"]),
                str(v.get("tenant", "")),
                str(v.get("networkName", "")),
                str(v.get("nwType", "data")),
                str(v.get("pktTagType", "")),
                int(v.get("pktTag", 0)),
                int(v.get("extPktTag", 0)),
                str(v["subnetIP"]),
                int(v["subnetLen"]),
                str(v.get("gateway", "") or ""),
                str(v.get("ipAddrRange", "")),
                int(v.get("epAddrCount", 0)),
                int(v.get("epCount", 0)),
                str(v.get("ipAllocMap", "")),
                str(v.get("networkTag", "")),
                tuple((k, v[k]) for k in _IPV6_FIELDS if k in v),
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "networkName": self.network_name,
            "nwType": self.nw_type,
            "pktTagType": self.pkt_tag_type,
            "pktTag": self.pkt_tag,
            "extPktTag": self.ext_pkt_tag,
            "subnetIP": self.subnet_ip,
            "subnetLen": self.subnet_len,
            "gateway": self.gateway,
            "ipAddrRange": self.ip_addr_range,
            "epAddrCount": self.ep_addr_count,
            "epCount": self.ep_count,
            "ipAllocMap": self.ip_alloc_map,
            "networkTag": self.network_tag,
            **dict(self.ipv6),
        }


_IPV6_FIELDS = ("ipv6SubnetIP", "ipv6SubnetLen", "ipv6Gateway", "ipv6AllocMap", "ipv6LastHost")


@dataclass(frozen=True, slots=True)
class EndpointGroupState:
    """Contiv's `EndpointGroupState` (`/contiv.io/state/endpointGroups/<group>:<tenant>`)."""

    id: str
    group_name: str
    tenant_name: str
    network_name: str
    endpoint_group_id: int
    pkt_tag_type: str
    pkt_tag: int
    ext_pkt_tag: int
    ep_count: int
    group_tag: str
    ip_pool: str = ""
    pool_subnet: str = ""
    epg_ip_alloc_map: str = ""
    dscp: int = 0
    bandwidth: str = ""
    burst: int = 0

    @property
    def net_id(self) -> str:
        return f"{self.network_name}.{self.tenant_name}"

    @classmethod
    def from_json(cls, value: Any) -> EndpointGroupState:
        return _parse(
            "endpoint group",
            value,
            lambda v: cls(
                str(v["id"]),
                str(v.get("groupName", "")),
                str(v.get("tenantName", "")),
                str(v.get("networkName", "")),
                int(v.get("endpointGroupId", 0)),
                str(v.get("pktTagType", "")),
                int(v.get("pktTag", 0)),
                int(v.get("extPktTag", 0)),
                int(v.get("epCount", 0)),
                str(v.get("groupTag", "")),
                str(v.get("IPPool", "")),
                str(v.get("poolSubnet", "")),
                str(v.get("epgIpAllocMap", "")),
                int(v.get("DSCP", 0)),
                str(v.get("Bandwidth", "")),
                int(v.get("Burst", 0)),
            ),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "groupName": self.group_name,
            "tenantName": self.tenant_name,
            "networkName": self.network_name,
            "endpointGroupId": self.endpoint_group_id,
            "pktTagType": self.pkt_tag_type,
            "pktTag": self.pkt_tag,
            "extPktTag": self.ext_pkt_tag,
            "epCount": self.ep_count,
            "groupTag": self.group_tag,
        }
        if self.ip_pool:
            out.update(IPPool=self.ip_pool, poolSubnet=self.pool_subnet, epgIpAllocMap=self.epg_ip_alloc_map)
        out.update(DSCP=self.dscp, Bandwidth=self.bandwidth, Burst=self.burst)  # the netprofile's, always written
        return out


@dataclass(frozen=True, slots=True)
class Provider:
    """One provider of a service load balancer (Contiv's `ServiceProvider`)."""

    ip_address: str
    container_id: str
    labels: Labels
    tenant: str
    network: str
    services: tuple[str, ...]
    endpoint_key: str

    @classmethod
    def from_json(cls, v: Mapping[str, Any]) -> Provider:
        return cls(
            str(v["IPAddress"]),
            str(v.get("ContainerID", "")),
            _labels(v.get("Labels")),
            str(v.get("Tenant", "")),
            str(v.get("Network", "")),
            tuple(str(s) for s in v.get("Services") or ()),
            str(v.get("EpIDKey", "")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "IPAddress": self.ip_address,
            "ContainerID": self.container_id,
            "Labels": dict(self.labels),
            "Tenant": self.tenant,
            "Network": self.network,
            "Services": list(self.services),
            "Container": self.container_id,
            "EpIDKey": self.endpoint_key,
        }


@dataclass(frozen=True, slots=True)
class ServiceLBState:
    """Contiv's `ServiceLBState` (`/contiv.io/state/serviceLB/<service>:<tenant>`)."""

    id: str
    service_name: str
    tenant_name: str
    network: str
    ports: tuple[str, ...]
    """`Port:TargetPort:TCP|UDP` as stored; the agent parses them into flow inputs."""
    selectors: Labels
    ip_address: str
    providers: tuple[tuple[str, Provider], ...]

    @classmethod
    def from_json(cls, value: Any) -> ServiceLBState:
        return _parse(
            "service",
            value,
            lambda v: cls(
                str(v["id"]),
                str(v.get("servicename", "")),
                str(v.get("tenantname", "")),
                str(v.get("subnet", "")),
                tuple(str(p) for p in v.get("ports") or ()),
                _labels(v.get("selectors")),
                str(v.get("ipaddress", "")),
                tuple((str(k), Provider.from_json(p)) for k, p in (v.get("providers") or {}).items()),
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "servicename": self.service_name,
            "tenantname": self.tenant_name,
            "subnet": self.network,
            "ports": list(self.ports),
            "selectors": dict(self.selectors),
            "ipaddress": self.ip_address,
            "providers": {key: provider.to_json() for key, provider in self.providers},
        }


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A live node (`/contiv.io/nodes/<name>`, under the node's lease)."""

    name: str
    raft_address: str | None
    api_url: str
    control_ip: str
    vtep_ip: str
    readonly: bool
    version: str
    agent_url: str = ""  # the node agent's REST API; "" when the node runs no datapath

    @classmethod
    def from_json(cls, value: Any) -> NodeRecord:
        return _parse(
            "node",
            value,
            lambda v: cls(
                str(v["name"]),
                None if v.get("raft_address") is None else str(v["raft_address"]),
                str(v.get("api_url", "")),
                str(v.get("control_ip", "")),
                str(v.get("vtep_ip", "")),
                bool(v.get("readonly", False)),
                str(v.get("version", "")),
                str(v.get("agent_url", "")),
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "raft_address": self.raft_address,
            "api_url": self.api_url,
            "control_ip": self.control_ip,
            "vtep_ip": self.vtep_ip,
            "readonly": self.readonly,
            "version": self.version,
            "agent_url": self.agent_url,
        }


def policy_rule_from_json(value: Any) -> PolicyRule:
    """An ofnet policy rule (`/contiv.io/state/policyRule/<RuleId>`): the model's PolicyRule is its record."""
    return _parse("policy rule", value, PolicyRule.from_json)


def policy_rule_to_json(rule: PolicyRule) -> dict[str, Any]:
    """The stored value of a policy rule: ofnet's fields and the state's `id`."""
    return {"id": rule.rule_id, **rule.to_json()}

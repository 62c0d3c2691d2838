"""Endpoint and address plans (Contiv's /plugin/* routes) as functions over guarded Reads.

Each plan reads the state records it needs through `Reads.read`, writes changed copies
(`dataclasses.replace`) and returns its answer, or raises a ModelError having changed nothing it keeps
(the caller restores its checkpoint). The netmaster commits a batch of plans at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..model import NotFoundError, ValidationError
from ..state import EndpointGroupState, EndpointState, NetworkState, tables
from . import ipam, services
from .view import Reads, Writes


def _text(request: Mapping[str, Any], field: str, *, required: bool = True) -> str:
    value = request.get(field, "")
    if not isinstance(value, str):
        raise ValidationError(field, f"{field} must be a string, got {type(value).__name__}")
    if required and not value:
        raise ValidationError(field, f"{field} is required")
    return value


def _network(reads: Reads, tenant: str, network: str) -> NetworkState:
    if reads.read(tables.CONFIG, tables.config_id("network", f"{tenant}:{network}")) is None:
        raise NotFoundError(f"network {tenant}:{network} not found")
    state = reads.read(tables.NETWORKS, tables.network_id(tenant, network))
    if state is None:
        raise NotFoundError(f"network {tenant}:{network} has no state")
    return state


def _group(reads: Reads, tenant: str, group: str, network: str) -> EndpointGroupState | None:
    if not group:
        return None
    obj = reads.read(tables.CONFIG, tables.config_id("endpointGroup", f"{tenant}:{group}"))
    if obj is None:
        raise NotFoundError(f"endpointGroup {tenant}:{group} not found")
    if obj["networkName"] != network:
        raise ValidationError("ServiceName", f"endpoint group {group} belongs to network {obj['networkName']}, not {network}")
    state = reads.read(tables.GROUPS, tables.group_id(tenant, group))
    if state is None:
        raise NotFoundError(f"endpointGroup {tenant}:{group} has no state")
    return state


def _write_addresses(writes: Writes, network: NetworkState, group: EndpointGroupState | None) -> None:
    writes.put(tables.NETWORKS, network.id, network)
    if group is not None:
        writes.put(tables.GROUPS, group.id, group)


def create_endpoint(reads: Reads, writes: Writes, request: Mapping[str, Any], node: str) -> EndpointState:
    """Allocate addresses and write the endpoint state; idempotent per endpoint id."""
    tenant = _text(request, "TenantName")
    network = _text(request, "NetworkName")
    group = _text(request, "ServiceName", required=False)
    config = request.get("ConfigEP") or {}
    if not isinstance(config, Mapping):
        raise ValidationError("ConfigEP", "ConfigEP must be an object")
    endpoint = _text(request, "EndpointID", required=False) or _text(config, "Container", required=False)
    if not endpoint:
        raise ValidationError("EndpointID", "EndpointID (or ConfigEP.Container) is required")
    endpoint_id = tables.endpoint_id(tenant, network, endpoint)
    existing = reads.read(tables.ENDPOINTS, endpoint_id)
    if existing is not None:
        return existing
    net, epg, ipv4 = ipam.allocate_ipv4(
        _network(reads, tenant, network), _group(reads, tenant, group, network), _text(config, "IPAddress", required=False), endpoint=True
    )
    ipv6 = ""
    if net.dual_stack:
        net, ipv6 = ipam.allocate_ipv6(net, _text(config, "IPv6Address", required=False))
    state = EndpointState(
        id=endpoint_id,
        net_id=tables.network_id(tenant, network),
        endpoint_id=endpoint,
        service_name=group,
        endpoint_group_id=epg.endpoint_group_id if epg else 0,
        endpoint_group_key=tables.group_id(tenant, group) if group else "",
        ip_address=ipv4,
        ipv6_address=ipv6,
        mac_address=ipam.mac_for(ipv4),
        homing_host=_text(config, "Host", required=False) or node,
        container_id=_text(config, "Container", required=False),
        ep_common_name=_text(request, "EPCommonName", required=False),
        k8s_pod=_text(request, "K8sPod", required=False),  # contivd's extension: not stored when empty, as in Contiv
    )
    _write_addresses(writes, net, epg)
    writes.put(tables.ENDPOINTS, endpoint_id, state)
    return state


def delete_endpoint(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> EndpointState | None:
    """Free the endpoint's addresses and remove its state; None if it did not exist."""
    tenant = _text(request, "TenantName")
    network = _text(request, "NetworkName")
    endpoint = _text(request, "EndpointID")
    endpoint_id = tables.endpoint_id(tenant, network, endpoint)
    state = reads.read(tables.ENDPOINTS, endpoint_id)
    if state is None:
        return None
    net = reads.read(tables.NETWORKS, tables.network_id(tenant, network))
    if net is not None:  # the network may already be gone: then only the endpoint is cleared
        epg = reads.read(tables.GROUPS, tables.group_id(tenant, state.service_name)) if state.service_name else None
        net, epg, _ = ipam.release_ipv4(net, epg, state.ip_address, endpoint=True)
        _write_addresses(writes, ipam.release_ipv6(net, state.ipv6_address), epg)
    writes.delete(tables.ENDPOINTS, endpoint_id)
    if state.labels:
        services.refresh_tenant(reads, writes, tenant)
    return state


def update_endpoint(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> dict[str, Any]:
    """Merge labels, container id and common name into an endpoint (`start` events)."""
    tenant = _text(request, "Tenant")
    network = _text(request, "Network")
    endpoint = _text(request, "EndpointID")
    event = _text(request, "Event", required=False) or "start"
    if event not in ("start", "die"):
        raise ValidationError("Event", f"Event must be start or die, got {event!r}")
    group = reads.read(tables.CONFIG, tables.config_id("endpointGroup", f"{tenant}:{network}"))
    if group is not None:  # Network may name a group: use the group's network
        network = group["networkName"]
    endpoint_id = tables.endpoint_id(tenant, network, endpoint)
    state = reads.read(tables.ENDPOINTS, endpoint_id)
    if state is None:
        raise NotFoundError(f"endpoint {endpoint_id} not found")
    labels = request.get("Labels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise ValidationError("Labels", "Labels must map strings to strings")
    if event == "start":
        state = replace(
            state,
            labels=tuple({**dict(state.labels or ()), **labels}.items()),
            container_id=_text(request, "ContainerID", required=False) or state.container_id,
            ep_common_name=_text(request, "EPCommonName", required=False) or state.ep_common_name,
        )
    else:  # a dead container stops providing: drop its labels
        state = replace(state, labels=None)
    writes.put(tables.ENDPOINTS, endpoint_id, state)
    services.refresh_tenant(reads, writes, tenant)
    return {"IPAddress": request.get("IPAddress", state.ip_address)}


def _string_map(request: Mapping[str, Any], field: str) -> dict[str, str]:
    value = request.get(field) or {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValidationError(field, f"{field} must map strings to strings")
    return dict(value)


def relabel_endpoint(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> EndpointState:
    """Move a running endpoint to the group `Group` ("": none) and replace its labels with
    `Labels`, in one commit: group counts, the endpoint's group id and key, the tenant's
    services. Its address, MAC and port stay, so the node re-programs its flows without a new
    interface. Refused (nothing written) for an unknown group, a group of another network, or
    when either group hands out addresses from its own ipPool (the address would have to change)."""
    tenant = _text(request, "Tenant")
    network = _text(request, "Network")
    endpoint_id = tables.endpoint_id(tenant, network, _text(request, "EndpointID"))
    group = _text(request, "Group", required=False)
    labels = tuple(_string_map(request, "Labels").items())
    state = reads.read(tables.ENDPOINTS, endpoint_id)
    if state is None:
        raise NotFoundError(f"endpoint {endpoint_id} not found")
    old_group = state.service_name
    if group != old_group:
        new_epg = _group(reads, tenant, group, network)
        old_epg = reads.read(tables.GROUPS, tables.group_id(tenant, old_group)) if old_group else None
        for name, epg in ((old_group, old_epg), (group, new_epg)):
            if epg is not None and epg.ip_pool:
                raise ValidationError(
                    "Group", f"endpoint group {name} hands out addresses from its ipPool {epg.ip_pool}: moving {endpoint_id} needs a new address"
                )
        if old_epg is not None:
            writes.put(tables.GROUPS, old_epg.id, replace(old_epg, ep_count=max(0, old_epg.ep_count - 1)))
        if new_epg is not None:
            writes.put(tables.GROUPS, new_epg.id, replace(new_epg, ep_count=new_epg.ep_count + 1))
        state = replace(
            state,
            service_name=group,
            endpoint_group_id=new_epg.endpoint_group_id if new_epg else 0,
            endpoint_group_key=tables.group_id(tenant, group) if group else "",
        )
    elif dict(state.labels or ()) == dict(labels):
        return state  # nothing to change
    state = replace(state, labels=labels)
    writes.put(tables.ENDPOINTS, endpoint_id, state)
    services.refresh_tenant(reads, writes, tenant)
    return state


def parse_network_id(network_id: str) -> tuple[str, str, str]:
    """Contiv's `<net>.<tenant>` or `<net>:<group>.<tenant>` → (tenant, network, group)."""
    head, dot, tenant = network_id.rpartition(".")
    if not dot or not head or not tenant:
        raise ValidationError("NetworkID", f"NetworkID {network_id!r} must be <network>.<tenant> or <network>:<group>.<tenant>")
    network, _, group = head.partition(":")
    return tenant, network, group


def alloc_address(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> dict[str, Any]:
    """Reserve an address without an endpoint (IPAM drivers); from the group's pool if named."""
    network_id = _text(request, "NetworkID")
    tenant, network, group = parse_network_id(network_id)
    net, epg, address = ipam.allocate_ipv4(
        _network(reads, tenant, network), _group(reads, tenant, group, network), _text(request, "PreferredIPv4Address", required=False)
    )
    _write_addresses(writes, net, epg)
    return {"NetworkID": network_id, "IPv4Address": f"{address}/{net.subnet_len}"}


def release_address(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> str:
    network_id = _text(request, "NetworkID")
    tenant, network, group = parse_network_id(network_id)
    net, epg = _network(reads, tenant, network), _group(reads, tenant, group, network)
    address = _text(request, "IPv4Address").partition("/")[0]
    try:
        net, epg, _ = ipam.release_ipv4(net, epg, address)
    except ValueError:
        raise ValidationError("IPv4Address", f"address {address} is not in network {network_id}") from None
    _write_addresses(writes, net, epg)
    return "success"

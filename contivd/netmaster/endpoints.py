"""Endpoint and address plans (Contiv's /plugin/* routes) as functions over guarded Reads.

Each plan reads what it needs through `Reads.state`, mutates those private copies, registers
its writes and returns its answer, or raises a ModelError having changed nothing it keeps
(the caller restores its checkpoint). The netmaster commits a batch of plans at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import NotFoundError, ValidationError
from ..state import keys as layout
from . import ipam, services
from .view import Reads, Writes


def _text(request: Mapping[str, Any], field: str, *, required: bool = True) -> str:
    value = request.get(field, "")
    if not isinstance(value, str):
        raise ValidationError(field, f"{field} must be a string, got {type(value).__name__}")
    if required and not value:
        raise ValidationError(field, f"{field} is required")
    return value


def _network(reads: Reads, tenant: str, network: str) -> tuple[str, dict[str, Any]]:
    if reads.state(layout.model("network", f"{tenant}:{network}")) is None:
        raise NotFoundError(f"network {tenant}:{network} not found")
    key = layout.net_state(tenant, network)
    state = reads.state(key)
    if state is None:
        raise NotFoundError(f"network {tenant}:{network} has no state")
    return key, state


def _group(reads: Reads, tenant: str, group: str, network: str) -> tuple[str, dict[str, Any]] | tuple[None, None]:
    if not group:
        return None, None
    obj = reads.state(layout.model("endpointGroup", f"{tenant}:{group}"))
    if obj is None:
        raise NotFoundError(f"endpointGroup {tenant}:{group} not found")
    if obj["networkName"] != network:
        raise ValidationError("ServiceName", f"endpoint group {group} belongs to network {obj['networkName']}, not {network}")
    key = layout.epg_state(tenant, group)
    state = reads.state(key)
    if state is None:
        raise NotFoundError(f"endpointGroup {tenant}:{group} has no state")
    return key, state


def create_endpoint(reads: Reads, writes: Writes, request: Mapping[str, Any], node: str) -> dict[str, Any]:
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
    endpoint_id = layout.ep_id(tenant, network, endpoint)
    ep_key = layout.ep_state(endpoint_id)
    existing: dict[str, Any] | None = reads.state(ep_key)
    if existing is not None:
        return existing
    net_key, net = _network(reads, tenant, network)
    epg_key, epg = _group(reads, tenant, group, network)
    ipv4 = ipam.allocate_ipv4(net, epg, _text(config, "IPAddress", required=False))
    ipv6 = ipam.allocate_ipv6(net, _text(config, "IPv6Address", required=False)) if "ipv6SubnetIP" in net else ""
    net["epCount"] = net.get("epCount", 0) + 1
    state = {
        "id": endpoint_id,
        "netID": layout.net_id(tenant, network),
        "endpointID": endpoint,
        "serviceName": group,
        "endpointGroupId": epg["endpointGroupId"] if epg else 0,
        "endpointGroupKey": f"{group}:{tenant}" if group else "",
        "ipAddress": ipv4,
        "ipv6Address": ipv6,
        "macAddress": ipam.mac_for(ipv4),
        "homingHost": _text(config, "Host", required=False) or node,
        "intfName": "",
        "vtepIP": "",
        "labels": None,
        "containerId": _text(config, "Container", required=False),
        "epCommonName": _text(request, "EPCommonName", required=False),
    }
    if pod := _text(request, "K8sPod", required=False):  # contivd's extension: absent otherwise, as in Contiv
        state["k8sPod"] = pod
    writes.put(net_key, net)
    if epg_key and epg is not None:
        epg["epCount"] = epg.get("epCount", 0) + 1
        writes.put(epg_key, epg)
    writes.put(ep_key, state)
    return state


def delete_endpoint(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> dict[str, Any] | None:
    """Free the endpoint's addresses and remove its state; None if it did not exist."""
    tenant = _text(request, "TenantName")
    network = _text(request, "NetworkName")
    endpoint = _text(request, "EndpointID")
    ep_key = layout.ep_state(layout.ep_id(tenant, network, endpoint))
    state: dict[str, Any] | None = reads.state(ep_key)
    if state is None:
        return None
    net_key = layout.net_state(tenant, network)
    net = reads.state(net_key)
    if net is not None:  # the network may already be gone: then only the endpoint is cleared
        epg_key = layout.epg_state(tenant, state["serviceName"]) if state.get("serviceName") else None
        epg = reads.state(epg_key) if epg_key else None
        ipam.release_ipv4(net, epg, state["ipAddress"])
        ipam.release_ipv6(net, state.get("ipv6Address", ""))
        net["epCount"] = max(0, net.get("epCount", 0) - 1)
        writes.put(net_key, net)
        if epg_key and epg is not None:
            epg["epCount"] = max(0, epg.get("epCount", 0) - 1)
            writes.put(epg_key, epg)
    writes.delete(ep_key)
    if state.get("labels"):
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
    group = reads.state(layout.model("endpointGroup", f"{tenant}:{network}"))
    if group is not None:  # Network may name a group: use the group's network
        network = group["networkName"]
    ep_key = layout.ep_state(layout.ep_id(tenant, network, endpoint))
    state = reads.state(ep_key)
    if state is None:
        raise NotFoundError(f"endpoint {layout.ep_id(tenant, network, endpoint)} not found")
    labels = request.get("Labels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise ValidationError("Labels", "Labels must map strings to strings")
    if event == "start":
        state["labels"] = {**(state.get("labels") or {}), **labels}
        state["containerId"] = _text(request, "ContainerID", required=False) or state.get("containerId", "")
        state["epCommonName"] = _text(request, "EPCommonName", required=False) or state.get("epCommonName", "")
    else:  # a dead container stops providing: drop its labels
        state["labels"] = None
    writes.put(ep_key, state)
    services.refresh_tenant(reads, writes, tenant)
    return {"IPAddress": request.get("IPAddress", state["ipAddress"])}


def _string_map(request: Mapping[str, Any], field: str) -> dict[str, str]:
    value = request.get(field) or {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValidationError(field, f"{field} must map strings to strings")
    return dict(value)


def relabel_endpoint(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> dict[str, Any]:
    """Move a running endpoint to the group `Group` ("": none) and replace its labels with
    `Labels`, in one commit: group counts, the endpoint's group id and key, the tenant's
    services. Its address, MAC and port stay, so the node re-programs its flows without a new
    interface. Refused (nothing written) for an unknown group, a group of another network, or
    when either group hands out addresses from its own ipPool (the address would have to change)."""
    tenant = _text(request, "Tenant")
    network = _text(request, "Network")
    endpoint_id = layout.ep_id(tenant, network, _text(request, "EndpointID"))
    group = _text(request, "Group", required=False)
    labels = _string_map(request, "Labels")
    ep_key = layout.ep_state(endpoint_id)
    state: dict[str, Any] | None = reads.state(ep_key)
    if state is None:
        raise NotFoundError(f"endpoint {endpoint_id} not found")
    old_group = state.get("serviceName") or ""
    if group != old_group:
        new_key, new_epg = _group(reads, tenant, group, network)
        old_key = layout.epg_state(tenant, old_group) if old_group else None
        old_epg = reads.state(old_key) if old_key else None
        for name, epg in ((old_group, old_epg), (group, new_epg)):
            if epg is not None and epg.get("IPPool"):
                raise ValidationError(
                    "Group", f"endpoint group {name} hands out addresses from its ipPool {epg['IPPool']}: moving {endpoint_id} needs a new address"
                )
        if old_key and old_epg is not None:
            old_epg["epCount"] = max(0, old_epg.get("epCount", 0) - 1)
            writes.put(old_key, old_epg)
        if new_key and new_epg is not None:
            new_epg["epCount"] = new_epg.get("epCount", 0) + 1
            writes.put(new_key, new_epg)
        state["serviceName"] = group
        state["endpointGroupId"] = new_epg["endpointGroupId"] if new_epg else 0
        state["endpointGroupKey"] = f"{group}:{tenant}" if group else ""
    elif (state.get("labels") or {}) == labels:
        return state  # nothing to change
    state["labels"] = labels
    writes.put(ep_key, state)
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
    net_key, net = _network(reads, tenant, network)
    epg_key, epg = _group(reads, tenant, group, network)
    address = ipam.allocate_ipv4(net, epg, _text(request, "PreferredIPv4Address", required=False))
    writes.put(net_key, net)
    if epg_key and epg is not None:
        writes.put(epg_key, epg)
    return {"NetworkID": network_id, "IPv4Address": f"{address}/{net['subnetLen']}"}


def release_address(reads: Reads, writes: Writes, request: Mapping[str, Any]) -> str:
    network_id = _text(request, "NetworkID")
    tenant, network, group = parse_network_id(network_id)
    net_key, net = _network(reads, tenant, network)
    epg_key, epg = _group(reads, tenant, group, network)
    address = _text(request, "IPv4Address").partition("/")[0]
    try:
        ipam.release_ipv4(net, epg, address)
    except ValueError:
        raise ValidationError("IPv4Address", f"address {address} is not in network {network_id}") from None
    writes.put(net_key, net)
    if epg_key and epg is not None:
        writes.put(epg_key, epg)
    return "success"

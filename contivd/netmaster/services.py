"""Service load balancers: VIP from the service's network, providers chosen by labels.

A provider is an endpoint of the same tenant whose labels include every selector
(`selector ⊆ labels`, Decision 3). The serviceLB and provider states are recomputed from
current endpoints whenever a service changes or an endpoint of its tenant changes, and
written only where they differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..state import keys as layout
from . import ipam
from .view import Reads, Writes


def _selectors(service: Mapping[str, Any]) -> dict[str, str]:
    return dict(s.split("=", 1) for s in service.get("selectors", []))


def _state_key(tenant: str, service: str) -> str:
    return f"{layout.SERVICE_LB_PREFIX}{service}:{tenant}"


def _provider_key(tenant: str, service: str) -> str:
    return f"{layout.PROVIDER_PREFIX}{service}:{tenant}"


def allocate_vip(reads: Reads, writes: Writes, service: Mapping[str, Any]) -> str:
    net_key = layout.net_state(service["tenantName"], service["networkName"])
    network = reads.state(net_key)
    vip = ipam.allocate_ipv4(network, None, service.get("ipAddress", ""))
    writes.put(net_key, network)
    return vip


def release_vip(reads: Reads, writes: Writes, service: Mapping[str, Any], vip: str) -> None:
    net_key = layout.net_state(service["tenantName"], service["networkName"])
    network = reads.state(net_key)
    if network is not None and vip:
        ipam.release_ipv4(network, None, vip)
        writes.put(net_key, network)


def refresh(reads: Reads, writes: Writes, tenant: str, services: Sequence[Mapping[str, Any]], endpoints: Sequence[Mapping[str, Any]]) -> None:
    """Write the serviceLB and provider states of `services` for the tenant's `endpoints`."""
    for service in services:
        name = service["serviceName"]
        key = _state_key(tenant, name)
        old = reads.state(key) or {}
        wanted = _selectors(service)
        providers = {
            f"{ep['ipAddress']}:{tenant}": {
                "IPAddress": ep["ipAddress"],
                "ContainerID": ep.get("containerId", ""),
                "Labels": ep.get("labels") or {},
                "Tenant": tenant,
                "Network": ep["netID"].rpartition(".")[0],
                "Services": [f"{name}:{tenant}"],
                "Container": ep.get("containerId", ""),
                "EpIDKey": ep["id"],
            }
            for ep in sorted(endpoints, key=lambda e: e["id"])
            if wanted and wanted.items() <= (ep.get("labels") or {}).items()
        }
        state = {
            "id": f"{name}:{tenant}",
            "servicename": name,
            "tenantname": tenant,
            "subnet": service["networkName"],
            "ports": list(service.get("ports", [])),
            "selectors": wanted,
            "ipaddress": old.get("ipaddress", ""),
            "providers": providers,
        }
        if state != old:
            writes.put(key, state)
        provider_state = {
            "id": f"{name}:{tenant}",
            "ServiceName": f"{name}:{tenant}",
            "Providers": sorted(p["IPAddress"] for p in providers.values()),
        }
        if reads.state(_provider_key(tenant, name)) != provider_state:
            writes.put(_provider_key(tenant, name), provider_state)


def remove(writes: Writes, tenant: str, name: str) -> None:
    writes.delete(_state_key(tenant, name))
    writes.delete(_provider_key(tenant, name))


def set_vip(reads: Reads, writes: Writes, tenant: str, name: str, vip: str) -> None:
    key = _state_key(tenant, name)
    state = dict(reads.state(key) or {})
    state["ipaddress"] = vip
    writes.put(key, state)


def refresh_tenant(reads: Reads, writes: Writes, tenant: str) -> None:
    """After an endpoint change: recompute the tenant's services, if it has any.

    Guarded by CONFIG_VERSION (a service created concurrently forces a retry) and by each
    service state (another network's batch refreshing the same service forces one too)."""
    reads.state(layout.CONFIG_VERSION)
    services = [v for v in reads.list_states(layout.model_prefix("serviceLB")).values() if v["tenantName"] == tenant]
    if services:
        endpoints = [ep for ep in reads.list_states(layout.EPS_PREFIX).values() if ep["netID"].rpartition(".")[2] == tenant]
        refresh(reads, writes, tenant, services, endpoints)

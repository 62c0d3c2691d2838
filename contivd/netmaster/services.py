"""Service load balancers: VIP from the service's network, providers chosen by labels.

A provider is an endpoint of the same tenant whose labels include every selector
(`selector ⊆ labels`, Decision 3). The serviceLB and provider states are recomputed from
current endpoints whenever a service changes or an endpoint of its tenant changes, and
written only where they differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..model import NotFoundError
from ..state import EndpointState, NetworkState, Provider, ServiceLBState, ServiceProvidersState, tables
from ..state.tables import ConfigObject
from . import ipam
from .view import Reads, Writes


def _selectors(service: ConfigObject) -> dict[str, str]:
    return dict(s.split("=", 1) for s in service.get("selectors", []))


def _network(reads: Reads, service: ConfigObject) -> tuple[str, NetworkState | None]:
    network_id = tables.network_id(service["tenantName"], service["networkName"])
    return network_id, reads.read(tables.NETWORKS, network_id)


def allocate_vip(reads: Reads, writes: Writes, service: ConfigObject) -> str:
    network_id, network = _network(reads, service)
    if network is None:
        raise NotFoundError(f"network {service['tenantName']}:{service['networkName']} has no state")
    network, _, vip = ipam.allocate_ipv4(network, None, service.get("ipAddress", ""))
    writes.put(tables.NETWORKS, network_id, network)
    return vip


def release_vip(reads: Reads, writes: Writes, service: ConfigObject, vip: str) -> None:
    network_id, network = _network(reads, service)
    if network is not None and vip:
        writes.put(tables.NETWORKS, network_id, ipam.release_ipv4(network, None, vip).network)


def refresh(reads: Reads, writes: Writes, tenant: str, services: Sequence[ConfigObject], endpoints: Sequence[EndpointState]) -> None:
    """Write the serviceLB and provider states of `services` for the tenant's `endpoints`."""
    for service in services:
        name = service["serviceName"]
        service_id = tables.service_id(tenant, name)
        old = reads.read(tables.SERVICES, service_id)
        wanted = _selectors(service)
        providers = {
            f"{ep.ip_address}:{tenant}": Provider(
                ip_address=ep.ip_address,
                container_id=ep.container_id,
                labels=ep.labels or (),
                tenant=tenant,
                network=ep.network,
                services=(service_id,),
                endpoint_key=ep.id,
            )
            for ep in sorted(endpoints, key=lambda e: e.id)
            if wanted and wanted.items() <= dict(ep.labels or ()).items()
        }
        state = ServiceLBState(
            id=service_id,
            service_name=name,
            tenant_name=tenant,
            network=service["networkName"],
            ports=tuple(service.get("ports", [])),
            selectors=tuple(wanted.items()),
            ip_address=old.ip_address if old else "",
            providers=tuple(providers.items()),
        )
        if old is None or state.to_json() != old.to_json():  # as stored: label order does not count
            writes.put(tables.SERVICES, service_id, state)
        provider_state = ServiceProvidersState(service_id, service_id, tuple(sorted(p.ip_address for p in providers.values())))
        if reads.read(tables.PROVIDERS, service_id) != provider_state:
            writes.put(tables.PROVIDERS, service_id, provider_state)


def remove(writes: Writes, tenant: str, name: str) -> None:
    writes.delete(tables.SERVICES, tables.service_id(tenant, name))
    writes.delete(tables.PROVIDERS, tables.service_id(tenant, name))


def vip(reads: Reads, tenant: str, name: str) -> str:
    """The service's VIP as its state holds it ("" before it has one)."""
    state = reads.read(tables.SERVICES, tables.service_id(tenant, name))
    return state.ip_address if state else ""


def set_vip(reads: Reads, writes: Writes, tenant: str, name: str, vip: str) -> None:
    """Record the VIP in the service's state (`refresh` wrote it first)."""
    service_id = tables.service_id(tenant, name)
    state = reads.read(tables.SERVICES, service_id)
    if state is None:
        raise NotFoundError(f"serviceLB {tenant}:{name} has no state")
    writes.put(tables.SERVICES, service_id, replace(state, ip_address=vip))


def refresh_tenant(reads: Reads, writes: Writes, tenant: str) -> None:
    """After an endpoint change: recompute the tenant's services, if it has any.

    Guarded by CONFIG_VERSION (a service created concurrently forces a retry) and by each
    service state (another network's batch refreshing the same service forces one too)."""
    reads.read(tables.CONFIG_VERSION)
    services = [v for v in reads.scan(tables.CONFIG, tables.config_id("serviceLB", "")).values() if v["tenantName"] == tenant]
    if services:
        endpoints = [ep for ep in reads.scan(tables.ENDPOINTS).values() if ep.tenant == tenant]
        refresh(reads, writes, tenant, services, endpoints)

"""Service + its EndpointSlices → the `KubeServiceState` the datapath programs, or why not.

Pure functions over the API objects as the API server sends them (JSON dicts, camelCase), so
every rule below is unit-tested without a server:

- headless Services (`clusterIP: None`) and ExternalName Services (no cluster IP) have no
  record and are not reported: there is nothing to proxy;
- a Service contivd cannot program is skipped with a reason: a port with a protocol other
  than TCP/UDP (SCTP), a cluster IP outside `--service-cidr`;
- each Service port's backends come from every IPv4 slice port of the same name and protocol
  (kube-proxy's rule: the slice already holds the resolved, possibly named, `targetPort`, and it
  may differ per slice); endpoints whose `conditions.ready` is false are left out (unset means
  ready, as the API documents);
- `sessionAffinity: ClientIP` keeps a client on its backend for the configured timeout
  (Kubernetes' default 10800 s);
- `spec.externalIPs` and `status.loadBalancer.ingress[].ip` (IPv4) are kept: every node serves
  the Service's ports on them;
- `externalTrafficPolicy: Local` and `healthCheckNodePort` are kept: each node sends outside
  clients to its own backends (contivd.agent.noderules) and answers the health check.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..state import KubeBackend, KubeServicePort, KubeServiceState

SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # names the Service an EndpointSlice belongs to
DEFAULT_AFFINITY_SECONDS = 10800
PROGRAMMABLE_PROTOCOLS = ("TCP", "UDP")


@dataclass(frozen=True)
class Skipped:
    """A Service left unprogrammed: `reason` is a short label (metrics), `message` says why."""

    reason: str
    message: str


Resolution = KubeServiceState | Skipped | None  # None: nothing to program and nothing wrong (headless)


def object_key(obj: Mapping[str, Any]) -> str:
    """`<namespace>/<name>` of an API object."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def owning_service(endpoint_slice: Mapping[str, Any]) -> str | None:
    """`<namespace>/<service>` the slice belongs to (its `kubernetes.io/service-name` label)."""
    meta = endpoint_slice.get("metadata") or {}
    name = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
    return f"{meta.get('namespace') or ''}/{name}" if name else None


def resolve_service(service: Mapping[str, Any], slices: Iterable[Mapping[str, Any]], service_cidr: ipaddress.IPv4Network) -> Resolution:
    """The record for `service` given its EndpointSlices, a Skipped, or None when headless.
    A malformed object (the API server validates, but a record must never be half-built) is
    skipped, named."""
    try:
        return _resolve(service, list(slices), service_cidr)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        return Skipped("malformed", f"the Service or one of its EndpointSlices cannot be read: {exc!r}")


def _resolve(service: Mapping[str, Any], slices: list[Mapping[str, Any]], service_cidr: ipaddress.IPv4Network) -> Resolution:
    meta = service.get("metadata") or {}
    spec = service.get("spec") or {}
    cluster_ip = spec.get("clusterIP") or ""
    if cluster_ip in ("", "None") or spec.get("type") == "ExternalName":
        return None
    for port in spec.get("ports") or ():
        protocol = port.get("protocol") or "TCP"
        if protocol not in PROGRAMMABLE_PROTOCOLS:
            return Skipped(protocol.lower(), f"port {port.get('name') or port.get('port')} uses {protocol}: only TCP and UDP are programmed")
    try:
        address = ipaddress.ip_address(cluster_ip)
    except ValueError:
        return Skipped("invalid-cluster-ip", f"clusterIP {cluster_ip!r} is not an IP address")
    if address not in service_cidr:
        return Skipped("cluster-ip-outside-service-cidr", f"clusterIP {cluster_ip} is outside --service-cidr {service_cidr}")
    usable = [s for s in slices if s.get("addressType", "IPv4") == "IPv4"]
    ports = tuple(
        KubeServicePort(
            name=port.get("name") or "",
            protocol=port.get("protocol") or "TCP",
            port=int(port["port"]),
            node_port=int(port.get("nodePort") or 0),
            backends=_backends(port.get("name") or "", port.get("protocol") or "TCP", usable),
        )
        for port in spec.get("ports") or ()
    )
    affinity = 0
    if spec.get("sessionAffinity") == "ClientIP":
        client_ip = (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}
        affinity = int(client_ip.get("timeoutSeconds") or DEFAULT_AFFINITY_SECONDS)
    return KubeServiceState(
        namespace=meta.get("namespace") or "",
        name=meta.get("name") or "",
        cluster_ip=cluster_ip,
        ports=ports,
        affinity_timeout=affinity,
        resource_version=str(meta.get("resourceVersion") or ""),
        external_ips=_external_ips(service),
        local_traffic=spec.get("externalTrafficPolicy") == "Local",
        health_check_node_port=int(spec.get("healthCheckNodePort") or 0),
    )


def _external_ips(service: Mapping[str, Any]) -> tuple[str, ...]:
    """`spec.externalIPs` and the load balancer's `status.loadBalancer.ingress` IPs: the addresses
    the nodes serve the Service's ports on, as kube-proxy does. IPv6 addresses and ingress
    hostnames are left out (the datapath is IPv4)."""
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
    texts = [*((service.get("spec") or {}).get("externalIPs") or ()), *(entry.get("ip") or "" for entry in ingress)]
    found = set()
    for text in texts:
        try:
            found.add(ipaddress.IPv4Address(text))
        except ValueError:
            continue
    return tuple(str(address) for address in sorted(found))


def _backends(port_name: str, protocol: str, slices: Iterable[Mapping[str, Any]]) -> tuple[KubeBackend, ...]:
    """Ready addresses of every slice, each with the slice's port of this name and protocol."""
    found: set[KubeBackend] = set()
    for endpoint_slice in slices:
        target = next(
            (
                p.get("port")
                for p in endpoint_slice.get("ports") or ()
                if (p.get("name") or "") == port_name and (p.get("protocol") or "TCP") == protocol
            ),
            None,
        )
        if target is None:
            continue
        for endpoint in endpoint_slice.get("endpoints") or ():
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            found.update(KubeBackend(address, int(target)) for address in endpoint.get("addresses") or ())
    return tuple(sorted(found))

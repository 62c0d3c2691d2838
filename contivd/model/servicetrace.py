"""Where a traced packet to a Service address goes: the backends the pipeline's load balancing
would DNAT it to (docs/pipeline.md, service_lb), so `ctl trace` judges policy against them.

Pure: the services as the agents program them (`openflow.ServiceSpec`, from the store's
serviceLB and Kubernetes Service records) and the packet in, the translation out. The select
group picks one backend per connection by the datapath's own hash, which OVS's trace cannot
follow (it ends at `hash(sym_l4(0)),recirc`), so every backend the packet may reach is listed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from openflow.inputs import Backend, ServiceSpec

_PROTO_NAMES = {6: "tcp", 17: "udp", 1: "icmp", 0: "any protocol"}


@dataclass(frozen=True)
class Translation:
    """A packet addressed to a service's VIP. `backends` empty: the pipeline does not DNAT it
    (no VIP:port flow matches), `why` says so; such a packet is dropped (the VIP's own drop flow
    in service_lb, or the forward table for a service with no backend at all)."""

    service: str
    vip: int
    backends: tuple[Backend, ...]
    why: str


def owner_of(services: Iterable[ServiceSpec], address: int) -> ServiceSpec | None:
    """The service whose VIP the agents program at `address`: the first live one by id (as
    they keep it when two claim one VIP), else the first one without backends; None: no VIP."""
    claims = sorted((s for s in services if s.vip == address), key=lambda s: (not s.live, s.service_id))
    return claims[0] if claims else None


def translate(services: Iterable[ServiceSpec], address: int, proto: int, port: int) -> Translation | None:
    """The backends a first packet proto/port to `address` is DNATed to; None when `address` is
    no service's VIP (the packet is traced as addressed)."""
    service = owner_of(services, address)
    if service is None:
        return None
    vip = f"{ipaddress.IPv4Address(address)}"
    what = f"{_PROTO_NAMES.get(proto, f'protocol {proto}')}" + (f"/{port}" if port else "")
    matching = next((p for p in service.ports if p.proto == proto and p.port == port), None)
    if matching is None:
        listed = ", ".join(f"{_PROTO_NAMES.get(p.proto, p.proto)}/{p.port}" for p in service.ports) or "none"
        why = f"service {service.service_id} ({vip}) has no port {what} (its ports: {listed}): not DNATed: dropped"
        return Translation(service.service_id, address, (), why)
    if not matching.backends:
        why = f"service {service.service_id} ({vip}) has no backend for {what}: not DNATed: dropped"
        return Translation(service.service_id, address, (), why)
    count = len(matching.backends)
    why = f"service {service.service_id} ({vip}) {what}: DNATed by its select group to one of {count} backend{'s' * (count > 1)}"
    return Translation(service.service_id, address, matching.backends, why)

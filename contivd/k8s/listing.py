"""Kubernetes Services beside Contiv's service load balancers, as `/kubernetes/services`,
`contivd ctl service ls` and the status page show them: read from the node's snapshot, each
row marked with its `kind` (`contiv` or `kubernetes`); and the ends of a `/kubernetes/trace`."""

from __future__ import annotations

import ipaddress
from typing import Any

from ..model import NotFoundError
from ..state import KubeServicePort, StateSnapshot


def kubernetes_services(snapshot: StateSnapshot) -> list[dict[str, Any]]:
    """Every stored Kubernetes Service record, sorted by `<namespace>/<name>`, with `kind`."""
    return [{"kind": "kubernetes", **record.to_json()} for _, record in sorted(snapshot.k8s_services.items())]


def port_text(port: KubeServicePort) -> str:
    """`http 80/TCP` (`→ :30080` with a NodePort)."""
    text = f"{port.name + ' ' if port.name else ''}{port.port}/{port.protocol}"
    return text + (f" (node :{port.node_port})" if port.node_port else "")


def service_rows(snapshot: StateSnapshot) -> list[dict[str, Any]]:
    """One row per service of either kind: kind, name, address, ports, backends (distinct addresses)."""
    rows = [
        {
            "kind": "contiv",
            "name": f"{lb.tenant_name}/{lb.service_name}",
            "address": lb.ip_address,
            "ports": list(lb.ports),
            "backends": len(lb.providers),
        }
        for _, lb in sorted(snapshot.services.items())
    ]
    rows += [
        {
            "kind": "kubernetes",
            "name": key,
            "address": record.cluster_ip,
            "ports": [port_text(p) for p in record.ports],
            "backends": len({b.ip for p in record.ports for b in p.backends}),
        }
        for key, record in sorted(snapshot.k8s_services.items())
    ]
    return rows


def trace_address(snapshot: StateSnapshot, ref: str) -> str:
    """The IPv4 address of a trace end: an address, an endpoint id, or a pod `namespace/name`
    (one with NetworkPolicy rules, or an endpoint whose common name is the pod's name);
    NotFoundError naming it otherwise."""
    try:
        return str(ipaddress.IPv4Address(ref))
    except ValueError:
        pass
    endpoint = snapshot.endpoints.get(ref)
    if endpoint is not None and endpoint.ip_address:
        return endpoint.ip_address
    pod = snapshot.k8s_netpol.get(ref)
    if pod is not None and pod.rules:
        return str(ipaddress.IPv4Address(pod.rules[0].pod_ip))
    _, _, name = ref.partition("/")
    named = sorted(ep.ip_address for ep in snapshot.endpoints.values() if name and ep.ep_common_name == name and ep.ip_address)
    if len(named) == 1:
        return named[0]
    raise NotFoundError(
        f"trace: {ref!r} is not an IPv4 address, an endpoint id or a pod we know" + (" (several endpoints have that name)" if named else "")
    )

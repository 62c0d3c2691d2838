"""Kubernetes Services beside Contiv's service load balancers, as `/kubernetes/services`,
`contivd ctl service ls` and the status page show them: read from the node's snapshot, each
row marked with its `kind` (`contiv` or `kubernetes`)."""

from __future__ import annotations

from typing import Any

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

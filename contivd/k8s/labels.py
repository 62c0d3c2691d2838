"""A running pod's labels → what its endpoint should become, or why that cannot be done.

Pure: the leader's pod watch (pods.py) feeds it an endpoint record and the pod's labels now.
Contiv read a pod's labels at CNI ADD only; contivd follows later changes where the pod's
interface can stay:

- the labels the endpoint carries (service selectors choose providers by them) become the
  pod's labels: replaced, not merged, so a removed label stops selecting;
- a changed `io.contiv.net-group` moves the endpoint to the named group (removed: no group),
  on the same network: same address, same port, new policy;
- a changed `io.contiv.tenant` or `io.contiv.network` naming another tenant or network cannot
  be followed without a new interface and address: it is reported and nothing changes (the
  pod keeps its endpoint until it is re-created). A removed tenant/network label is ignored:
  the default it falls back to at ADD (CNI args, the network config) is not known here.

Only a label that changed since the endpoint was last labelled counts: a group chosen at ADD by
the CNI arguments or the network config is left alone while the pod's group label stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..state import EndpointState

TENANT_LABEL = "io.contiv.tenant"
NETWORK_LABEL = "io.contiv.network"
GROUP_LABEL = "io.contiv.net-group"


@dataclass(frozen=True)
class Relabel:
    """Move `endpoint` to `group` ("" none) and give it `labels`: the netmaster's relabel request."""

    endpoint: EndpointState
    group: str
    labels: Mapping[str, str]

    def request(self) -> dict[str, Any]:
        return {
            "Tenant": self.endpoint.tenant,
            "Network": self.endpoint.network,
            "EndpointID": self.endpoint.endpoint_id,
            "Group": self.group,
            "Labels": dict(self.labels),
        }


@dataclass(frozen=True)
class NotApplied:
    """A label change left unapplied: `reason` is a short label (metrics), `message` says why."""

    reason: str
    message: str


def pod_labels(pod: Mapping[str, Any]) -> dict[str, str]:
    """`metadata.labels` of a Pod as the API server sends it (absent: none)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def plan_relabel(endpoint: EndpointState, labels: Mapping[str, str]) -> Relabel | NotApplied | None:
    """What the pod's `labels` ask of its endpoint; None when the endpoint already has them."""
    old, new = dict(endpoint.labels or ()), dict(labels)
    if old == new:
        return None
    for label, have, what in ((TENANT_LABEL, endpoint.tenant, "tenant"), (NETWORK_LABEL, endpoint.network, "network")):
        wanted = new.get(label, "")
        if wanted and wanted != old.get(label) and wanted != have:
            return NotApplied(
                f"{what}-change",
                f"label {label}={wanted} asks for {what} {wanted}, but endpoint {endpoint.id} is on {endpoint.tenant}/{endpoint.network}: "
                "that needs a new interface and address, so nothing was changed (re-create the pod to move it)",
            )
    group = endpoint.service_name
    if new.get(GROUP_LABEL, "") != old.get(GROUP_LABEL, ""):
        group = new.get(GROUP_LABEL, "")
    return Relabel(endpoint, group, new)

"""Store state + this node's OVS ports → `openflow.NodeInputs`, as a pure function.

The netmaster writes Contiv's state layout (contivd.netmaster.layout); the flow builders
take frozen inputs with `from_state` constructors (openflow.inputs). This module decides
which endpoints are local (homed on this node *and* attached to a port here), which are
remote (and behind which VTEP, from the node registry), and which objects cannot be used:
those are skipped and reported, never allowed to stop the rest of the node's flows.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openflow import (
    InputError,
    LocalPort,
    NodeInputs,
    PolicyRuleSpec,
    RemoteEndpoint,
    ServiceSpec,
    TunnelPort,
)
from openflow.inputs import Encap

from ..nodes import NodeInfo
from ..state import keys as layout


@dataclass(frozen=True)
class Built:
    inputs: NodeInputs
    problems: tuple[str, ...]
    """One line per skipped object: what the status page and logs show."""


def _under(states: Mapping[str, Any], prefix: str) -> list[tuple[str, Any]]:
    return sorted((key, value) for key, value in states.items() if key.startswith(prefix))


def node_inputs(
    *,
    node: str,
    encap: Encap,
    states: Mapping[str, Any],
    ports: Mapping[str, int],
    tunnels: Mapping[str, int],
    nodes: Sequence[NodeInfo],
    uplinks: Sequence[int] = (),
    round: int = 0,
) -> Built:
    """Inputs for this node's `encap` bridge.

    states: store key → value for everything under /contiv.io/state/.
    ports: endpoint id → ofport of the ports attached here (from OVSDB external_ids).
    tunnels: remote VTEP IP → ofport of the VXLAN port towards it.
    """
    problems: list[str] = []
    vteps = {n.name: n.vtep_ip for n in nodes}
    networks = {value["id"]: value for _, value in _under(states, layout.NETS_PREFIX)}
    groups = {key[len(layout.EPGS_PREFIX) :]: value for key, value in _under(states, layout.EPGS_PREFIX)}
    local: list[LocalPort] = []
    remote: list[RemoteEndpoint] = []
    for _, ep in _under(states, layout.EPS_PREFIX):
        net = networks.get(ep.get("netID"))
        if net is None or net.get("pktTagType") != encap:
            continue
        try:
            if ep.get("homingHost") == node:
                if ep["id"] in ports:
                    group = groups.get(ep.get("endpointGroupKey", "")) if ep.get("endpointGroupKey") else None
                    local.append(LocalPort.from_state(ep, net, group, ports[ep["id"]]))
            else:
                vtep = vteps.get(ep.get("homingHost", ""), "")
                if encap == "vxlan" and not vtep:
                    problems.append(f"endpoint {ep['id']}: node {ep.get('homingHost')!r} is not registered; no VTEP")
                    continue
                remote.append(RemoteEndpoint.from_state(ep, net, vtep))
        except (InputError, KeyError) as exc:
            problems.append(f"endpoint {ep.get('id', '?')}: {exc}")
    rules: list[PolicyRuleSpec] = []
    for key, rule in _under(states, layout.POLICY_RULE_PREFIX):
        try:
            rules.append(PolicyRuleSpec.from_state(rule))
        except (InputError, KeyError) as exc:
            problems.append(f"policy rule {key[len(layout.POLICY_RULE_PREFIX) :]}: {exc}")
    services: list[ServiceSpec] = []
    for key, lb in _under(states, layout.SERVICE_LB_PREFIX):
        name = key[len(layout.SERVICE_LB_PREFIX) :]
        if not lb.get("ipaddress"):
            continue
        try:
            services.append(ServiceSpec.from_state(lb, states.get(f"{layout.PROVIDER_PREFIX}{name}")))
        except (InputError, KeyError) as exc:
            problems.append(f"service {name}: {exc}")
    tunnel_ports = [TunnelPort(ofport, int(ipaddress.IPv4Address(ip))) for ip, ofport in sorted(tunnels.items())]
    inputs = NodeInputs(
        encap=encap,
        local_ports=tuple(sorted(local)),
        remote_endpoints=tuple(sorted(remote)),
        tunnels=tuple(tunnel_ports),
        uplinks=tuple(sorted(uplinks)),
        rules=tuple(rules),
        services=tuple(services),
        round=round,
    )
    return Built(inputs, tuple(problems))

"""The address a bridge's NodePort connections leave the node with, and the NodePort backends that cannot answer it.

The node DNATs `<node address>:<nodePort>` to the ClusterIP and routes it into the bridge's host
port (contivd.agent.noderules, hostnet); the backend answers the connection's source address
through its gateway, so that source must be one the backend's switch hands back to *this* node:

* the node's VTEP, on the VXLAN bridge, when other nodes reach it: every switch sends a gateway
  network's packets for a peer's VTEP through the tunnel to that peer, so every backend answers;
* otherwise the node's private address. Every switch hands packets for it to its own node, so
  only backends on this node answer. That is the VLAN bridge (no tunnels), and a loopback VTEP:
  the default single-node install, whose control IP and so VTEP is 127.0.0.1. A packet for
  127.0.0.1 coming in on the host port is a martian the kernel drops, so SNATing to it, as
  contivd once did, left every NodePort unanswered there.

A NodePort Service whose backends include some that cannot answer (on other nodes, or on a
network without a gateway, which answers through the pod's `host1` link outside the switch) is
reported as the agent's problem, once per change (status page, log, /metrics): connections the
switch sends to such a backend fail. Pure; the agent reads the VTEP from the node registry.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from openflow import HostPort, NodeInputs
from openflow.inputs import Encap

from .hostnet import HOST_PORT_NAMES
from .inputs import KUBE_SERVICE_PREFIX


@dataclass(frozen=True)
class NodePortSource:
    """Where a bridge's NodePort connections come from (openflow.HostPort.nodeport_source)."""

    address: int  # the VTEP; 0: the node's private address
    local_only: str = ""  # why only this node's backends answer (when `address` is 0)


def nodeport_source(encap: Encap, vtep_ip: str) -> NodePortSource:
    """The VTEP on the VXLAN bridge when it is an address other nodes can reach, else the private address."""
    if encap != "vxlan":
        return NodePortSource(0, "on the VLAN bridge NodePort connections leave with the node's private address, which every node has")
    if not vtep_ip:
        return NodePortSource(0, "this node has no VTEP address, so NodePort connections leave with its private address")
    vtep = ipaddress.IPv4Address(vtep_ip)
    if vtep.is_loopback or vtep.is_unspecified:
        return NodePortSource(
            0, f"this node's VTEP {vtep} is not reachable from other nodes (set --vtep-ip), so NodePort connections leave with its private address"
        )
    return NodePortSource(int(vtep))


def snat_sources(host_ports: Mapping[Encap, HostPort | None]) -> dict[str, str]:
    """Host port name → the address its NodePort connections are SNATed to, for the bridges whose
    source is not the private address (noderules.node_rules SNATs the others to that)."""
    return {
        HOST_PORT_NAMES[encap]: str(ipaddress.IPv4Address(host.nodeport_source))
        for encap, host in host_ports.items()
        if host is not None and host.nodeport_source
    }


def unserved_backends(inputs: NodeInputs, source: NodePortSource) -> list[str]:
    """One problem line per Service the node enters (a NodePort) with backends that cannot answer
    its NodePort connections: on another node when only local ones can, or on a network without
    a gateway."""
    entered = [s for s in inputs.services if s.entry_network is not None and s.live]
    if not entered:  # most syncs: nothing to look at
        return []
    gatewayless = {p.ip for p in inputs.local_ports if not p.network.gateway} | {r.ip for r in inputs.remote_endpoints if not r.network.gateway}
    remote = {ep.ip for ep in inputs.remote_endpoints}
    problems = []
    for service in entered:
        backends = {b.ip for port in service.ports for b in port.backends}
        name = service.service_id.removeprefix(KUBE_SERVICE_PREFIX)
        far = sorted(backends & remote) if source.local_only else []
        if far:
            problems.append(
                f"NodePort of service {name}: {_addresses(far)} on other nodes cannot answer this node's NodePort connections ({source.local_only})"
            )
        if without_gateway := sorted(backends & gatewayless - set(far)):
            problems.append(
                f"NodePort of service {name}: {_addresses(without_gateway)} on a network without a gateway cannot answer NodePort connections "
                "(they answer through their host1 link, outside the switch)"
            )
    return problems


def _addresses(ips: list[int]) -> str:
    shown = ", ".join(str(ipaddress.IPv4Address(ip)) for ip in ips[:3])
    return f"backend{'s' if len(ips) > 1 else ''} {shown}{f' and {len(ips) - 3} more' if len(ips) > 3 else ''}"

"""One Contiv bridge of this node (contivVxlanBridge or contivVlanBridge) kept equal to the store.

Contiv runs one bridge per encapsulation: VXLAN networks on contivVxlanBridge with a tunnel
port per peer VTEP, VLAN networks on contivVlanBridge with the node's uplinks. Each bridge is
its own OpenFlow switch (a fixed datapath id tells the controller which one connected) with
its own pusher, so a reconnect of one never disturbs the other.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openflow import desired
from openflow.inputs import Encap

from ..nodes import NodeInfo
from ..ovs import VLAN_BRIDGE, VXLAN_BRIDGE, BridgeSpec, OvsBridge, PortInfo, PortKind, PortSpec
from .inputs import node_inputs
from .push import Pusher

ENDPOINT_ID = "contivd-endpoint"  # external_ids key naming the endpoint a port belongs to
TUNNEL_PEER = "contivd-vtep"  # external_ids key naming the remote VTEP of a VXLAN port
UPLINK = "contivd-uplink"  # external_ids key marking a VLAN uplink port

BRIDGE_NAMES: dict[Encap, str] = {"vxlan": VXLAN_BRIDGE, "vlan": VLAN_BRIDGE}
# "contiv" in ASCII, then the bridge number: stable across restarts, distinct per bridge.
DATAPATH_IDS: dict[Encap, int] = {"vxlan": 0x636F6E7469760001, "vlan": 0x636F6E7469760002}


def bridge_spec(encap: Encap, datapath_type: str, controller: str) -> BridgeSpec:
    return BridgeSpec(BRIDGE_NAMES[encap], datapath_type, controller=controller, datapath_id=DATAPATH_IDS[encap])


def tunnel_port_name(vtep: str) -> str:
    """`vx<hex ip>`: unique per peer and within the 15 characters of an interface name."""
    return f"vx{int(ipaddress.IPv4Address(vtep)):08x}"


@dataclass(frozen=True)
class SyncResult:
    problems: tuple[str, ...]
    ports: int
    tunnels: int
    uplinks: int


class BridgeDatapath:
    """The desired state of one bridge: ports (tunnels, uplinks, policing) in OVSDB, flows over OpenFlow."""

    def __init__(self, encap: Encap, bridge: OvsBridge, uplinks: Sequence[str] = ()):
        self.encap = encap
        self.bridge = bridge
        self.uplink_names = tuple(uplinks)
        self.pusher = Pusher()
        self.last: SyncResult | None = None

    @property
    def datapath_id(self) -> int:
        return DATAPATH_IDS[self.encap]

    @property
    def connected(self) -> bool:
        return self.pusher.connection is not None and not self.pusher.connection.closed

    async def sync(self, node: str, states: Mapping[str, Any], nodes: Sequence[NodeInfo]) -> SyncResult | None:
        """One reconcile; None when no switch is connected to push to. Raises OvsError/OpenFlowError."""
        if not self.connected:
            return None
        listed = await self.bridge.list_ports()  # one OVSDB read per sync serves every kind of port
        tunnels: dict[str, int] = {}
        uplinks: list[int] = []
        if self.encap == "vxlan":
            peers = {n.vtep_ip for n in nodes if n.name != node and n.vtep_ip}
            tunnels = await self._ensure_tunnels(listed, peers)
        else:
            uplinks = await self._ensure_uplinks(listed)
        attached = {p.external_ids[ENDPOINT_ID]: p for p in listed if ENDPOINT_ID in p.external_ids and p.ofport > 0}
        built = node_inputs(
            node=node,
            encap=self.encap,
            states=states,
            ports={endpoint: port.ofport for endpoint, port in attached.items()},
            tunnels=tunnels,
            nodes=nodes,
            uplinks=uplinks,
            round=self.pusher.round,
        )
        await self.pusher.push(desired(built.inputs))
        for local in built.inputs.local_ports:  # netprofile bandwidth: OVSDB ingress policing
            port = attached[local.endpoint_id]
            if (port.ingress_policing_rate_kbps, port.ingress_policing_burst_kb) != (local.bandwidth_kbps, local.burst_kb):
                await self.bridge.set_ingress_policing(port.name, local.bandwidth_kbps, local.burst_kb)
        self.last = SyncResult(built.problems, len(built.inputs.local_ports), len(tunnels), len(uplinks))
        return self.last

    async def _ensure_tunnels(self, listed: list[PortInfo], vteps: set[str]) -> dict[str, int]:
        """One VXLAN port per peer VTEP; ports of departed peers are removed."""
        existing = {p.external_ids.get(TUNNEL_PEER): p for p in listed if p.kind is PortKind.VXLAN}
        for vtep, port in existing.items():
            if vtep not in vteps:
                await self.bridge.remove_port(port.name)
        found: dict[str, int] = {}
        for vtep in sorted(vteps):
            tunnel = existing.get(vtep)
            if tunnel is not None and tunnel.ofport > 0:
                found[vtep] = tunnel.ofport
            else:
                found[vtep] = await self.bridge.ensure_port(PortSpec.vxlan(tunnel_port_name(vtep), vtep, external_ids={TUNNEL_PEER: vtep}))
        return found

    async def _ensure_uplinks(self, listed: list[PortInfo]) -> list[int]:
        """The configured uplink interfaces are ports of the VLAN bridge; others marked as uplinks go."""
        existing = {p.name: p for p in listed if UPLINK in p.external_ids}
        for name in set(existing) - set(self.uplink_names):
            await self.bridge.remove_port(name)
        ofports = []
        for name in self.uplink_names:
            uplink = existing.get(name)
            if uplink is not None and uplink.ofport > 0:
                ofports.append(uplink.ofport)
            else:
                ofports.append(await self.bridge.ensure_port(PortSpec(name, PortKind.SYSTEM, external_ids={UPLINK: name})))
        return ofports

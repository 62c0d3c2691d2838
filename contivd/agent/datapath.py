"""One Contiv bridge of this node (contivVxlanBridge or contivVlanBridge) kept equal to the store.

Contiv runs one bridge per encapsulation: VXLAN networks on contivVxlanBridge with a tunnel
port per peer VTEP, VLAN networks on contivVlanBridge with the node's uplinks. Each bridge is
its own OpenFlow switch (a fixed datapath id tells the controller which one connected) with
its own pusher, so a reconnect of one never disturbs the other.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import trio
from pyroute2 import NetlinkError

from openflow import HostPort, NodeInputs
from openflow.inputs import Encap, Route, Router, mac

from ..ovs import VLAN_BRIDGE, VXLAN_BRIDGE, BridgeSpec, OvsBridge, PortInfo, PortKind, PortSpec
from ..state import StateSnapshot
from . import hostnet, nodeport, router
from .inputs import InputsBuilder, vtep_peers
from .push import Pusher

ENDPOINT_ID = "contivd-endpoint"  # external_ids key naming the endpoint a port belongs to
TUNNEL_PEER = "contivd-vtep"  # external_ids key naming the remote VTEP of a VXLAN port
UPLINK = "contivd-uplink"  # external_ids key marking a VLAN uplink port

log = logging.getLogger(__name__)
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
    full: bool


@dataclass(frozen=True)
class AttachedPort:
    """What the agent knows of an endpoint's port without asking OVSDB."""

    name: str
    ofport: int
    policing: tuple[int, int] = (0, 0)  # ingress rate kbit/s, burst kB as set in OVSDB


class BridgeDatapath:
    """The desired state of one bridge: ports (tunnels, uplinks, policing) in OVSDB, flows over OpenFlow.

    The endpoint ports on the bridge are known in memory (`ports`): filled from OVSDB by every
    full sync and kept up to date by `add_port`/`remove_ports`, so an incremental sync (one pod
    attached) reads nothing from OVSDB and converts, builds and sends only what changed.
    """

    def __init__(self, encap: Encap, bridge: OvsBridge, node: str, uplinks: Sequence[str] = (), routed: bool = False):
        self.encap = encap
        self.routed = routed and encap == "vlan"
        """Routing mode: the bridge routes through its router port (see router.py)."""
        self.bgp = router.BgpRouting()  # the speaker's router address and learned routes (Agent.set_bgp_routing)
        self._router: Router | None = None
        self._routes: tuple[Route, ...] = ()  # learned, with their next hops' MACs, as the last full sync resolved them
        self._router_problems: list[str] = []
        self.bridge = bridge
        self.uplink_names = tuple(uplinks)
        self.pusher = Pusher()
        self.builder = InputsBuilder(node, encap)
        self.node = node
        self.ports: dict[str, AttachedPort] | None = None  # None until a full sync listed the bridge
        self._port_changes = 0  # add_port/remove_ports calls: a listing taken across one is stale
        self._tunnels: dict[str, int] = {}
        self._uplinks: list[int] = []
        self._host_port: HostPort | None = None
        self._host_problem = ""
        self._nodeport = nodeport.NodePortSource(0)  # as the last full sync found the node's VTEP
        self._routed: tuple[dict[str, str], dict[str, str]] | None = None  # pods and VIPs routed through the host port, as last made
        self.last: SyncResult | None = None
        self.last_inputs: NodeInputs | None = None

    @property
    def datapath_id(self) -> int:
        return DATAPATH_IDS[self.encap]

    @property
    def host_port(self) -> HostPort | None:
        """The bridge's host port as the last full sync found it (None: none usable)."""
        return self._host_port

    @property
    def connected(self) -> bool:
        return self.pusher.connection is not None and not self.pusher.connection.closed

    async def add_port(self, ifname: str, endpoint_id: str) -> int:
        ofport = await self.bridge.ensure_port(PortSpec(ifname, PortKind.SYSTEM, external_ids={ENDPOINT_ID: endpoint_id}))
        self._port_changes += 1
        if self.ports is not None:
            self.ports[endpoint_id] = AttachedPort(ifname, ofport)
        return ofport

    async def remove_ports(self, endpoint_id: str) -> list[str]:
        """Remove the endpoint's ports (none is fine); returns their names."""
        known = self.ports.get(endpoint_id) if self.ports is not None else None
        if known is not None:
            names = [known.name]
        else:  # not listed yet (or added by an earlier run): ask OVSDB
            names = [p.name for p in await self.bridge.list_ports() if p.external_ids.get(ENDPOINT_ID) == endpoint_id]
        for name in names:
            await self.bridge.remove_port(name)
        self._port_changes += 1
        if self.ports is not None:
            self.ports.pop(endpoint_id, None)
        return names

    async def endpoint_ports(self) -> dict[str, PortInfo]:
        """The bridge's endpoint ports as OVSDB holds them, by endpoint id: also those whose
        interface is gone (ofport -1), which the flows leave out."""
        return {p.external_ids[ENDPOINT_ID]: p for p in await self.bridge.list_ports() if ENDPOINT_ID in p.external_ids}

    async def sync(self, snapshot: StateSnapshot, full: bool) -> SyncResult | None:
        """One reconcile; None when no switch is connected to push to. A full one re-reads the
        bridge's ports from OVSDB and sets up tunnels/uplinks first. Raises OvsError/OpenFlowError."""
        if not self.connected:
            return None
        full = full or self.ports is None
        if full:
            listed, changes = await self._list_ports()  # one OVSDB read serves every kind of port
            if self.encap == "vxlan":
                self._tunnels = await self._ensure_tunnels(listed, vtep_peers(snapshot.nodes, self.node))
            else:
                self._uplinks = await self._ensure_uplinks(listed)
            self._host_port = await self._ensure_host_port(listed, snapshot)
            if self.routed:
                self._router, self._routes = await self._ensure_router(listed)
            self._routed = None
            if changes != self._port_changes:
                # A pod came or went while the steps above awaited: the listing may lack its port
                # (or still hold it), and `ports` is what incremental syncs, and so the pod's
                # ADD or DEL, trust until the next full sync. No await from here to the assignment.
                log.debug("%s: a pod came or went during a full sync; its ports listed again", self.bridge.name)
                listed, _ = await self._list_ports()
            self.ports = {
                p.external_ids[ENDPOINT_ID]: AttachedPort(p.name, p.ofport, (p.ingress_policing_rate_kbps, p.ingress_policing_burst_kb))
                for p in listed
                if ENDPOINT_ID in p.external_ids and p.ofport > 0
            }
        assert self.ports is not None
        ports = dict(self.ports)  # pods attach and detach while this sync awaits the switch
        built = self.builder.build(
            snapshot,
            {endpoint: port.ofport for endpoint, port in ports.items()},
            self._tunnels,
            () if self.routed else self._uplinks,  # routing mode bridges nothing to the uplink, with or without a Bgp object
            self.pusher.round,
            self._host_port,
            self._router,
            self._routes,
        )
        await self.pusher.push(built.inputs)
        self.last_inputs = built.inputs
        await self._route_pods(built.inputs)
        for local in built.inputs.local_ports:  # netprofile bandwidth: OVSDB ingress policing
            port = ports[local.endpoint_id]
            wanted = (local.bandwidth_kbps, local.burst_kb)
            if port.policing != wanted:
                await self.bridge.set_ingress_policing(port.name, *wanted)
                if self.ports.get(local.endpoint_id) == port:
                    self.ports[local.endpoint_id] = AttachedPort(port.name, port.ofport, wanted)
        problems = (*built.problems, self._host_problem) if self._host_problem else built.problems
        if self._host_port is not None:
            problems += tuple(nodeport.unserved_backends(built.inputs, self._nodeport))
        problems += tuple(self._router_problems)
        self.last = SyncResult(problems, len(built.inputs.local_ports), len(self._tunnels), len(self._uplinks), full)
        return self.last

    async def _list_ports(self) -> tuple[list[PortInfo], int]:
        """The bridge's ports as OVSDB lists them, read again until no `add_port`/`remove_ports`
        overlapped the read; with the count of those calls the listing is current for."""
        while True:
            changes = self._port_changes
            listed = await self.bridge.list_ports()
            if changes == self._port_changes:
                return listed, changes

    async def _ensure_host_port(self, listed: list[PortInfo], snapshot: StateSnapshot) -> HostPort | None:
        """The bridge's internal port into the node and the node's private address; None (and a
        problem line) while either cannot be had: pods still work, the node just cannot reach them."""
        name = hostnet.HOST_PORT_NAMES[self.encap]
        try:
            address = hostnet.node_address(hostnet.private_subnet(snapshot.private_subnet()))
            await trio.to_thread.run_sync(hostnet.ensure_node_address, str(address))
            port = next((p for p in listed if p.name == name and p.ofport > 0), None)
            ofport = (
                port.ofport
                if port is not None
                else await self.bridge.ensure_port(PortSpec(name, PortKind.INTERNAL, external_ids={hostnet.HOST_PORT_OWNER: self.encap}))
            )
            port_mac = await trio.to_thread.run_sync(hostnet.host_port_mac, name)
        except (hostnet.HostAccessError, NetlinkError, OSError) as exc:
            self._host_problem = f"host port {name}: {exc}"
            return None
        if port_mac is None:
            self._host_problem = f"host port {name}: OVS has not created its interface yet"
            return None
        self._host_problem = ""
        own = snapshot.nodes.get(self.node)
        source = nodeport.nodeport_source(self.encap, own.vtep_ip if own is not None else "")
        if source != self._nodeport:
            if source.local_only:
                log.info("%s: only backends on this node answer NodePort connections: %s", self.bridge.name, source.local_only)
            else:
                log.info("%s: NodePort connections leave with the node's VTEP %s", self.bridge.name, ipaddress.IPv4Address(source.address))
            self._nodeport = source
        return HostPort(ofport, mac(port_mac, f"host port {name}"), int(address), source.address)

    async def _ensure_router(self, listed: list[PortInfo]) -> tuple[Router | None, tuple[Route, ...]]:
        """Routing mode's router port with the node's router IP, and the learned routes whose next
        hop's MAC the kernel knows; None (and a problem line) until the node has a Bgp object."""
        bgp, name = self.bgp, router.ROUTER_PORT_NAME
        port = next((p for p in listed if p.name == name and p.ofport > 0), None)
        if bgp.router_ip is None or not self._uplinks:
            self._router_problems = [
                f"routing mode: {'no Bgp object names this node' if bgp.router_ip is None else 'no uplink'}; nothing is routed yet"
            ]
            if port is not None:  # a Bgp object deleted: its router IP leaves the port
                await trio.to_thread.run_sync(router.ensure_router_address, name, None)
            return None, ()
        ofport = (
            port.ofport
            if port is not None
            else await self.bridge.ensure_port(PortSpec(name, PortKind.INTERNAL, external_ids={router.ROUTER_PORT_OWNER: self.encap}))
        )
        try:
            port_mac = await trio.to_thread.run_sync(router.ensure_router_address, name, bgp.router_ip)
            neighbours = await trio.to_thread.run_sync(router.neighbour_macs, name)
        except (NetlinkError, OSError) as exc:
            self._router_problems = [f"router port {name}: {exc}"]
            return None, ()
        if port_mac is None:
            self._router_problems = [f"router port {name}: OVS has not created its interface yet"]
            return None, ()
        routes, self._router_problems, unresolved = router.learned_routes(bgp.learned, neighbours)
        if unresolved:
            await trio.to_thread.run_sync(router.probe, name, sorted(unresolved))
        return Router(ofport, mac(port_mac, f"router port {name}"), int(bgp.router_ip.ip), min(self._uplinks)), routes

    async def _route_pods(self, inputs: NodeInputs) -> None:
        """The node's routes to its pods (and entered VIPs) through the host port, when they changed."""
        if self._host_port is None:
            return
        pods, vips = hostnet.routed_pods(inputs.ports()), hostnet.entered_vips(inputs.services)
        wanted = (pods, vips)
        if wanted != self._routed:
            source = str(ipaddress.IPv4Address(self._host_port.address))
            try:
                added, removed = await trio.to_thread.run_sync(hostnet.sync_pod_routes, hostnet.HOST_PORT_NAMES[self.encap], pods, source, vips)
            except (NetlinkError, OSError) as exc:  # the next full sync tries again
                self._host_problem = f"routes through {hostnet.HOST_PORT_NAMES[self.encap]}: {exc}"
                return
            if added or removed:
                log.debug("%s: %d pod routes added, %d removed through the host port", self.bridge.name, added, removed)
            self._routed = wanted

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

"""Frozen inputs of the flow builders, and the value checks (`ipv4`, `mac`, `bandwidth_kbps`,
`TCP_FLAGS`) that raise :class:`InputError` naming the object when a value is unusable.

openflow knows no store format: the daemon's adapter (contivd.agent.inputs) builds these
from its typed state records and the switch's port numbers. Nothing here talks to the store
or OVS.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

Encap = Literal["vxlan", "vlan"]


class InputError(ValueError):
    """Store state the agent cannot turn into flows; the message names the object."""


def ipv4(text: str, what: str) -> int:
    try:
        return int(ipaddress.IPv4Address(text))
    except ValueError:
        raise InputError(f"{what}: {text!r} is not an IPv4 address") from None


def mac(text: str, what: str) -> int:
    if not re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}", text or ""):
        raise InputError(f"{what}: {text!r} is not a MAC address")
    return int(text.replace(":", ""), 16)


def vip_mac(ip: int) -> int:
    """Contiv's MAC for a service VIP: ``02:02:<ip>`` (ofnetSvcProxy.go); the bridge answers
    for a network's gateway address the same way."""
    return (0x0202 << 32) | ip


@dataclass(frozen=True, order=True)
class NetworkRef:
    """The part of a network state the datapath needs."""

    net_id: str
    encap: Encap
    vlan: int
    """pktTag: the VLAN id (vlan networks) or the node-local VLAN (vxlan networks)."""
    vni: int
    """extPktTag: the VXLAN VNI (0 for vlan networks)."""
    gateway: int = 0
    """IPv4 of the network's gateway (0: none); the bridge answers ARP for it."""

    @property
    def tag(self) -> int:
        """The network's id in metadata NETWORK: VNI on a vxlan bridge, VLAN id on a vlan bridge."""
        return self.vni if self.encap == "vxlan" else self.vlan


_RATE = re.compile(r"^\s*(\d+)\s*([kmg])(?:bps|b)?\s*$", re.IGNORECASE)
_RATE_KBPS = {"k": 1, "m": 1000, "g": 1000_000}


def bandwidth_kbps(text: str, what: str) -> int:
    """Netprofile bandwidth (``10Mbps``, ``500kbps``, ``1g``) in kbit/s; '' means unlimited (0)."""
    if not text:
        return 0
    found = _RATE.match(text)
    if found is None:
        raise InputError(f"{what}: bandwidth {text!r} is not <number><k|m|g>bps")
    return int(found.group(1)) * _RATE_KBPS[found.group(2).lower()]


@dataclass(frozen=True, order=True)
class LocalPort:
    """An endpoint attached to this node's bridge.

    ``bandwidth_kbps``/``burst_kb`` are applied as OVSDB Interface
    ingress_policing_rate/burst by the OVS layer, not by flows (policing
    works on the userspace datapath and needs no meter support).
    """

    ofport: int
    endpoint_id: str
    ip: int
    mac: int
    network: NetworkRef
    epg: int = 0
    dscp: int = 0
    bandwidth_kbps: int = 0
    burst_kb: int = 0


@dataclass(frozen=True, order=True)
class RemoteEndpoint:
    """An endpoint homed on another node, reached through ``vtep`` (vxlan) or the VLAN uplink."""

    endpoint_id: str
    ip: int
    mac: int
    network: NetworkRef
    epg: int = 0
    vtep: int = 0
    """IPv4 of the remote node's VTEP (0 on vlan networks)."""


@dataclass(frozen=True, order=True)
class TunnelPort:
    """A VXLAN port (options:key=flow) towards a peer VTEP."""

    ofport: int
    remote_ip: int


TCP_FLAGS = {  # Contiv's TcpFlags strings -> (value, mask) (ofnetPolicy.go)
    "": None,
    "syn": (0x02, 0x02),
    "ack": (0x10, 0x10),
    "syn,ack": (0x12, 0x12),
    "syn,!ack": (0x02, 0x12),
    "!syn,ack": (0x10, 0x12),
}


@dataclass(frozen=True, order=True)
class PolicyRuleSpec:
    """One ofnet policy rule (``/contiv.io/state/policyRule/<RuleId>``)."""

    rule_id: str
    priority: int
    action: Literal["allow", "deny"]
    src_epg: int = 0
    dst_epg: int = 0
    src_ip: tuple[int, int] | None = None
    dst_ip: tuple[int, int] | None = None
    proto: int = 0
    src_port: int = 0
    dst_port: int = 0
    tcp_flags: tuple[int, int] | None = None


NetpolDirection = Literal["ingress", "egress"]


@dataclass(frozen=True)
class NetpolRule:
    """One compiled Kubernetes NetworkPolicy rule (contivd.model.netpolicy makes them).

    In the ``direction`` table (np_ingress / np_egress), a packet whose pod end (destination for
    ingress, source for egress) is ``pod_ip`` and whose other end is in ``peer`` (None: any),
    with ``proto`` (0: any) and a destination port in ``ports`` (None: any), gets ``action``.
    ``rule_id`` names the policy rule (``<ns>/<policy>/<direction>/<i>``) or the pod's isolation
    (``<ns>/<pod>/<direction>/isolation``); flows carry it in their cookie, so hit counters are
    per rule_id."""

    direction: NetpolDirection
    priority: int
    pod_ip: int
    peer: tuple[int, int] | None
    """(address, prefix length)."""
    proto: int
    ports: tuple[int, int] | None
    """Destination port range, both ends included."""
    action: Literal["allow", "drop"]
    rule_id: str

    def matches(self, src: int, dst: int, proto: int, dport: int) -> bool:
        """Whether the rule's flows match a packet src -> dst (the model's twin of the flows)."""
        here, there = (dst, src) if self.direction == "ingress" else (src, dst)
        if here != self.pod_ip:
            return False
        if self.peer is not None:
            mask = ((1 << self.peer[1]) - 1) << (32 - self.peer[1])
            if there & mask != self.peer[0] & mask:
                return False
        if self.proto and proto != self.proto:
            return False
        return self.ports is None or self.ports[0] <= dport <= self.ports[1]

    def order(self) -> tuple[str, int, int, tuple[int, int], int, tuple[int, int], str, str]:
        """A sort key (None peers and ports first; the fields themselves do not compare)."""
        return (self.direction, self.priority, self.pod_ip, self.peer or (-1, -1), self.proto, self.ports or (-1, -1), self.action, self.rule_id)


@dataclass(frozen=True)
class NetpolPod:
    """The NetworkPolicy rules whose pod end is one pod (``<namespace>/<name>``): one owner of flows."""

    pod: str
    rules: tuple[NetpolRule, ...]


@dataclass(frozen=True, order=True)
class Backend:
    """Where one service port sends a connection: a provider's IP and the port it listens on."""

    ip: int
    port: int


@dataclass(frozen=True, order=True)
class ServicePort:
    """One port of a service and its own backends: a named targetPort resolves per endpoint,
    so the backends of one service's ports may differ in address and port (sorted, unique)."""

    proto: int
    port: int
    backends: tuple[Backend, ...]


MAX_AFFINITY_SECONDS = 0xFFFF
"""A learned flow's idle_timeout is 16 bits: longer sessionAffinity timeouts are cut to this."""


@dataclass(frozen=True, order=True)
class ServiceSpec:
    """A load-balanced VIP: a Contiv serviceLB or a Kubernetes ClusterIP Service.

    ``affinity_timeout`` > 0 is sessionAffinity ClientIP: a client keeps its backend per port
    while it opens a new connection at least every that many seconds."""

    service_id: str
    vip: int
    ports: tuple[ServicePort, ...]
    affinity_timeout: int = 0
    entry_network: NetworkRef | None = None
    """Where the node's own packets to the VIP (its own connections to a ClusterIP, a NodePort
    or external address the node DNATed to it) enter from the bridge's host port: the backends' network. None: they do not enter."""

    @property
    def live(self) -> bool:
        """Some port has a backend (ofnet: a serviceLB without providers is not operational)."""
        return any(port.backends for port in self.ports)


@dataclass(frozen=True, order=True)
class HostPort:
    """The bridge's internal port into the node's own network stack (host access).

    The node routes its local pods' addresses through it (with static neighbour entries, so no
    ARP crosses it); pods on networks with a gateway reach ``address`` (the node's private
    address) through their gateway and the switch hands such packets to this port."""

    ofport: int
    mac: int
    address: int
    nodeport_source: int = 0
    """The address the node SNATs its NodePort connections to, unique per node so that a
    backend on another node answers through the tunnel to this node: the node's VTEP (vxlan
    bridges; every bridge sends a gateway network's packets for a peer's VTEP to that peer).
    0: none, the shared private address, so only local backends answer (vlan bridges, and a VTEP
    other nodes cannot reach, such as loopback: the kernel drops a packet for 127.0.0.1 arriving
    on the host port; contivd.agent.nodeport decides)."""


ANYCAST_MAC = 0x000011111111
"""Contiv's vlrouter MAC: in routing mode the switch answers pods' ARP for their gateway (and
for other nodes' endpoints) with it, and delivers routed packets to local pods from it."""


@dataclass(frozen=True, order=True)
class Route:
    """A route the node learned over BGP: ``prefix/length`` through the next hop whose MAC the
    node resolved (the ToR's address on the router port's link)."""

    prefix: int
    length: int
    next_hop_mac: int

    @property
    def mask(self) -> int:
        return (0xFFFFFFFF << (32 - self.length)) & 0xFFFFFFFF

    @property
    def key(self) -> str:
        """``a.b.c.d/len`` of the network (host bits cleared): the route's owner id."""
        return f"{ipaddress.IPv4Address(self.prefix & self.mask)}/{self.length}"


@dataclass(frozen=True)
class Router:
    """Routing mode (Contiv's vlrouter) on a VLAN bridge: the node routes its pods' traffic.

    ``ofport`` is the bridge's internal router port carrying the node's router IP (``address``,
    the Bgp object's routerip, as Contiv's inb01 did): the ToR peers with it and sends the
    routed traffic for the node's pods to its ``mac``. ``uplink`` is the ofport of the link to
    the ToR, which then carries untagged routed traffic only (no VLAN is bridged to it).
    The learned routes are NodeInputs.routes (each its own owner, so a route change is cheap).
    """

    ofport: int
    mac: int
    address: int
    uplink: int


@dataclass(frozen=True)
class Fabric:
    """The bridge-wide part of NodeInputs that networks' and remote endpoints' flows depend on.

    A change here (encapsulation, tunnel ports, uplinks, cookie round) touches flows of every
    network, so the incremental engine rebuilds everything when it changes.
    """

    encap: Encap
    tunnels: tuple[TunnelPort, ...] = ()
    uplinks: tuple[int, ...] = ()
    round: int = 0
    host_port: HostPort | None = None
    router: Router | None = None
    """Routing mode: the router port and the uplink (the learned routes are not bridge-wide)."""

    @property
    def routed(self) -> bool:
        """Routing mode: the node routes (a VLAN bridge with a router), it does not bridge to other nodes."""
        return self.router is not None and self.encap == "vlan"

    def gateway_mac(self, net: NetworkRef) -> int:
        """The MAC the switch answers for ``net``'s gateway: the anycast MAC when routing, else ``02:02:<gateway ip>``."""
        return ANYCAST_MAC if self.routed else vip_mac(net.gateway)

    @cached_property
    def _tunnel_by_vtep(self) -> dict[int, TunnelPort]:
        return {t.remote_ip: t for t in sorted(self.tunnels, reverse=True)}  # the lowest port wins

    def tunnel_to(self, vtep: int) -> TunnelPort | None:
        """The tunnel port towards ``vtep``; None until that port exists (flows wait for it)."""
        return self._tunnel_by_vtep.get(vtep)


@dataclass(frozen=True)
class NodeInputs:
    """Everything one bridge's flows depend on.  ``round`` goes into every cookie."""

    encap: Encap
    local_ports: tuple[LocalPort, ...] = ()
    remote_endpoints: tuple[RemoteEndpoint, ...] = ()
    tunnels: tuple[TunnelPort, ...] = ()
    uplinks: tuple[int, ...] = ()
    """ofports of VLAN uplinks; the lowest is the active one (bonding belongs to OVS)."""
    rules: tuple[PolicyRuleSpec, ...] = ()
    services: tuple[ServiceSpec, ...] = ()
    round: int = 0
    host_port: HostPort | None = None
    router: Router | None = None
    """Set in routing mode (VLAN bridge only): see :class:`Router`."""
    routes: tuple[Route, ...] = ()
    """Routes learned over BGP, one per prefix (installed in routing mode only)."""
    netpol: tuple[NetpolPod, ...] = ()
    """Kubernetes NetworkPolicy rules, per pod."""

    @cached_property
    def fabric(self) -> Fabric:
        return Fabric(self.encap, self.tunnels, self.uplinks, self.round, self.host_port, self.router)

    def ports(self) -> tuple[LocalPort, ...]:
        """Local ports on this bridge (networks of its encap), sorted."""
        return tuple(sorted(p for p in self.local_ports if p.network.encap == self.encap))

    def remotes(self) -> tuple[RemoteEndpoint, ...]:
        """Remote endpoints on networks of this bridge's encap, sorted."""
        return tuple(sorted(r for r in self.remote_endpoints if r.network.encap == self.encap))

    def known(self) -> tuple[LocalPort | RemoteEndpoint, ...]:
        """Every endpoint the bridge resolves IPs of (proxy ARP, destination EPG): local then remote."""
        return (*self.ports(), *self.remotes())

    def networks(self) -> tuple[NetworkRef, ...]:
        """Networks of this bridge's encap with at least one local port, sorted."""
        return tuple(sorted({p.network for p in self.ports()}))

"""Frozen inputs of the flow builders, each with a pure ``from_state`` constructor.

The ``from_state`` constructors read the JSON the netmaster writes under
``/contiv.io/state/...`` (see contivd.netmaster: endpoints.py, ipam.py,
effects.py, services.py) and raise :class:`InputError` naming the object when
a value is unusable.  Nothing here talks to the store or OVS: the caller
fetches the states and the OpenFlow port numbers and passes them in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from openflow.flow import IP_TCP, IP_UDP

State = Mapping[str, Any]
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

    @classmethod
    def from_state(cls, net: State) -> NetworkRef:
        net_id = str(net.get("id", "?"))
        encap = net.get("pktTagType")
        if encap not in ("vxlan", "vlan"):
            raise InputError(f"network {net_id}: pktTagType {encap!r} is not vxlan/vlan")
        vlan, vni = int(net.get("pktTag", 0)), int(net.get("extPktTag", 0))
        if not 1 <= vlan <= 4094 or (encap == "vxlan" and not 1 <= vni < 1 << 24):
            raise InputError(f"network {net_id}: pktTag {vlan} / extPktTag {vni} out of range")
        gateway = str(net.get("gateway", "") or "")
        return cls(net_id, encap, vlan, vni, ipv4(gateway, f"network {net_id} gateway") if gateway else 0)


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

    @classmethod
    def from_state(cls, ep: State, net: State, epg: State | None, ofport: int) -> LocalPort:
        what = f"endpoint {ep.get('id', '?')}"
        if not 1 <= ofport < 0xFFFFFF00:
            raise InputError(f"{what}: ofport {ofport} is not a usable port number")
        epg_id = int(ep.get("endpointGroupId", 0))
        dscp = int((epg or {}).get("DSCP", 0))
        if not 0 <= dscp < 64:
            raise InputError(f"{what}: DSCP {dscp} is not 0..63")
        return cls(
            ofport,
            str(ep["id"]),
            ipv4(ep.get("ipAddress", ""), what),
            mac(ep.get("macAddress", ""), what),
            NetworkRef.from_state(net),
            epg_id,
            dscp,
            bandwidth_kbps(str((epg or {}).get("Bandwidth", "")), what),
            int((epg or {}).get("Burst", 0)),
        )


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

    @classmethod
    def from_state(cls, ep: State, net: State, vtep_ip: str = "") -> RemoteEndpoint:
        what = f"endpoint {ep.get('id', '?')}"
        network = NetworkRef.from_state(net)
        if network.encap == "vxlan" and not vtep_ip:
            raise InputError(f"{what}: a vxlan endpoint needs its node's VTEP IP")
        return cls(
            str(ep["id"]),
            ipv4(ep.get("ipAddress", ""), what),
            mac(ep.get("macAddress", ""), what),
            network,
            int(ep.get("endpointGroupId", 0)),
            ipv4(vtep_ip, what) if vtep_ip else 0,
        )


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


def _prefix(text: str, what: str) -> tuple[int, int] | None:
    """``a.b.c.d[/len]`` -> (network, prefix length); '' -> None."""
    if not text:
        return None
    try:
        net = ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        raise InputError(f"{what}: {text!r} is not an IPv4 address or prefix") from None
    return int(net.network_address), net.prefixlen


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

    @classmethod
    def from_state(cls, rule: State) -> PolicyRuleSpec:
        what = f"policy rule {rule.get('RuleId', '?')}"
        action = rule.get("Action")
        if action not in ("allow", "deny"):
            raise InputError(f"{what}: Action {action!r} is not allow/deny")
        priority = int(rule.get("Priority", 0))
        if not 0 <= priority <= 0xFFFF - 10:
            raise InputError(f"{what}: Priority {priority} out of range")
        proto = int(rule.get("IpProtocol", 0))
        flags_text = str(rule.get("TcpFlags", "") or "")
        if flags_text not in TCP_FLAGS:
            raise InputError(f"{what}: TcpFlags {flags_text!r} is not one of {sorted(TCP_FLAGS)}")
        ports = proto in (IP_TCP, IP_UDP)  # ofnet ignores ports of other protocols
        return cls(
            str(rule["RuleId"]),
            priority,
            action,
            int(rule.get("SrcEndpointGroup", 0)),
            int(rule.get("DstEndpointGroup", 0)),
            _prefix(str(rule.get("SrcIpAddr", "") or ""), what),
            _prefix(str(rule.get("DstIpAddr", "") or ""), what),
            proto,
            int(rule.get("SrcPort", 0)) if ports else 0,
            int(rule.get("DstPort", 0)) if ports else 0,
            TCP_FLAGS[flags_text] if proto == IP_TCP else None,
        )


@dataclass(frozen=True, order=True)
class ServicePort:
    proto: int
    port: int
    target_port: int


@dataclass(frozen=True, order=True)
class ServiceSpec:
    """A serviceLB with a VIP and at least one provider (ofnet: not operational otherwise)."""

    service_id: str
    vip: int
    ports: tuple[ServicePort, ...]
    providers: tuple[int, ...] = field(default=())

    @classmethod
    def from_state(cls, lb: State, provider: State | None = None) -> ServiceSpec:
        """From the serviceLB state; providers from the provider state when given (they agree)."""
        what = f"service {lb.get('id', '?')}"
        ports = []
        for text in lb.get("ports") or []:
            parts = str(text).split(":")
            if len(parts) != 3 or parts[2].upper() not in ("TCP", "UDP") or not (parts[0].isdigit() and parts[1].isdigit()):
                raise InputError(f"{what}: port {text!r} is not Port:TargetPort:TCP|UDP")
            proto = IP_TCP if parts[2].upper() == "TCP" else IP_UDP
            ports.append(ServicePort(proto, int(parts[0]), int(parts[1])))
        if provider is not None:
            ips = list(provider.get("Providers") or [])
        else:
            ips = [p["IPAddress"] for p in (lb.get("providers") or {}).values()]
        return cls(
            str(lb["id"]),
            ipv4(str(lb.get("ipaddress", "")), what),
            tuple(sorted(set(ports))),
            tuple(sorted({ipv4(ip, what) for ip in ips})),
        )


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

    @cached_property
    def fabric(self) -> Fabric:
        return Fabric(self.encap, self.tunnels, self.uplinks, self.round)

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

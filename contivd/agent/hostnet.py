"""The node's side of host access: its private address, and routes to its local pods through each bridge's host port.

Every bridge has an internal port (`cvhost-vxlan`, `cvhost-vlan`) into the node's own network
stack. The node routes each local pod on a network with a gateway through it (a /32 with the
node's private address as source, and a permanent neighbour entry with the pod's MAC, so no
ARP crosses the port); the pod answers through its gateway and the switch hands packets for
the node's private address to the port (openflow HostPort). Pods on networks without a
gateway are reached through their own host-access veth instead (the CNI server's hostlink.py),
so they get no route here. The ClusterIPs of Services with a NodePort whose backends are on
the bridge are routed the same way (with the VIP's MAC): the node's NodePort DNAT sends them
into the switch, which load-balances them. The private address itself sits once on `lo` (label
`lo:contivpvt`): a pod's ARP for it is answered on any interface (Linux's arp_ignore=0), and
no pod's veth has to carry it.

Pure decisions first, then blocking netlink functions (callers use `trio.to_thread.run_sync`).
Not responsible for: the port in OVSDB and its flows (datapath.py, openflow), the pods' veths.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Iterable, Mapping

from pyroute2 import IPRoute, NetlinkError

from openflow import LocalPort, ServiceSpec
from openflow.inputs import Encap, vip_mac

DEFAULT_PVT_SUBNET = "172.19.0.0/16"  # Contiv's default, used while the global object is absent
NODE_ADDRESS_LABEL = "lo:contivpvt"
NUD_PERMANENT = 0x80  # a neighbour entry's state: static
HOST_PORT_NAMES: dict[Encap, str] = {"vxlan": "cvhost-vxlan", "vlan": "cvhost-vlan"}
HOST_PORT_OWNER = "contivd-host-port"  # external_ids key marking a bridge's host port
SERVICE_REALM = 0xC5
"""The routing realm of the routes that carry the node's packets to service VIPs into a host port:
what tells them apart from its packets to pods in contivd.agent.noderules (`-m realm`), with
one rule whatever the number of Services."""


class HostAccessError(Exception):
    """Host access cannot be given as configured (a bad or overlapping subnet)."""


def private_subnet(text: str | None) -> ipaddress.IPv4Network:
    """The global pvtSubnet (Contiv's default when unset); HostAccessError when it is not a subnet
    with room for a node address and at least one pod."""
    value = text or DEFAULT_PVT_SUBNET
    try:
        subnet = ipaddress.IPv4Network(value)
    except ValueError:
        raise HostAccessError(f"global pvtSubnet {value!r} is not an IPv4 subnet (e.g. {DEFAULT_PVT_SUBNET})") from None
    if subnet.prefixlen > 29:
        raise HostAccessError(f"global pvtSubnet {subnet} is too small for host access (at most /29)")
    return subnet


def node_address(subnet: ipaddress.IPv4Network) -> ipaddress.IPv4Address:
    """The node's private address: the subnet's last host (`<a>.<b>.255.254` in a /16, Contiv's)."""
    return subnet.broadcast_address - 1


def _mac_text(value: int) -> str:
    return ":".join(f"{(value >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def routed_pods(ports: Iterable[LocalPort]) -> dict[str, str]:
    """Pod address → MAC of the local ports the node routes through the host port: those on
    networks with a gateway (the others have their own veth to the node)."""
    return {str(ipaddress.IPv4Address(p.ip)): _mac_text(p.mac) for p in ports if p.network.gateway}


def entered_vips(services: Iterable[ServiceSpec]) -> dict[str, str]:
    """VIP → VIP MAC of the services the node enters through the host port: its own connections
    to a ClusterIP, and NodePorts and external addresses it DNATs to the ClusterIP (see
    contivd.agent.noderules), routed here like a pod address, in SERVICE_REALM."""
    return {str(ipaddress.IPv4Address(s.vip)): _mac_text(vip_mac(s.vip)) for s in services if s.entry_network is not None and s.live}


# ---- blocking netlink ------------------------------------------------------------------------


def ensure_node_address(address: str) -> None:
    """The node's private address /32 on `lo` under NODE_ADDRESS_LABEL; idempotent. A different
    private address under that label (the global pvtSubnet changed) is replaced."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname="lo")[0]
        present = {str(a.get_attr("IFA_ADDRESS")) for a in ipr.get_addr(index=index, family=socket.AF_INET, label=NODE_ADDRESS_LABEL)}
        for stale in present - {address}:
            ipr.addr("del", index=index, address=stale, prefixlen=32)
        if address not in present:
            try:
                ipr.addr("add", index=index, address=address, prefixlen=32, label=NODE_ADDRESS_LABEL)
            except NetlinkError as exc:
                if exc.code != errno.EEXIST:  # added meanwhile (a CNI ADD)
                    raise


def remove_node_address() -> bool:
    """Remove the node's private address (uninstall); False if there was none."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname="lo")[0]
        present = [str(a.get_attr("IFA_ADDRESS")) for a in ipr.get_addr(index=index, family=socket.AF_INET, label=NODE_ADDRESS_LABEL)]
        for address in present:
            ipr.addr("del", index=index, address=address, prefixlen=32)
        return bool(present)


def host_port_mac(ifname: str) -> str | None:
    """The MAC of the host port's interface, up; None while OVS has not created it yet."""
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return None
        ipr.link("set", index=found[0], state="up")
        return str(ipr.get_links(found[0])[0].get_attr("IFLA_ADDRESS"))


def sync_pod_routes(ifname: str, pods: Mapping[str, str], source: str, vips: Mapping[str, str] | None = None) -> tuple[int, int]:
    """Make the /32 routes (and permanent neighbour entries) through `ifname` exactly `pods` and
    `vips` (address → MAC; the VIPs' routes in SERVICE_REALM); returns (added, removed). Only
    missing or different routes and neighbour entries are written: with a route per Service,
    a change of one must not rewrite a thousand."""
    realms = dict.fromkeys(pods, 0) | dict.fromkeys(vips or {}, SERVICE_REALM)
    macs = {**pods, **(vips or {})}
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return 0, 0
        index = found[0]
        present = {
            str(r.get_attr("RTA_DST")): r.get_attr("RTA_FLOW") or 0
            for r in ipr.get_routes(family=socket.AF_INET, table=254)
            if r.get_attr("RTA_OIF") == index and r["dst_len"] == 32 and r.get_attr("RTA_DST")
        }
        neighbours = {
            str(n.get_attr("NDA_DST")): str(n.get_attr("NDA_LLADDR"))
            for n in ipr.get_neighbours(ifindex=index, family=socket.AF_INET)
            if n["state"] == NUD_PERMANENT
        }
        for gone in present.keys() - macs.keys():
            ipr.route("del", dst=f"{gone}/32", oif=index, table=254, scope="link", proto="boot")
            try:
                ipr.neigh("del", dst=gone, ifindex=index)
            except NetlinkError as exc:
                if exc.code != errno.ENOENT:
                    raise
        added = 0
        for address, lladdr in macs.items():
            if neighbours.get(address) != lladdr:
                ipr.neigh("replace", dst=address, lladdr=lladdr, ifindex=index, state="permanent")
            if present.get(address) != realms[address]:
                ipr.route("replace", dst=f"{address}/32", oif=index, prefsrc=source, table=254, scope="link", proto="boot", flow=realms[address])
                added += address not in present
        return added, len(present.keys() - macs.keys())

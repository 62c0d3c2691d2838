"""Routing mode's kernel side: the router port carrying the node's router IP, and next hops' MACs.

In routing mode (``--fwd-mode routing``, docs/bgp.md) the VLAN bridge has an internal port,
``cvrouter`` (Contiv's inb01), holding the router IP of the node's ``Bgp`` object: the node's
kernel answers the top-of-rack router's ARP and runs the BGP session (ExaBGP) from it, and the
ToR sends the routed traffic for the node's pods to its MAC. The switch sends a pod's packet for
a learned prefix to the route's next hop, whose MAC is read from the kernel's neighbour table
on that port: the next hop is the BGP neighbour (the ToR), which the session itself resolved.
A next hop not in the table gets a probe (one UDP datagram to its discard port makes the kernel
ARP for it) and its routes wait for the next full sync (every few seconds).

Pure decisions first, then blocking netlink and socket functions (callers use
`trio.to_thread.run_sync`). Not responsible for the flows (openflow.flows.routing).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyroute2 import IPRoute

from openflow.inputs import Route, mac

ROUTER_PORT_NAME = "cvrouter"
ROUTER_PORT_OWNER = "contivd-router-port"  # external_ids key marking the router port
_USABLE_NEIGHBOUR = 0x02 | 0x04 | 0x08 | 0x10 | 0x80  # NUD_REACHABLE, STALE, DELAY, PROBE, PERMANENT
DISCARD_PORT = 9


@dataclass(frozen=True)
class BgpRouting:
    """What the node's BGP speaker tells the agent: its router address (None: no usable `Bgp`
    object) and the routes it learned (prefix → next hop)."""

    router_ip: ipaddress.IPv4Interface | None = None
    learned: Mapping[str, str] = field(default_factory=dict)


def learned_routes(learned: Mapping[str, str], neighbours: Mapping[str, str]) -> tuple[tuple[Route, ...], list[str], set[str]]:
    """Routes for the switch from the learned ones and the neighbour table (address → MAC):
    (routes, problems, next hops to probe). IPv6 and unreadable routes are problems."""
    routes: dict[str, Route] = {}  # by network: one route per prefix, whatever its spelling
    problems: list[str] = []
    unresolved: set[str] = set()
    for prefix, hop in sorted(learned.items()):
        try:
            network = ipaddress.IPv4Network(prefix, strict=False)
            ipaddress.IPv4Address(hop)
        except ValueError:
            problems.append(f"learned route {prefix} via {hop}: not an IPv4 route; not installed")
            continue
        hop_mac = neighbours.get(hop)
        if hop_mac is None:
            unresolved.add(hop)
            problems.append(f"learned route {prefix} via {hop}: the next hop's MAC is not known yet (ARP sent); not installed")
            continue
        route = Route(int(network.network_address), network.prefixlen, mac(hop_mac, f"next hop {hop}"))
        routes.setdefault(route.key, route)
    return tuple(routes.values()), problems, unresolved


# ---- blocking netlink and sockets ------------------------------------------------------------


def ensure_router_address(ifname: str, router_ip: ipaddress.IPv4Interface | None) -> str | None:
    """The router port up with exactly `router_ip` on it (None: no address); its MAC (None while OVS has not made it)."""
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return None
        index = found[0]
        ipr.link("set", index=index, state="up")
        present = {(str(a.get_attr("IFA_ADDRESS")), a["prefixlen"]) for a in ipr.get_addr(index=index, family=socket.AF_INET)}
        wanted = set() if router_ip is None else {(str(router_ip.ip), router_ip.network.prefixlen)}
        for address, length in present - wanted:
            ipr.addr("del", index=index, address=address, prefixlen=length)
        for address, length in wanted - present:
            ipr.addr("add", index=index, address=address, prefixlen=length)
        return str(ipr.get_links(index)[0].get_attr("IFLA_ADDRESS"))


def neighbour_macs(ifname: str) -> dict[str, str]:
    """The kernel's resolved IPv4 neighbours on `ifname`: address → MAC."""
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return {}
        return {
            str(n.get_attr("NDA_DST")): str(n.get_attr("NDA_LLADDR"))
            for n in ipr.get_neighbours(family=socket.AF_INET, ifindex=found[0])
            if n["state"] & _USABLE_NEIGHBOUR and n.get_attr("NDA_LLADDR")
        }


def probe(ifname: str, addresses: Iterable[str]) -> None:
    """Make the kernel ARP for `addresses` on `ifname`: one empty UDP datagram to each's discard port."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
        for address in addresses:
            try:
                sock.sendto(b"", (address, DISCARD_PORT))
            except OSError:
                pass  # unreachable now: the next full sync probes again

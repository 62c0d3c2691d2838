"""A node's BGP peering as data: its `Bgp` object checked, ExaBGP's configuration and API
lines rendered, and ExaBGP's JSON messages read back (pure; `speaker.py` does the I/O).

contivd does not speak BGP itself: it runs ExaBGP (docs/bgp.md). Everything here is computed
from the stored object and the store's endpoints, so a unit test covers each case without a
router, and the supervisor only moves lines between these functions and the processes.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_AS = 4_294_967_295  # four-octet AS numbers (RFC 6793)


class BgpConfigError(ValueError):
    """A `Bgp` object this node cannot peer with (the message says which field and why)."""


@dataclass(frozen=True)
class Peering:
    """One eBGP session: this node's router interface and AS, and its neighbor (the ToR)."""

    hostname: str
    router_ip: ipaddress.IPv4Interface
    local_as: int
    neighbor: ipaddress.IPv4Address
    neighbor_as: int

    @property
    def router_id(self) -> str:
        return str(self.router_ip.ip)


def as_number(value: Any, field: str) -> int:
    """An AS number as Contiv stored it (a decimal string) → int, or a BgpConfigError."""
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_AS:
        raise BgpConfigError(f"{field} {text!r} is not an AS number (1-{MAX_AS})")
    return int(text)


def peering_from_object(obj: Mapping[str, Any]) -> Peering:
    """The peering a stored `Bgp` object asks for (its API shape: `routerip`, `as`,
    `neighbor`, `neighbor-as`)."""
    hostname = str(obj.get("hostname", ""))
    what = f"Bgp {hostname}"
    router = str(obj.get("routerip", ""))
    try:
        if "/" not in router:
            raise ValueError(router)
        router_ip = ipaddress.IPv4Interface(re.sub(r"-\d+(?=/)", "", router))  # Contiv's `a.b.c.d-e/len` range form
    except ValueError:
        raise BgpConfigError(f"{what}: routerip {router!r} is not an IPv4 address with a prefix length") from None
    if not obj.get("neighbor"):
        raise BgpConfigError(f"{what}: no neighbor address")
    try:
        neighbor = ipaddress.IPv4Address(str(obj["neighbor"]))
    except ValueError:
        raise BgpConfigError(f"{what}: neighbor {obj['neighbor']!r} is not an IPv4 address") from None
    if neighbor == router_ip.ip:
        raise BgpConfigError(f"{what}: neighbor {neighbor} is this node's own router address")
    return Peering(
        hostname, router_ip, as_number(obj.get("as", ""), f"{what}: as"), neighbor, as_number(obj.get("neighbor-as", ""), f"{what}: neighbor-as")
    )


def exabgp_config(peering: Peering, relay: Iterable[str], hold_time: int) -> str:
    """ExaBGP's configuration for one peering: the API process `relay` (argv) receives parsed
    updates and session changes as JSON and sends announce/withdraw lines."""
    run = " ".join(relay)
    return f"""process contivd {{
    run {run};
    encoder json;
}}
neighbor {peering.neighbor} {{
    router-id {peering.router_id};
    local-address {peering.router_ip.ip};
    local-as {peering.local_as};
    peer-as {peering.neighbor_as};
    hold-time {hold_time};
    api {{
        processes [ contivd ];
        receive {{ parsed; update; }}
        neighbor-changes;
    }}
}}
"""


def local_prefixes(endpoints: Iterable[tuple[str, str]], node: str) -> frozenset[str]:
    """The /32s this node advertises: the addresses of the endpoints homed on it, from
    (homing host, IPv4 address) pairs."""
    return frozenset(f"{ip}/32" for host, ip in endpoints if host == node and ip)


def route_commands(announced: frozenset[str], wanted: frozenset[str]) -> list[str]:
    """ExaBGP API lines taking the advertised set from `announced` to `wanted`, withdrawals first
    (a moved address is never advertised by two nodes longer than needed)."""
    return [f"withdraw route {p} next-hop self" for p in sorted(announced - wanted)] + [
        f"announce route {p} next-hop self" for p in sorted(wanted - announced)
    ]


@dataclass(frozen=True)
class SessionChange:
    """ExaBGP's `state` message: `connected`, `up` or `down` for the neighbor."""

    neighbor: str
    state: str


@dataclass(frozen=True)
class RoutesLearned:
    """An UPDATE from the neighbor: prefixes announced (→ next hop) and withdrawn."""

    neighbor: str
    announced: Mapping[str, str]
    withdrawn: frozenset[str]


Message = SessionChange | RoutesLearned


def parse_message(line: str, local_as: int) -> Message | None:
    """One line ExaBGP wrote to the API process; None for lines that change nothing (acks such as
    `done`, keepalives, our own routes reflected back with our AS in their path)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    neighbor = message.get("neighbor") or {}
    peer = str((neighbor.get("address") or {}).get("peer", ""))
    if message.get("type") == "state":
        return SessionChange(peer, str(neighbor.get("state", "")))
    if message.get("type") != "update":
        return None
    update = (neighbor.get("message") or {}).get("update") or {}
    path = ((update.get("attribute") or {}).get("as-path")) or {}
    segments = path.values() if isinstance(path, dict) else path
    if any(local_as in (segment.get("value") or []) for segment in segments if isinstance(segment, dict)):
        return None  # our own route, reflected: BGP's loop prevention
    announced: dict[str, str] = {}
    for next_hop, nlris in ((update.get("announce") or {}).get("ipv4 unicast") or {}).items():
        for nlri in nlris:
            announced[str(nlri["nlri"] if isinstance(nlri, dict) else nlri)] = str(next_hop)
    withdrawn = frozenset(
        str(nlri["nlri"] if isinstance(nlri, dict) else nlri) for nlri in ((update.get("withdraw") or {}).get("ipv4 unicast") or [])
    )
    if not announced and not withdrawn:
        return None
    return RoutesLearned(peer, announced, withdrawn)


SESSION_STATES = {"up": "established", "connected": "opensent", "down": "active"}
"""ExaBGP's session states in GoBGP's words, which Contiv's `/inspect/bgp` carried."""


def inspect_answer(peering: Peering | None, session: str, learned: Mapping[str, str], error: str = "") -> dict[str, Any]:
    """Contiv's `/inspect/bgp` body: `Peers` (GoBGP `Neighbor` structs, the fields Contiv's
    netmaster reads) and `Dsts` (the prefixes learned from the neighbor); contivd adds `Error`."""
    answer: dict[str, Any] = {"Peers": [], "Dsts": sorted(learned)}
    if peering is not None:
        neighbor = {"NeighborAddress": str(peering.neighbor), "PeerAs": peering.neighbor_as, "LocalAs": peering.local_as}
        answer["Peers"] = [{"Config": neighbor, "State": {**neighbor, "SessionState": SESSION_STATES.get(session, "idle"), "AdminState": "up"}}]
    if error:
        answer["Error"] = error
    return answer


def bgp_oper(inspect: Mapping[str, Any]) -> dict[str, Any]:
    """A `Bgp` inspect's Oper from the node's `/inspect/bgp`, as Contiv's netmaster made it."""
    oper: dict[str, Any] = {}
    peers = inspect.get("Peers") or []
    if peers:
        state = peers[0].get("State") or {}
        oper["neighborStatus"] = state.get("SessionState", "")
        oper["adminStatus"] = state.get("AdminState", "")
    routes = list(inspect.get("Dsts") or [])
    if routes:
        oper["routes"] = routes
        oper["numRoutes"] = len(routes)
    return oper

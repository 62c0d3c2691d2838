"""netctl's client-side refusals: input it rejects before sending anything (exit status 1).

Each check takes the parsed flags of one command (click parameter names) and returns the
message netctl logs, or None. The server validates everything again; these exist so that a
script sees the same exit status and message from `contivd ctl` as from netctl.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any


def _is_ip(value: str) -> bool:
    """Go's net.ParseIP: an IPv4 or IPv6 address, no prefix, no zone."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _is_cidr(value: str) -> bool:
    """Go's net.ParseCIDR: an address with a prefix length (host bits may be set)."""
    try:
        ipaddress.ip_interface(value)
    except ValueError:
        return False
    return "/" in value


def network(flags: Mapping[str, Any]) -> str | None:
    if flags.get("gateway") and not _is_ip(flags["gateway"]):
        return "Invalid gateway - Enter in A.B.C.D format"
    if flags.get("gatewayv6") and not _is_ip(flags["gatewayv6"]):
        return "Invalid IPv6 gateway "
    return None


_DIRECTIONS: dict[str, tuple[tuple[tuple[str, str], ...], frozenset[str], str]] = {
    "in": (
        (("to_group", "Cant specify to-group for incoming rule"), ("to_network", "Cant specify to-network for incoming rule")),
        frozenset({"from_group", "from_network"}),
        "Can't specify both from-group argument and -from-network ",
    ),
    "out": (
        (
            ("from_group", "Cant specify from-group for outgoing rule"),
            ("from_network", "Cant specify from-network for outgoing rule"),
            ("from_ip_address", "Cant specify from-ip-address for outgoing rule"),
        ),
        frozenset({"to_group", "to_network"}),
        "Can't specify both -to-group and -to-network",
    ),
}
"""Per direction: the flags it refuses (in netctl's order of checking), and the pair it
refuses together."""


def rule(flags: Mapping[str, Any]) -> str | None:
    if flags.get("direction") not in _DIRECTIONS:
        return "Unknown direction"
    refused, exclusive, both = _DIRECTIONS[flags["direction"]]
    given = {name for name, value in flags.items() if value}
    return next((message for name, message in refused if name in given), both if exclusive <= given else None)


def bgp(flags: Mapping[str, Any]) -> str | None:
    if not _is_cidr(flags.get("router_ip") or ""):
        return "Wrong CIDR format. Enter in x.x.x.x/len format"
    if not _is_ip(flags.get("neighbor") or ""):
        return "Wrong IP format. Enter in x.x.x.x format"
    if not all(flags.get(name) for name in ("router_ip", "as", "neighbor", "neighbor_as")):
        return "Missing attributes"
    return None


def external_contracts(flags: Mapping[str, Any]) -> str | None:
    if flags.get("provided") and flags.get("consumed"):
        return "Cannot use both provided and consumed"
    if not (flags.get("provided") or flags.get("consumed")):
        return "Either provided or consumed must be specified"
    if not flags.get("contract"):
        return "Contracts not provided"
    return None

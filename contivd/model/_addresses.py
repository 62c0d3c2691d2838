"""IPv4/IPv6 address forms of the Contiv model: subnets, subnet ranges, ip-pools.

Parsers raise `ValueError` with a short problem text; callers attach the field name. Only shapes
and containment live here; which addresses are taken is IPAM state, not model.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Network

# Contiv's REST regex admits /1-/31, its IPAM (`ValidateNetworkRangeParams`) only /8 and longer.
MIN_PREFIX = 8
MAX_PREFIX = 31
# `GetSubnetIPv6` wants /16 or longer; /128 leaves no host.
MIN_PREFIX6 = 16
MAX_PREFIX6 = 127


@dataclass(frozen=True)
class Subnet:
    """An IPv4 network subnet, optionally restricted to the range `first..last` (`a-b/len`)."""

    network: IPv4Network
    first: IPv4Address
    last: IPv4Address

    @property
    def hosts(self) -> tuple[IPv4Address, IPv4Address]:
        """The addresses IPAM may hand out: the range without the network and broadcast addresses."""
        low = max(self.first, self.network.network_address + 1)
        high = min(self.last, self.network.broadcast_address - 1)
        return low, high

    def is_host(self, address: IPv4Address) -> bool:
        """Inside the network and neither its network nor its broadcast address (gateways)."""
        return address in self.network and address not in (
            self.network.network_address,
            self.network.broadcast_address,
        )

    def overlaps(self, other: Subnet) -> bool:
        """Contiv compares subnets as `first..last` spans, so disjoint ranges of one /24 coexist."""
        return self.first <= other.last and other.first <= self.last


def parse_subnet(text: str) -> Subnet:
    """Parse `a.b.c.d/len` or `a.b.c.d-e.f.g.h/len` (host bits allowed, as Contiv allows them)."""
    addresses, _, length = text.partition("/")
    prefix = int(length)
    if not MIN_PREFIX <= prefix <= MAX_PREFIX:
        raise ValueError(f"subnet length {prefix} not supported ({MIN_PREFIX}-{MAX_PREFIX})")
    start_text, dash, end_text = addresses.partition("-")
    start = IPv4Address(start_text)
    network = IPv4Network((start, prefix), strict=False)
    if not dash:
        return Subnet(network, network.network_address, network.broadcast_address)
    end = IPv4Address(end_text)
    if end not in network:
        raise ValueError(f"range end {end} lies outside {network}")
    if end < start:
        raise ValueError(f"range start {start} is after its end {end}")
    return Subnet(network, start, end)


def parse_pool(text: str) -> tuple[IPv4Address, IPv4Address]:
    """Parse an ip-pool `a.b.c.d-e.f.g.h`, or a single `a.b.c.d` (a one-address pool)."""
    start_text, dash, end_text = text.partition("-")
    start = IPv4Address(start_text)
    end = IPv4Address(end_text) if dash else start
    if end < start:
        raise ValueError(f"pool start {start} is after its end {end}")
    return start, end


def parse_subnet6(text: str) -> IPv6Network:
    """Parse an IPv6 `addr/len` (host bits allowed) with a prefix IPAM can serve."""
    network = IPv6Network(text, strict=False)
    if not MIN_PREFIX6 <= network.prefixlen <= MAX_PREFIX6:
        raise ValueError(f"ipv6 subnet length {network.prefixlen} not supported ({MIN_PREFIX6}-{MAX_PREFIX6})")
    return network

"""The stored address bitmaps: their encoding, and how many addresses they say are in use.

A network's `ipAllocMap` and an EPG's `epgIpAllocMap` are fastpath bitsets (host index =
address - subnet address), stored base64 (contiv-api.md §6, Decision 5). This module is the one
place that encodes and decodes them: the netmaster's IPAM allocates through `decode_pool` /
`encode_pool`, the status page and the metrics count through `address_usage`.

Not responsible for: choosing or releasing addresses (contivd.netmaster.ipam).
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address

from fastpath import Bitset, IPPool

from ..model import parse_pool
from .records import EndpointGroupState, NetworkState


def decode_pool(subnet: str, encoded: str) -> IPPool:
    """The pool of `subnet` whose bitset is stored as `encoded` (base64)."""
    return IPPool.from_bytes(subnet, base64.b64decode(encoded))


def encode_pool(pool: IPPool) -> str:
    """A pool's bitset as stored (base64)."""
    return base64.b64encode(pool.to_bytes()).decode()


def _set_bits_in(bits: Bitset, lo: int, hi: int) -> int:
    inside = bits.copy()
    inside.clear_range(0, lo)
    inside.clear_range(hi + 1, inside.nbits)
    return inside.count()


def groups_by_network(groups: Iterable[EndpointGroupState]) -> defaultdict[str, list[EndpointGroupState]]:
    """EPG states keyed by their network's id (`<net>.<tenant>`), for address_usage."""
    found: defaultdict[str, list[EndpointGroupState]] = defaultdict(list)
    for group in groups:
        found[group.net_id].append(group)
    return found


def address_usage(network: NetworkState, groups: Sequence[EndpointGroupState]) -> tuple[int, int]:
    """(allocated, total) host addresses of a network, for usage bars and metrics: endpoints'
    addresses out of the host range less the gateway, as the API's allocatedAddressesCount counts.
    `groups`: the network's EPGs (those with a pool matter).

    An EPG pool is marked taken in the network map as a whole when the group is created; only
    the addresses allocated inside it (its own map) count as allocated here."""
    base = int(IPv4Address(network.subnet_ip))
    low, _, high = network.ip_addr_range.partition("-")
    lo, hi = int(IPv4Address(low)) - base, int(IPv4Address(high)) - base
    if hi < lo:
        return 0, 0
    bits = decode_pool(network.subnet, network.ip_alloc_map).bits
    allocated = _set_bits_in(bits, lo, hi)
    for group in groups:
        if not group.epg_ip_alloc_map:
            continue
        pool = decode_pool(group.pool_subnet, group.epg_ip_alloc_map)
        first, last = parse_pool(group.ip_pool)
        start, stop = int(first) - base, int(last) - base
        allocated -= (stop - start + 1) - _set_bits_in(pool.bits, start, stop)
    total = hi - lo + 1
    gateway = int(IPv4Address(network.gateway)) - base if network.gateway else -1
    if lo <= gateway <= hi:  # reserved, never an endpoint's: counts as neither
        total -= 1
        allocated -= _set_bits_in(bits, gateway, gateway)
    return allocated, total

"""Address management: Contiv's network and EPG state with fastpath bitsets, as pure functions.

A network's IPv4 allocation map is one fastpath bitset (host index = address - network
address), stored base64 in the network state's `ipAllocMap` (contiv-api.md §6, Decision 5; the encoding
is contivd.state.usage's, which also counts usage for the status page and metrics).
Functions take the frozen state records, return the changed records and the address they
chose, and raise ModelError subclasses with Contiv's messages. They never touch the store:
callers commit the result in one guarded transaction.
"""

from __future__ import annotations

from dataclasses import replace
from ipaddress import IPv4Address, IPv6Address, IPv6Network
from typing import NamedTuple

from fastpath import Bitset, IPPool

from ..model import ConflictError, ValidationError, contiv_line, parse_pool, parse_subnet, parse_subnet6
from ..state import EndpointGroupState, NetworkState
from ..state.tables import ConfigObject
from ..state.usage import decode_pool
from ..state.usage import encode_pool as _encode


class Allocation(NamedTuple):
    """The network and group states after an address was taken or freed, and the address."""

    network: NetworkState
    group: EndpointGroupState | None
    address: str


def _network_pool(state: NetworkState) -> IPPool:
    return decode_pool(state.subnet, state.ip_alloc_map)


def _epg_pool(state: EndpointGroupState) -> IPPool | None:
    if not state.epg_ip_alloc_map:
        return None
    return decode_pool(state.pool_subnet, state.epg_ip_alloc_map)


def new_network_state(network: ConfigObject, pkt_tag: int, ext_pkt_tag: int) -> NetworkState:
    """CfgNetworkState for a validated network object and its allocated tags."""
    subnet = parse_subnet(network["subnet"])
    net = subnet.network
    pool = IPPool(str(net))
    first, last = subnet.first, subnet.last
    if (first, last) != (net.network_address, net.broadcast_address):
        # A range subnet `A-B/len`: every index outside [A, B] is taken.
        pool.bits.set_range(0, int(first) - int(net.network_address))
        pool.bits.set_range(int(last) - int(net.network_address) + 1, net.num_addresses)
    gateway = network.get("gateway", "")
    if gateway:
        if not subnet.is_host(IPv4Address(gateway)):
            raise ValidationError("gateway", f"gateway {gateway} is not a host address of subnet {net}")
        pool.alloc(gateway)
    low, high = subnet.hosts
    state = NetworkState(
        id=f"{network['networkName']}.{network['tenantName']}",
        tenant=network["tenantName"],
        network_name=network["networkName"],
        nw_type=network.get("nwType", "data"),
        pkt_tag_type=network["encap"],
        pkt_tag=pkt_tag,
        ext_pkt_tag=ext_pkt_tag,
        subnet_ip=str(net.network_address),
        subnet_len=net.prefixlen,
        gateway=gateway,
        ip_addr_range=f"{low}-{high}",
        ep_addr_count=0,
        ep_count=0,
        ip_alloc_map=_encode(pool),
        network_tag=network.get("cfgdTag") or f"{network['networkName']}.{network['tenantName']}",
    )
    if network.get("ipv6Subnet"):
        net6 = parse_subnet6(network["ipv6Subnet"])
        gateway6 = network.get("ipv6Gateway", "")
        state = replace(
            state,
            ipv6_subnet_ip=str(net6.network_address),
            ipv6_subnet_len=net6.prefixlen,
            ipv6_gateway=gateway6,
            ipv6_alloc_map=frozenset({_host_id6(net6, gateway6)} if gateway6 else ()),
        )
    return state


def new_epg_state(group: ConfigObject, network: NetworkState, epg_id: int) -> tuple[EndpointGroupState, NetworkState]:
    """EndpointGroupState for a group, and the network state with the group's pool carved out.

    Every address of the pool must be free in the network (so pools never overlap each
    other, the gateway or taken addresses); it is then marked used in the network map.
    """
    state = EndpointGroupState(
        id=f"{group['groupName']}:{group['tenantName']}",
        group_name=group["groupName"],
        tenant_name=group["tenantName"],
        network_name=group["networkName"],
        endpoint_group_id=epg_id,
        pkt_tag_type=network.pkt_tag_type,
        pkt_tag=network.pkt_tag,
        ext_pkt_tag=network.ext_pkt_tag,
        ep_count=0,
        group_tag=group.get("cfgdTag") or f"{group['groupName']}.{group['tenantName']}",
    )
    pool_text = group.get("ipPool", "")
    if pool_text:
        first, last = parse_pool(pool_text)
        net_pool = _network_pool(network)
        for value in range(int(first), int(last) + 1):
            if not net_pool.alloc(str(IPv4Address(value))):
                taken = contiv_line("address-unavailable", address=IPv4Address(value))
                raise ConflictError(f"{taken} (ipPool {pool_text})", contiv=taken)
        network = replace(network, ip_alloc_map=_encode(net_pool))
        epg_pool = IPPool(network.subnet)
        epg_pool.bits.set_range(0, epg_pool.bits.nbits)
        offset = int(first) - int(IPv4Address(network.subnet_ip))
        epg_pool.bits.clear_range(offset, offset + int(last) - int(first) + 1)
        state = replace(state, ip_pool=pool_text, pool_subnet=network.subnet, epg_ip_alloc_map=_encode(epg_pool))
    return state, network


def release_epg_pool(epg: EndpointGroupState, network: NetworkState) -> NetworkState:
    """The network state with an EPG's pool handed back (the group is being deleted)."""
    if not epg.ip_pool:
        return network
    first, last = parse_pool(epg.ip_pool)
    pool = _network_pool(network)
    for value in range(int(first), int(last) + 1):
        pool.release(str(IPv4Address(value)))
    return replace(network, ip_alloc_map=_encode(pool))


def _where(network: NetworkState, epg: EndpointGroupState | None) -> str:
    return f"pool {epg.ip_pool}" if epg is not None else f"subnet {network.subnet}"


def allocate_ipv4(network: NetworkState, epg: EndpointGroupState | None, preferred: str = "", *, endpoint: bool = False) -> Allocation:
    """Reserve `preferred` (refused if taken: Contiv's missing collision check, fixed) or the
    lowest free address, from the EPG's pool when it has one. For an `endpoint`, the network's
    and the group's endpoint counts go up too (each state is rebuilt once: plans are hot)."""
    epg_pool = _epg_pool(epg) if epg else None
    pool = epg_pool or _network_pool(network)
    pool_group = epg if epg_pool is not None else None
    if preferred:
        try:
            taken = not pool.alloc(preferred)
        except ValueError:
            raise ValidationError("ipAddress", f"address {preferred} is outside {_where(network, pool_group)}") from None
        if taken:
            raise ConflictError(f"ip address {preferred} is already in use")
        address = preferred
    else:
        found = pool.alloc_lowest()
        if found is None:
            raise ConflictError(f"auto allocation failed - address exhaustion in {_where(network, pool_group)}")
        address = found
    ep_count, ep_addr_count = network.ep_count + endpoint, network.ep_addr_count + (not preferred)
    if pool_group is not None:
        if endpoint or not preferred:
            network = replace(network, ep_addr_count=ep_addr_count, ep_count=ep_count)
        return Allocation(network, replace(pool_group, epg_ip_alloc_map=_encode(pool), ep_count=pool_group.ep_count + endpoint), address)
    network = replace(network, ip_alloc_map=_encode(pool), ep_addr_count=ep_addr_count, ep_count=ep_count)
    return Allocation(network, replace(epg, ep_count=epg.ep_count + 1) if epg and endpoint else epg, address)


def release_ipv4(network: NetworkState, epg: EndpointGroupState | None, address: str, *, endpoint: bool = False) -> Allocation:
    """Free an address (in the EPG pool if it lies there); the states unchanged if it was not
    allocated. For an `endpoint`, the endpoint counts go down too (never below 0)."""
    leaving = int(endpoint)
    epg_pool = _epg_pool(epg) if epg else None
    if epg_pool is not None and epg is not None:
        first, last = parse_pool(epg.ip_pool)
        if first <= IPv4Address(address) <= last:
            epg_pool.release(address)
            if endpoint:
                network = replace(network, ep_count=max(0, network.ep_count - 1))
            return Allocation(network, replace(epg, epg_ip_alloc_map=_encode(epg_pool), ep_count=max(0, epg.ep_count - leaving)), address)
    pool = _network_pool(network)
    if pool.release(address):
        network = replace(
            network, ip_alloc_map=_encode(pool), ep_addr_count=max(0, network.ep_addr_count - 1), ep_count=max(0, network.ep_count - leaving)
        )
    elif endpoint:
        network = replace(network, ep_count=max(0, network.ep_count - 1))
    if epg is not None and endpoint:
        epg = replace(epg, ep_count=max(0, epg.ep_count - 1))
    return Allocation(network, epg, address)


def _host_id6(net: IPv6Network, address: str) -> int:
    value = IPv6Address(address)
    if value not in net:
        raise ValidationError("ipv6Address", f"address {address} is outside {net}")
    return int(value) - int(net.network_address)


def allocate_ipv6(network: NetworkState, preferred: str = "") -> tuple[NetworkState, str]:
    """Next IPv6 host after the last one allocated (wrapping, skipping used), or `preferred`."""
    net = IPv6Network(network.ipv6_subnet)
    used = network.ipv6_alloc_map
    if preferred:
        host = _host_id6(net, preferred)
        if host in used:
            raise ConflictError(f"ipv6 address {preferred} is already in use")
    else:
        size = net.num_addresses
        if len(used) >= size - 1:
            raise ConflictError(f"Reached MaxHosts ({size - 1}). Cannot allocate more hosts")
        host = network.ipv6_last_host
        while True:
            host = host + 1 if host + 1 < size else 1
            if host not in used:
                break
        network = replace(network, ipv6_last_host=host, ep_addr_count=network.ep_addr_count + 1)
    return replace(network, ipv6_alloc_map=used | {host}), str(IPv6Address(int(net.network_address) + host))


def release_ipv6(network: NetworkState, address: str) -> NetworkState:
    """Free an IPv6 address (Contiv never did: fixed, Decision 3)."""
    if not address or not network.dual_stack:
        return network
    host = _host_id6(IPv6Network(network.ipv6_subnet), address)
    if host not in network.ipv6_alloc_map:
        return network
    return replace(network, ipv6_alloc_map=network.ipv6_alloc_map - {host}, ep_addr_count=max(0, network.ep_addr_count - 1))


def mac_for(ipv4: str) -> str:
    """Contiv's MAC: 02:02 followed by the four IPv4 bytes."""
    return "02:02:" + ":".join(f"{b:02x}" for b in IPv4Address(ipv4).packed)


def _runs(bits: Bitset, base: int, lo: int, hi: int, want_set: bool) -> str:
    """Maximal runs of set (or clear) indices in [lo, hi] as Contiv's `a-b, c` strings."""
    runs: list[str] = []
    start = None
    for index in range(lo, hi + 2):
        inside = index <= hi and bits.test(index) == want_set
        if inside and start is None:
            start = index
        elif not inside and start is not None:
            a, b = IPv4Address(base + start), IPv4Address(base + index - 1)
            runs.append(str(a) if a == b else f"{a}-{b}")
            start = None
    return ", ".join(runs)


def address_oper(network: NetworkState) -> dict[str, str]:
    """`availableIPAddresses` / `allocatedIPAddresses` of a network, as Contiv writes them."""
    pool = _network_pool(network)
    base = int(IPv4Address(network.subnet_ip))
    low, _, high = network.ip_addr_range.partition("-")
    lo, hi = int(IPv4Address(low)) - base, int(IPv4Address(high)) - base
    if hi < lo:
        return {"availableIPAddresses": "", "allocatedIPAddresses": ""}
    return {
        "availableIPAddresses": _runs(pool.bits, base, lo, hi, False),
        "allocatedIPAddresses": _runs(pool.bits, base, lo, hi, True),
    }


def epg_address_oper(epg: EndpointGroupState) -> dict[str, str]:
    """The same strings for an EPG's pool; both empty for a group without a pool."""
    pool = _epg_pool(epg)
    if pool is None:
        return {"availableIPAddresses": "", "allocatedIPAddresses": ""}
    first, last = parse_pool(epg.ip_pool)
    base = int(pool.subnet.network)
    return {
        "availableIPAddresses": _runs(pool.bits, base, int(first) - base, int(last) - base, False),
        "allocatedIPAddresses": _runs(pool.bits, base, int(first) - base, int(last) - base, True),
    }

"""Address management: Contiv's network and EPG state with fastpath bitsets, as pure functions.

A network's IPv4 allocation map is one fastpath bitset (host index = address - network
address), stored base64 in the network state's `ipAllocMap` (contiv-api.md §6, Decision 5; the encoding
is contivd.state.usage's, which also counts usage for the status page and metrics).
Functions take state dicts, return new ones or the address they chose, and raise ModelError
subclasses with Contiv's messages. They never touch the store: callers commit the result in
one guarded transaction.
"""

from __future__ import annotations

import copy
from ipaddress import IPv4Address, IPv6Address, IPv6Network
from typing import Any

from fastpath import Bitset, IPPool

from ..model import ConflictError, ValidationError, contiv_line, parse_pool, parse_subnet, parse_subnet6
from ..state.usage import decode_pool
from ..state.usage import encode_pool as _encode

State = dict[str, Any]


def _network_pool(state: State) -> IPPool:
    return decode_pool(f"{state['subnetIP']}/{state['subnetLen']}", state["ipAllocMap"])


def _epg_pool(state: State) -> IPPool | None:
    if not state.get("epgIpAllocMap"):
        return None
    return decode_pool(state["poolSubnet"], state["epgIpAllocMap"])


def new_network_state(network: dict[str, Any], pkt_tag: int, ext_pkt_tag: int) -> State:
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
    state: State = {
        "id": f"{network['networkName']}.{network['tenantName']}",
        "tenant": network["tenantName"],
        "networkName": network["networkName"],
        "nwType": network.get("nwType", "data"),
        "pktTagType": network["encap"],
        "pktTag": pkt_tag,
        "extPktTag": ext_pkt_tag,
        "subnetIP": str(net.network_address),
        "subnetLen": net.prefixlen,
        "gateway": gateway,
        "ipAddrRange": f"{low}-{high}",
        "epAddrCount": 0,
        "epCount": 0,
        "ipAllocMap": _encode(pool),
        "networkTag": network.get("cfgdTag") or f"{network['networkName']}.{network['tenantName']}",
    }
    if network.get("ipv6Subnet"):
        net6 = parse_subnet6(network["ipv6Subnet"])
        state.update(
            ipv6SubnetIP=str(net6.network_address),
            ipv6SubnetLen=net6.prefixlen,
            ipv6Gateway=network.get("ipv6Gateway", ""),
            ipv6AllocMap={},
            ipv6LastHost=0,
        )
        if state["ipv6Gateway"]:
            state["ipv6AllocMap"][str(_host_id6(net6, state["ipv6Gateway"]))] = True
    return state


def new_epg_state(group: dict[str, Any], network_state: State, epg_id: int) -> tuple[State, State]:
    """EndpointGroupState for a group, and the network state with the group's pool carved out.

    Every address of the pool must be free in the network (so pools never overlap each
    other, the gateway or taken addresses); it is then marked used in the network map.
    """
    network = copy.deepcopy(network_state)
    state: State = {
        "id": f"{group['groupName']}:{group['tenantName']}",
        "groupName": group["groupName"],
        "tenantName": group["tenantName"],
        "networkName": group["networkName"],
        "endpointGroupId": epg_id,
        "pktTagType": network["pktTagType"],
        "pktTag": network["pktTag"],
        "extPktTag": network["extPktTag"],
        "epCount": 0,
        "groupTag": group.get("cfgdTag") or f"{group['groupName']}.{group['tenantName']}",
    }
    pool_text = group.get("ipPool", "")
    if pool_text:
        first, last = parse_pool(pool_text)
        net_pool = _network_pool(network)
        subnet = f"{network['subnetIP']}/{network['subnetLen']}"
        for value in range(int(first), int(last) + 1):
            if not net_pool.alloc(str(IPv4Address(value))):
                taken = contiv_line("address-unavailable", address=IPv4Address(value))
                raise ConflictError(f"{taken} (ipPool {pool_text})", contiv=taken)
        network["ipAllocMap"] = _encode(net_pool)
        epg_pool = IPPool(subnet)
        epg_pool.bits.set_range(0, epg_pool.bits.nbits)
        offset = int(first) - int(IPv4Address(network["subnetIP"]))
        epg_pool.bits.clear_range(offset, offset + int(last) - int(first) + 1)
        state.update(IPPool=pool_text, poolSubnet=subnet, epgIpAllocMap=_encode(epg_pool))
    return state, network


def release_epg_pool(epg_state: State, network_state: State) -> State:
    """The network state with an EPG's pool handed back (the group is being deleted)."""
    if not epg_state.get("IPPool"):
        return network_state
    network = copy.deepcopy(network_state)
    first, last = parse_pool(epg_state["IPPool"])
    pool = _network_pool(network)
    for value in range(int(first), int(last) + 1):
        pool.release(str(IPv4Address(value)))
    network["ipAllocMap"] = _encode(pool)
    return network


def allocate_ipv4(network: State, epg: State | None, preferred: str = "") -> str:
    """Reserve `preferred` (refused if taken: Contiv's missing collision check, fixed) or the
    lowest free address, from the EPG's pool when it has one. Mutates the given states."""
    subnet = f"{network['subnetIP']}/{network['subnetLen']}"
    epg_pool = _epg_pool(epg) if epg else None
    pool = epg_pool or _network_pool(network)
    if preferred:
        try:
            taken = not pool.alloc(preferred)
        except ValueError:
            where = f"pool {epg['IPPool']}" if epg_pool and epg else f"subnet {subnet}"
            raise ValidationError("ipAddress", f"address {preferred} is outside {where}") from None
        if taken:
            raise ConflictError(f"ip address {preferred} is already in use")
        address = preferred
    else:
        found = pool.alloc_lowest()
        if found is None:
            where = f"pool {epg['IPPool']}" if epg_pool and epg else f"subnet {subnet}"
            raise ConflictError(f"auto allocation failed - address exhaustion in {where}")
        address = found
        network["epAddrCount"] = network.get("epAddrCount", 0) + 1
    if epg_pool and epg:
        epg["epgIpAllocMap"] = _encode(epg_pool)
    else:
        network["ipAllocMap"] = _encode(pool)
    return address


def release_ipv4(network: State, epg: State | None, address: str) -> bool:
    """Free an address (in the EPG pool if it lies there); False if it was not allocated."""
    epg_pool = _epg_pool(epg) if epg else None
    if epg_pool is not None and epg is not None:
        first, last = parse_pool(epg["IPPool"])
        if first <= IPv4Address(address) <= last:
            freed = epg_pool.release(address)
            epg["epgIpAllocMap"] = _encode(epg_pool)
            return freed
    pool = _network_pool(network)
    freed = pool.release(address)
    if freed:
        network["ipAllocMap"] = _encode(pool)
        network["epAddrCount"] = max(0, network.get("epAddrCount", 0) - 1)
    return freed


def _host_id6(net: IPv6Network, address: str) -> int:
    value = IPv6Address(address)
    if value not in net:
        raise ValidationError("ipv6Address", f"address {address} is outside {net}")
    return int(value) - int(net.network_address)


def _network6(network: State) -> IPv6Network:
    return IPv6Network(f"{network['ipv6SubnetIP']}/{network['ipv6SubnetLen']}")


def allocate_ipv6(network: State, preferred: str = "") -> str:
    """Next IPv6 host after the last one allocated (wrapping, skipping used), or `preferred`."""
    net = _network6(network)
    used: dict[str, bool] = dict(network.get("ipv6AllocMap", {}))  # replaced, never mutated (checkpoints)
    if preferred:
        host = _host_id6(net, preferred)
        if str(host) in used:
            raise ConflictError(f"ipv6 address {preferred} is already in use")
    else:
        size = net.num_addresses
        if len(used) >= size - 1:
            raise ConflictError(f"Reached MaxHosts ({size - 1}). Cannot allocate more hosts")
        host = network.get("ipv6LastHost", 0)
        while True:
            host = host + 1 if host + 1 < size else 1
            if str(host) not in used:
                break
        network["ipv6LastHost"] = host
        network["epAddrCount"] = network.get("epAddrCount", 0) + 1
    used[str(host)] = True
    network["ipv6AllocMap"] = used
    return str(IPv6Address(int(net.network_address) + host))


def release_ipv6(network: State, address: str) -> None:
    """Free an IPv6 address (Contiv never did: fixed, Decision 3)."""
    if not address or "ipv6SubnetIP" not in network:
        return
    used = dict(network.get("ipv6AllocMap", {}))
    if used.pop(str(_host_id6(_network6(network), address)), None):
        network["ipv6AllocMap"] = used
        network["epAddrCount"] = max(0, network.get("epAddrCount", 0) - 1)


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


def address_oper(network: State) -> dict[str, str]:
    """`availableIPAddresses` / `allocatedIPAddresses` of a network, as Contiv writes them."""
    pool = _network_pool(network)
    base = int(IPv4Address(network["subnetIP"]))
    low, _, high = network["ipAddrRange"].partition("-")
    lo, hi = int(IPv4Address(low)) - base, int(IPv4Address(high)) - base
    if hi < lo:
        return {"availableIPAddresses": "", "allocatedIPAddresses": ""}
    return {
        "availableIPAddresses": _runs(pool.bits, base, lo, hi, False),
        "allocatedIPAddresses": _runs(pool.bits, base, lo, hi, True),
    }


def epg_address_oper(epg: State) -> dict[str, str]:
    """The same strings for an EPG's pool; both empty for a group without a pool."""
    pool = _epg_pool(epg)
    if pool is None:
        return {"availableIPAddresses": "", "allocatedIPAddresses": ""}
    first, last = parse_pool(epg["IPPool"])
    base = int(pool.subnet.network)
    return {
        "availableIPAddresses": _runs(pool.bits, base, int(first) - base, int(last) - base, False),
        "allocatedIPAddresses": _runs(pool.bits, base, int(first) - base, int(last) - base, True),
    }

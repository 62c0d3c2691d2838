"""IPAM and tag allocation as pure functions, with Contiv's own test vectors (§7)."""

from __future__ import annotations

import pytest

from contivd.model import VLAN, VXLAN, ConflictError, ValidationError, parse_tag_ranges
from contivd.netmaster import ipam, resources
from contivd.state import NetworkState


def network(subnet: str, gateway: str = "", **extra: str) -> NetworkState:
    obj = {"networkName": "n", "tenantName": "t", "encap": "vxlan", "subnet": subnet, "gateway": gateway, **extra}
    return ipam.new_network_state(obj, 1, 1)


@pytest.mark.parametrize(
    "subnet, available",
    [
        ("198.18.1.0/24", "198.18.1.1-198.18.1.254"),
        ("198.18.1.0/27", "198.18.1.1-198.18.1.30"),
        ("198.18.1.0/30", "198.18.1.1-198.18.1.2"),
        ("198.18.1.5-198.18.1.15/27", "198.18.1.5-198.18.1.15"),
    ],
)
def test_available_ranges_of_new_networks(subnet: str, available: str) -> None:
    assert ipam.address_oper(network(subnet)) == {"availableIPAddresses": available, "allocatedIPAddresses": ""}


def allocate(state: NetworkState, count: int) -> tuple[NetworkState, list[str]]:
    addresses = []
    for _ in range(count):
        state, _, address = ipam.allocate_ipv4(state, None)
        addresses.append(address)
    return state, addresses


def test_lowest_first_allocation_and_oper_strings() -> None:
    state, addresses = allocate(network("198.18.1.0/24", "198.18.1.254"), 3)
    assert addresses == ["198.18.1.1", "198.18.1.2", "198.18.1.3"]
    assert ipam.address_oper(state)["allocatedIPAddresses"] == "198.18.1.1-198.18.1.3, 198.18.1.254"
    freed = ipam.release_ipv4(state, None, "198.18.1.2").network
    assert freed.ep_addr_count == 2 and ipam.address_oper(freed)["allocatedIPAddresses"] == "198.18.1.1, 198.18.1.3, 198.18.1.254"
    assert ipam.release_ipv4(freed, None, "198.18.1.2").network == freed, "releasing a free address changes nothing"
    state, _, address = ipam.allocate_ipv4(freed, None)
    assert address == "198.18.1.2" and state.ep_addr_count == 3
    assert ipam.mac_for("198.18.1.2") == "02:02:c6:12:01:02"


def test_static_addresses_are_collision_checked() -> None:
    state = network("198.18.1.0/29")
    state, _, address = ipam.allocate_ipv4(state, None, "198.18.1.3")
    assert address == "198.18.1.3"
    with pytest.raises(ConflictError, match="already in use"):
        ipam.allocate_ipv4(state, None, "198.18.1.3")
    with pytest.raises(ValidationError, match="outside"):
        ipam.allocate_ipv4(state, None, "198.18.9.1")


def test_exhaustion_names_the_subnet() -> None:
    state, _ = allocate(network("198.18.1.0/30"), 2)
    with pytest.raises(ConflictError, match="address exhaustion in subnet 198.18.1.0/30"):
        ipam.allocate_ipv4(state, None)


def test_group_pools_are_carved_out_and_must_be_free() -> None:
    state = network("198.18.3.0/24", "198.18.3.254")
    group = {"groupName": "g", "tenantName": "t", "networkName": "n", "ipPool": "198.18.3.10-198.18.3.20"}
    epg, state = ipam.new_epg_state(group, state, 7)
    _, taken_epg, address = ipam.allocate_ipv4(state, epg)
    assert address == "198.18.3.10" and taken_epg is not None and taken_epg.epg_ip_alloc_map != epg.epg_ip_alloc_map
    assert ipam.allocate_ipv4(state, None).address == "198.18.3.1", "the network skips the pool"
    with pytest.raises(ConflictError, match="not available"):
        ipam.new_epg_state({**group, "groupName": "h", "ipPool": "198.18.3.20-198.18.3.30"}, state, 8)
    state, _, _ = ipam.allocate_ipv4(state, None)
    state = ipam.release_epg_pool(epg, state)
    assert ipam.address_oper(state)["allocatedIPAddresses"] == "198.18.3.1, 198.18.3.254"


def test_ipv6_allocation_and_release() -> None:
    state = network("198.18.4.0/24", ipv6Subnet="2001:db8::/120", ipv6Gateway="2001:db8::1")
    state, address = ipam.allocate_ipv6(state)
    assert address == "2001:db8::2"
    state, address = ipam.allocate_ipv6(state, "2001:db8::9")
    assert address == "2001:db8::9"
    with pytest.raises(ConflictError):
        ipam.allocate_ipv6(state, "2001:db8::9")
    state = ipam.release_ipv6(state, "2001:db8::9")
    assert ipam.allocate_ipv6(state, "2001:db8::9")[1] == "2001:db8::9"


def test_tags_come_from_the_global_ranges() -> None:
    tags = resources.new_tags_state()
    vlans = parse_tag_ranges("100-1000", VLAN)
    tags, first = resources.allocate(tags, "vlan", vlans)
    tags, pinned = resources.allocate(tags, "vlan", vlans, 500)
    assert (first, pinned) == (100, 500)
    for bad in (99, 1001):
        with pytest.raises(ConflictError, match="out of range"):
            resources.allocate(tags, "vlan", vlans, bad)
    with pytest.raises(ConflictError, match="not available"):
        resources.allocate(tags, "vlan", vlans, 500)
    tags, vni = resources.allocate(tags, "vxlan", parse_tag_ranges("1001-2000", VXLAN))
    assert vni == 1001
    assert resources.in_use(tags, "vlan") == [100, 500]
    tags = resources.release(tags, "vlan", 100)
    assert resources.allocate(tags, "vlan", vlans)[1] == 100
    tags, one = resources.allocate(tags, "epgId")
    assert (one, resources.allocate(tags, "epgId")[1]) == (1, 2)

"""IPAM and tag allocation as pure functions, with Contiv's own test vectors (§7)."""

from __future__ import annotations

import pytest

from contivd.model import VLAN, VXLAN, ConflictError, ValidationError, parse_tag_ranges
from contivd.netmaster import ipam, resources


def network(subnet: str, gateway: str = "", **extra: str) -> dict:
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


def test_lowest_first_allocation_and_oper_strings() -> None:
    state = network("198.18.1.0/24", "198.18.1.254")
    assert [ipam.allocate_ipv4(state, None) for _ in range(3)] == ["198.18.1.1", "198.18.1.2", "198.18.1.3"]
    assert ipam.address_oper(state)["allocatedIPAddresses"] == "198.18.1.1-198.18.1.3, 198.18.1.254"
    assert ipam.release_ipv4(state, None, "198.18.1.2") is True
    assert ipam.release_ipv4(state, None, "198.18.1.2") is False
    assert ipam.allocate_ipv4(state, None) == "198.18.1.2"
    assert state["epAddrCount"] == 3
    assert ipam.mac_for("198.18.1.2") == "02:02:c6:12:01:02"


def test_static_addresses_are_collision_checked() -> None:
    state = network("198.18.1.0/29")
    assert ipam.allocate_ipv4(state, None, "198.18.1.3") == "198.18.1.3"
    with pytest.raises(ConflictError, match="already in use"):
        ipam.allocate_ipv4(state, None, "198.18.1.3")
    with pytest.raises(ValidationError, match="outside"):
        ipam.allocate_ipv4(state, None, "198.18.9.1")


def test_exhaustion_names_the_subnet() -> None:
    state = network("198.18.1.0/30")
    ipam.allocate_ipv4(state, None)
    ipam.allocate_ipv4(state, None)
    with pytest.raises(ConflictError, match="address exhaustion in subnet 198.18.1.0/30"):
        ipam.allocate_ipv4(state, None)


def test_group_pools_are_carved_out_and_must_be_free() -> None:
    state = network("198.18.3.0/24", "198.18.3.254")
    group = {"groupName": "g", "tenantName": "t", "networkName": "n", "ipPool": "198.18.3.10-198.18.3.20"}
    epg, state = ipam.new_epg_state(group, state, 7)
    assert ipam.allocate_ipv4(state, epg) == "198.18.3.10"
    assert ipam.allocate_ipv4(state, None) == "198.18.3.1", "the network skips the pool"
    with pytest.raises(ConflictError, match="not available"):
        ipam.new_epg_state({**group, "groupName": "h", "ipPool": "198.18.3.20-198.18.3.30"}, state, 8)
    state = ipam.release_epg_pool(epg, state)
    assert ipam.address_oper(state)["allocatedIPAddresses"] == "198.18.3.1, 198.18.3.254"


def test_ipv6_allocation_and_release() -> None:
    state = network("198.18.4.0/24", ipv6Subnet="2001:db8::/120", ipv6Gateway="2001:db8::1")
    assert ipam.allocate_ipv6(state) == "2001:db8::2"
    assert ipam.allocate_ipv6(state, "2001:db8::9") == "2001:db8::9"
    with pytest.raises(ConflictError):
        ipam.allocate_ipv6(state, "2001:db8::9")
    ipam.release_ipv6(state, "2001:db8::9")
    assert ipam.allocate_ipv6(state, "2001:db8::9") == "2001:db8::9"


def test_tags_come_from_the_global_ranges() -> None:
    tags = resources.new_tags_state()
    vlans = parse_tag_ranges("100-1000", VLAN)
    assert resources.allocate(tags, "vlan", vlans) == 100
    assert resources.allocate(tags, "vlan", vlans, 500) == 500
    for bad in (99, 1001):
        with pytest.raises(ConflictError, match="out of range"):
            resources.allocate(tags, "vlan", vlans, bad)
    with pytest.raises(ConflictError, match="not available"):
        resources.allocate(tags, "vlan", vlans, 500)
    vnis = parse_tag_ranges("1001-2000", VXLAN)
    assert resources.allocate(tags, "vxlan", vnis) == 1001
    assert resources.in_use(tags, "vlan") == [100, 500]
    resources.release(tags, "vlan", 100)
    assert resources.allocate(tags, "vlan", vlans) == 100
    assert [resources.allocate(tags, "epgId") for _ in range(2)] == [1, 2]

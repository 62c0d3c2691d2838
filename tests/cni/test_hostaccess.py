"""Host access decisions: the private subnet, the node's address, allocation, overlaps, the CNI result."""

from __future__ import annotations

import ipaddress

import pytest

from contivd.agent.hostnet import HostAccessError, node_address, private_subnet
from contivd.cni_server import hostaccess
from contivd.cni_server.hostaccess import HostAccessExhaustedError
from contivd.cni_server.resolve import Attachment

SUBNET = ipaddress.IPv4Network("198.18.0.0/16")


def test_contivs_default_subnet_and_node_address() -> None:
    # The production default itself (Contiv's), asserted, never used as an address: the one literal outside 198.18.0.0/15.
    assert private_subnet(None) == ipaddress.IPv4Network("172.19.0.0/16")
    assert node_address(SUBNET) == ipaddress.IPv4Address("198.18.255.254")


@pytest.mark.parametrize(
    ("text", "why"), [("198.18.0.1/16", "not an IPv4 subnet"), ("nonsense", "not an IPv4 subnet"), ("198.18.0.0/30", "too small")]
)
def test_unusable_private_subnets_are_named(text: str, why: str) -> None:
    with pytest.raises(HostAccessError, match=why):
        private_subnet(text)


def test_allocation_takes_the_lowest_free_address_and_never_the_nodes() -> None:
    assert hostaccess.pick_address(SUBNET, []) == ipaddress.IPv4Address("198.18.0.1")
    assert hostaccess.pick_address(SUBNET, ["198.18.0.1", "198.18.0.3"]) == ipaddress.IPv4Address("198.18.0.2")
    small = ipaddress.IPv4Network("198.18.0.0/29")  # hosts .1-.6, .6 is the node's
    assert hostaccess.pick_address(small, [f"198.18.0.{i}" for i in range(1, 5)]) == ipaddress.IPv4Address("198.18.0.5")
    with pytest.raises(HostAccessExhaustedError, match="198.18.0.0/29 has no free address"):
        hostaccess.pick_address(small, [f"198.18.0.{i}" for i in range(1, 6)])


def test_overlaps_with_the_pod_network_or_the_service_subnet_are_named() -> None:
    assert hostaccess.overlap_problem(SUBNET, "198.19.1.0/24", "flat.default", "198.19.20.0/24") == ""
    assert "overlaps the subnet 198.18.5.0/24 of network flat.default" in hostaccess.overlap_problem(SUBNET, "198.18.5.0/24", "flat.default", "")
    assert "overlaps the Service subnet 198.18.128.0/17" in hostaccess.overlap_problem(SUBNET, "198.19.1.0/24", "n", "198.18.128.0/17")


def test_service_cidr_from_the_network_config_wins_over_the_daemons() -> None:
    assert hostaccess.service_cidr({}, None) == ""
    assert hostaccess.service_cidr({}, "198.19.20.0/24") == "198.19.20.0/24"
    assert hostaccess.service_cidr({"serviceCidr": "198.19.30.0/24"}, "198.19.20.0/24") == "198.19.30.0/24"
    with pytest.raises(HostAccessError, match="'198.19.30.1/24' is not an IPv4 subnet"):
        hostaccess.service_cidr({"serviceCidr": "198.19.30.1/24"}, None)
    with pytest.raises(HostAccessError, match="must be a string"):
        hostaccess.service_cidr({"serviceCidr": 5}, None)


def test_names_derive_from_the_attachment_and_gc_finds_strays() -> None:
    one, two = Attachment("c1", "eth0"), Attachment("c2", "eth0")
    name = hostaccess.host_ifname(one)
    assert len(name) == 14 and name.startswith("ch") and name[2:] == one.host_ifname[2:]
    assert hostaccess.is_host_access_ifname(name) and not hostaccess.is_host_access_ifname(one.host_ifname)
    links = [name, hostaccess.host_ifname(two), one.host_ifname, "lo"]
    assert hostaccess.stray_host_access(links, [one]) == [hostaccess.host_ifname(two)]


def test_the_result_lists_both_ends_the_private_address_and_the_routes() -> None:
    attachment = Attachment("c1", "eth0")
    access = hostaccess.plan(attachment, SUBNET, ["198.18.0.1"], "198.19.10.2", "198.19.20.0/24")
    base = {
        "cniVersion": "1.0.0",
        "interfaces": [{"name": attachment.host_ifname, "mac": "aa"}, {"name": "eth0", "mac": "bb", "sandbox": "/ns"}],
        "ips": [{"address": "198.19.10.2/24", "interface": 1}],
        "routes": [],
        "dns": {},
    }
    result = hostaccess.add_to_result(base, access, "cc", "dd", "/ns")
    assert result["interfaces"][2:] == [{"name": access.host_ifname, "mac": "cc"}, {"name": "host1", "mac": "dd", "sandbox": "/ns"}]
    assert result["ips"][1] == {"address": "198.18.0.2/16", "gateway": "198.18.255.254", "interface": 3}
    assert result["routes"] == [{"dst": "0.0.0.0/0", "gw": "198.18.255.254"}, {"dst": "198.19.20.0/24"}]
    assert base["ips"] == [{"address": "198.19.10.2/24", "interface": 1}], "the input result is not changed"

"""Address management through the leader: what endpoint creates and deletes commit to the store."""

from __future__ import annotations

import pytest

from contivd.model import ConflictError, ValidationError
from contivd.netmaster import ipam
from contivd.netmaster.service import Netmaster
from contivd.state import keys as layout
from raftstore import MemoryStore
from tests.netmaster.helpers import TENANT, create, delete_request, net_state, network, state


async def test_addresses_are_allocated_lowest_first_skipping_the_gateway(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.1.0/29", "198.18.1.1"))
    created = [await create(netmaster, f"e{i}", "n") for i in range(3)]
    assert [ep["ipAddress"] for ep in created] == ["198.18.1.2", "198.18.1.3", "198.18.1.4"]
    assert [ep["macAddress"] for ep in created] == ["02:02:c6:12:01:02", "02:02:c6:12:01:03", "02:02:c6:12:01:04"]
    net = net_state(store, "n")
    assert (net["epCount"], net["epAddrCount"]) == (3, 3)
    assert ipam.address_oper(net) == {"availableIPAddresses": "198.18.1.5-198.18.1.6", "allocatedIPAddresses": "198.18.1.1-198.18.1.4"}
    stored = state(store, layout.ep_state("n.default-e1"))
    assert stored == created[1] and stored["homingHost"] == "node1" and stored["netID"] == "n.default"


async def test_static_addresses_are_honoured_and_collisions_refused(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.2.0/28", "198.18.2.14"))
    assert (await create(netmaster, "s", "n", ip="198.18.2.9"))["ipAddress"] == "198.18.2.9"
    revision = store.revision
    with pytest.raises(ConflictError, match="198.18.2.9 is already in use"):
        await create(netmaster, "t", "n", ip="198.18.2.9")
    with pytest.raises(ValidationError, match="198.18.3.1 is outside subnet 198.18.2.0/28"):
        await create(netmaster, "t", "n", ip="198.18.3.1")
    assert store.revision == revision, "a refused endpoint writes nothing"
    assert (await create(netmaster, "u", "n"))["ipAddress"] == "198.18.2.1", "auto allocation is unaffected by a static address"
    assert net_state(store, "n")["epCount"] == 2


async def test_group_pools_allocate_inside_the_pool_until_exhausted(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.3.0/28", "198.18.3.14"))
    group = {"tenantName": TENANT, "groupName": "pool", "networkName": "n", "ipPool": "198.18.3.10-198.18.3.11"}
    await netmaster.put_object("endpointGroups", "default:pool", group)
    pooled = [await create(netmaster, f"p{i}", "n", group="pool") for i in range(2)]
    assert [ep["ipAddress"] for ep in pooled] == ["198.18.3.10", "198.18.3.11"]
    assert {ep["endpointGroupKey"] for ep in pooled} == {"pool:default"}
    with pytest.raises(ConflictError, match=r"address exhaustion in pool 198\.18\.3\.10-198\.18\.3\.11"):
        await create(netmaster, "p2", "n", group="pool")
    assert (await create(netmaster, "plain", "n"))["ipAddress"] == "198.18.3.1", "the network allocates around the pool"
    epg = state(store, layout.epg_state(TENANT, "pool"))
    assert epg["epCount"] == 2 and ipam.epg_address_oper(epg)["allocatedIPAddresses"] == "198.18.3.10-198.18.3.11"
    await netmaster.delete_endpoint(delete_request("p0", "n"))
    assert (await create(netmaster, "p3", "n", group="pool"))["ipAddress"] == "198.18.3.10", "a freed pool address is reused"


async def test_overlapping_pools_are_refused(netmaster: Netmaster) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.4.0/24"))
    await netmaster.put_object(
        "endpointGroups", "default:a", {"tenantName": TENANT, "groupName": "a", "networkName": "n", "ipPool": "198.18.4.10-198.18.4.20"}
    )
    with pytest.raises(ConflictError, match="198.18.4.20 is not available"):
        await netmaster.put_object(
            "endpointGroups", "default:b", {"tenantName": TENANT, "groupName": "b", "networkName": "n", "ipPool": "198.18.4.20-198.18.4.30"}
        )


async def test_a_subnet_is_exhausted_then_a_release_makes_room(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.5.0/30"))
    assert [(await create(netmaster, e, "n"))["ipAddress"] for e in ("a", "b")] == ["198.18.5.1", "198.18.5.2"]
    with pytest.raises(ConflictError, match=r"address exhaustion in subnet 198\.18\.5\.0/30"):
        await create(netmaster, "c", "n")
    released = await netmaster.delete_endpoint(delete_request("a", "n"))
    assert released["EndpointConfig"]["ipAddress"] == "198.18.5.1"
    assert store.get_nowait(layout.ep_state("n.default-a")) is None
    assert (await create(netmaster, "c", "n"))["ipAddress"] == "198.18.5.1"
    assert net_state(store, "n")["epCount"] == 2


async def test_ipv6_addresses_follow_the_last_allocated_and_are_released(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:v6", network("v6", "198.18.6.0/24", ipv6Subnet="2001:db8::/125", ipv6Gateway="2001:db8::1"))
    assert [(await create(netmaster, e, "v6"))["ipv6Address"] for e in ("a", "b")] == ["2001:db8::2", "2001:db8::3"]
    assert (await create(netmaster, "s", "v6", ipv6="2001:db8::6"))["ipv6Address"] == "2001:db8::6"
    with pytest.raises(ConflictError, match="ipv6 address 2001:db8::6 is already in use"):
        await create(netmaster, "t", "v6", ipv6="2001:db8::6")
    await netmaster.delete_endpoint(delete_request("a", "v6"))
    assert sorted(net_state(store, "v6")["ipv6AllocMap"]) == ["1", "3", "6"]
    assert [(await create(netmaster, e, "v6"))["ipv6Address"] for e in ("c", "d", "e")] == ["2001:db8::4", "2001:db8::5", "2001:db8::7"]
    assert (await create(netmaster, "f", "v6"))["ipv6Address"] == "2001:db8::2", "allocation wraps to the freed address"
    with pytest.raises(ConflictError, match=r"Reached MaxHosts \(7\)"):
        await create(netmaster, "g", "v6")


async def test_address_only_allocations_for_ipam_drivers(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.7.0/24", "198.18.7.1"))
    assert await netmaster.alloc_address({"NetworkID": "n.default"}) == {"NetworkID": "n.default", "IPv4Address": "198.18.7.2/24"}
    assert await netmaster.alloc_address({"NetworkID": "n.default", "PreferredIPv4Address": "198.18.7.9"}) == {
        "NetworkID": "n.default",
        "IPv4Address": "198.18.7.9/24",
    }
    assert await netmaster.release_address({"NetworkID": "n.default", "IPv4Address": "198.18.7.2/24"}) == "success"
    assert ipam.address_oper(net_state(store, "n"))["allocatedIPAddresses"] == "198.18.7.1, 198.18.7.9"
    with pytest.raises(ValidationError, match="198.18.8.1 is not in network n.default"):
        await netmaster.release_address({"NetworkID": "n.default", "IPv4Address": "198.18.8.1/24"})
    with pytest.raises(ValidationError, match="NetworkID 'n' must be"):
        await netmaster.alloc_address({"NetworkID": "n"})

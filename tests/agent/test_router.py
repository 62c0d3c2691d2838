"""Routing mode's learned routes for the switch: resolved next hops become routes, unresolved
ones are probed and listed as problems, unreadable ones are problems."""

from __future__ import annotations

import ipaddress

from contivd.agent.router import learned_routes
from openflow.inputs import Route


def test_resolved_next_hops_become_routes_and_the_others_wait() -> None:
    learned = {"198.18.20.5/32": "198.18.1.1", "198.18.30.0/24": "198.18.1.9", "2001:db8::/64": "198.18.1.1", "198.18.10.7/32": "fe80::1"}
    routes, problems, unresolved = learned_routes(learned, {"198.18.1.1": "02:bb:00:00:00:01"})
    assert routes == (Route(int(ipaddress.IPv4Address("198.18.20.5")), 32, 0x02BB00000001),)
    assert unresolved == {"198.18.1.9"}
    assert problems == [
        "learned route 198.18.10.7/32 via fe80::1: not an IPv4 route; not installed",
        "learned route 198.18.30.0/24 via 198.18.1.9: the next hop's MAC is not known yet (ARP sent); not installed",
        "learned route 2001:db8::/64 via 198.18.1.1: not an IPv4 route; not installed",
    ]


def test_one_route_per_prefix_whatever_its_spelling() -> None:
    routes, _, _ = learned_routes({"198.18.30.0/24": "198.18.1.1", "198.18.30.7/24": "198.18.1.1"}, {"198.18.1.1": "02:bb:00:00:00:01"})
    assert [r.key for r in routes] == ["198.18.30.0/24"]


def test_nothing_learned_nothing_routed() -> None:
    assert learned_routes({}, {"198.18.1.1": "02:bb:00:00:00:01"}) == ((), [], set())

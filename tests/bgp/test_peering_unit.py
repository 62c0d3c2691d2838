"""The pure half of routing mode's BGP: Bgp objects checked, ExaBGP configuration and API lines,
ExaBGP's JSON messages read back, Contiv's inspect shapes."""

from __future__ import annotations

import json
from ipaddress import IPv4Address, IPv4Interface

import pytest

from contivd.bgp.peering import (
    BgpConfigError,
    Peering,
    RoutesLearned,
    SessionChange,
    bgp_oper,
    exabgp_config,
    inspect_answer,
    local_prefixes,
    parse_message,
    peering_from_object,
    route_commands,
)

GOOD = {"hostname": "n1", "routerip": "198.19.250.2/24", "as": "65001", "neighbor": "198.19.250.1", "neighbor-as": "65000"}
PEERING = Peering("n1", IPv4Interface("198.19.250.2/24"), 65001, IPv4Address("198.19.250.1"), 65000)


def test_a_stored_bgp_object_becomes_a_peering() -> None:
    assert peering_from_object(GOOD) == PEERING
    ranged = peering_from_object({**GOOD, "routerip": "198.19.250.2-9/24"})  # Contiv's a.b.c.d-e/len form
    assert ranged.router_ip == IPv4Interface("198.19.250.2/24")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"as": "AS65001"}, "Bgp n1: as 'AS65001' is not an AS number (1-4294967295)"),
        ({"as": "0"}, "Bgp n1: as '0' is not an AS number"),
        ({"neighbor-as": "4294967296"}, "Bgp n1: neighbor-as '4294967296' is not an AS number"),
        ({"neighbor-as": ""}, "Bgp n1: neighbor-as '' is not an AS number"),
        ({"neighbor": ""}, "Bgp n1: no neighbor address"),
        ({"neighbor": "198.19.250.300"}, "Bgp n1: neighbor '198.19.250.300' is not an IPv4 address"),
        ({"neighbor": "198.19.250.2"}, "Bgp n1: neighbor 198.19.250.2 is this node's own router address"),
        ({"routerip": "198.19.250.2"}, "Bgp n1: routerip '198.19.250.2' is not an IPv4 address with a prefix length"),
    ],
)
def test_an_unusable_bgp_object_says_which_field_and_why(change: dict[str, str], message: str) -> None:
    with pytest.raises(BgpConfigError) as caught:
        peering_from_object({**GOOD, **change})
    assert str(caught.value).startswith(message)


def test_exabgp_config_names_the_peering_and_the_relay() -> None:
    text = exabgp_config(PEERING, ("/usr/bin/python3", "/x/relay.py", "/run/s.sock"), 9)
    assert "run /usr/bin/python3 /x/relay.py /run/s.sock;" in text
    for line in (
        "neighbor 198.19.250.1 {",
        "router-id 198.19.250.2;",
        "local-address 198.19.250.2;",
        "local-as 65001;",
        "peer-as 65000;",
        "hold-time 9;",
    ):
        assert line in text


def test_the_node_advertises_the_32s_of_its_own_endpoints() -> None:
    endpoints = [("n1", "198.18.5.2"), ("n2", "198.18.5.3"), ("n1", "198.18.6.9"), ("n1", "")]
    assert local_prefixes(endpoints, "n1") == {"198.18.5.2/32", "198.18.6.9/32"}


def test_route_commands_withdraw_first_then_announce() -> None:
    assert route_commands(frozenset({"198.18.5.2/32", "198.18.5.4/32"}), frozenset({"198.18.5.4/32", "198.18.5.9/32"})) == [
        "withdraw route 198.18.5.2/32 next-hop self",
        "announce route 198.18.5.9/32 next-hop self",
    ]
    assert route_commands(frozenset({"198.18.5.4/32"}), frozenset({"198.18.5.4/32"})) == []


def _exabgp(kind: str, **neighbor: object) -> str:
    base = {"address": {"local": "198.19.250.2", "peer": "198.19.250.1"}, "asn": {"local": 65001, "peer": 65000}}
    return json.dumps({"exabgp": "5.0.0", "type": kind, "neighbor": {**base, **neighbor}})


def _update(as_path: list[int], announce: dict[str, list[str]] | None = None, withdraw: list[str] | None = None) -> str:
    update: dict[str, object] = {"attribute": {"origin": "igp", "as-path": {"0": {"element": "as-sequence", "value": as_path}}}}
    if announce:
        update["announce"] = {"ipv4 unicast": {hop: [{"nlri": p} for p in prefixes] for hop, prefixes in announce.items()}}
    if withdraw:
        update["withdraw"] = {"ipv4 unicast": [{"nlri": p} for p in withdraw]}
    return _exabgp("update", direction="receive", message={"update": update})


def test_exabgp_messages_are_read_back() -> None:
    assert parse_message(_exabgp("state", state="up"), 65001) == SessionChange("198.19.250.1", "up")
    learned = parse_message(_update([65000, 65002], announce={"198.19.250.1": ["198.18.9.0/24"]}), 65001)
    assert learned == RoutesLearned("198.19.250.1", {"198.18.9.0/24": "198.19.250.1"}, frozenset())
    gone = parse_message(_update([], withdraw=["198.18.9.0/24"]), 65001)
    assert gone == RoutesLearned("198.19.250.1", {}, frozenset({"198.18.9.0/24"}))


def test_lines_that_change_nothing_are_ignored() -> None:
    assert parse_message("done", 65001) is None  # ExaBGP's acknowledgement of a command
    assert parse_message(_exabgp("keepalive"), 65001) is None
    reflected = _update([65000, 65001], announce={"198.19.250.1": ["198.18.77.5/32"]})  # our own route, sent back by the ToR
    assert parse_message(reflected, 65001) is None


def test_inspect_answers_carry_contivs_shapes() -> None:
    answer = inspect_answer(PEERING, "up", {"198.18.9.0/24": "198.19.250.1"})
    state = answer["Peers"][0]["State"]
    assert (state["NeighborAddress"], state["PeerAs"], state["SessionState"], state["AdminState"]) == ("198.19.250.1", 65000, "established", "up")
    assert answer["Dsts"] == ["198.18.9.0/24"]
    assert bgp_oper(answer) == {"neighborStatus": "established", "adminStatus": "up", "routes": ["198.18.9.0/24"], "numRoutes": 1}
    assert inspect_answer(None, "idle", {}, "Bgp n1: no neighbor address") == {"Peers": [], "Dsts": [], "Error": "Bgp n1: no neighbor address"}
    assert bgp_oper({"Peers": [], "Dsts": []}) == {}

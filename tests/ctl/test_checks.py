"""netctl's client-side refusals (checks.py): the message netctl logs for each bad input, or none."""

from __future__ import annotations

from typing import Any

import pytest

from contivd.ctl import checks

RULE_DEFAULTS = {"direction": "in", "priority": 1, "action": "allow"}


@pytest.mark.parametrize(
    "flags, message",
    [
        ({}, None),
        ({"gateway": "198.18.0.1", "gatewayv6": "2001:db8::1"}, None),
        ({"gateway": "198.18.0.300"}, "Invalid gateway - Enter in A.B.C.D format"),
        ({"gateway": "198.18.0.0/24"}, "Invalid gateway - Enter in A.B.C.D format"),
        ({"gatewayv6": "bogus"}, "Invalid IPv6 gateway "),
    ],
)
def test_network(flags: dict[str, Any], message: str | None) -> None:
    assert checks.network(flags) == message


@pytest.mark.parametrize(
    "flags, message",
    [
        ({}, None),
        ({"from_group": "g", "from_ip_address": "198.18.0.0/15"}, None),
        ({"to_group": "g"}, "Cant specify to-group for incoming rule"),
        ({"to_network": "n", "to_group": "g"}, "Cant specify to-group for incoming rule"),
        ({"to_network": "n"}, "Cant specify to-network for incoming rule"),
        ({"from_group": "g", "from_network": "n"}, "Can't specify both from-group argument and -from-network "),
        ({"direction": "out", "to_group": "g", "to_ip_address": "198.18.0.1"}, None),
        ({"direction": "out", "from_group": "g"}, "Cant specify from-group for outgoing rule"),
        ({"direction": "out", "from_network": "n"}, "Cant specify from-network for outgoing rule"),
        ({"direction": "out", "from_ip_address": "198.18.0.0/15"}, "Cant specify from-ip-address for outgoing rule"),
        ({"direction": "out", "to_group": "g", "to_network": "n"}, "Can't specify both -to-group and -to-network"),
        ({"direction": "both"}, "Unknown direction"),
    ],
)
def test_rule(flags: dict[str, Any], message: str | None) -> None:
    assert checks.rule({**RULE_DEFAULTS, **flags}) == message


BGP = {"router_ip": "198.19.1.10/24", "as": "65001", "neighbor_as": "65002", "neighbor": "198.19.1.1"}


@pytest.mark.parametrize(
    "flags, message",
    [
        ({}, None),
        ({"router_ip": "198.19.1.10"}, "Wrong CIDR format. Enter in x.x.x.x/len format"),
        ({"router_ip": None}, "Wrong CIDR format. Enter in x.x.x.x/len format"),
        ({"neighbor": "198.19.1.1/32"}, "Wrong IP format. Enter in x.x.x.x format"),
        ({"as": None}, "Missing attributes"),
        ({"neighbor_as": ""}, "Missing attributes"),
    ],
)
def test_bgp(flags: dict[str, Any], message: str | None) -> None:
    assert checks.bgp({**BGP, **flags}) == message


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"provided": "provided", "contract": ("uni/x",)}, None),
        ({"consumed": "consumed", "contract": ("uni/x",)}, None),
        ({"provided": "provided", "consumed": "consumed", "contract": ("uni/x",)}, "Cannot use both provided and consumed"),
        ({"contract": ("uni/x",)}, "Either provided or consumed must be specified"),
        ({"provided": "provided", "contract": ()}, "Contracts not provided"),
    ],
)
def test_external_contracts(flags: dict[str, Any], message: str | None) -> None:
    assert checks.external_contracts(flags) == message

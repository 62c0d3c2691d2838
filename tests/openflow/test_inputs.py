"""Builder inputs from store-shaped state."""

from __future__ import annotations

import pytest

from openflow.inputs import (
    Backend,
    InputError,
    LocalPort,
    NetworkRef,
    ServicePort,
    bandwidth_kbps,
)
from tests.openflow.scenario import BLUE, DB1, DB_EPG, SERVICE_LB, WEB2, local_of, remote_of, service_of


def test_local_port_carries_network_epg_and_netprofile() -> None:
    port = local_of(DB1, BLUE, DB_EPG, 4)
    assert port == LocalPort(4, "blue.t-db1", 0xC6130A03, 0x0202C6130A03, NetworkRef("blue.t", "vxlan", 1, 100), 6, 46, 10_000, 64)
    assert port.network.tag == 100


def test_remote_vxlan_endpoint_needs_a_vtep() -> None:
    assert remote_of(WEB2, BLUE, "198.19.254.2").vtep == 0xC613FE02
    with pytest.raises(InputError, match="endpoint blue.t-web2: a vxlan endpoint needs"):
        remote_of(WEB2, BLUE)


def test_service_spec() -> None:
    spec = service_of(SERVICE_LB)
    backends = (Backend(0xC6130A02, 8080), Backend(0xC6130A09, 8080))
    assert (spec.vip, spec.ports, spec.affinity_timeout) == (0xC6130AFA, (ServicePort(6, 80, backends),), 0)
    with pytest.raises(InputError, match="service web:t: port '80:TCP'"):
        service_of({**SERVICE_LB, "ports": ["80:TCP"]})


@pytest.mark.parametrize("text, kbps", [("", 0), ("10Mbps", 10_000), ("500 kbps", 500), ("1g", 1_000_000)])
def test_bandwidth(text: str, kbps: int) -> None:
    assert bandwidth_kbps(text, "x") == kbps


@pytest.mark.parametrize(
    "ep, net, message",
    [
        ({**DB1, "macAddress": "zz"}, BLUE, "'zz' is not a MAC address"),
        ({**DB1, "ipAddress": ""}, BLUE, "'' is not an IPv4 address"),
        (DB1, {**BLUE, "pktTagType": "gre"}, "pktTagType 'gre'"),
        (DB1, {**BLUE, "extPktTag": 0}, "out of range"),
    ],
)
def test_bad_state_is_named(ep: dict[str, object], net: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        local_of(ep, net, DB_EPG, 4)

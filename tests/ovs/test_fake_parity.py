"""One scenario run against the real OvsdbappBridge and the in-memory FakeOvsBridge: both must
produce the same transcript, so unit tests written against the fake hold on real OVS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contivd.ovs import (
    BridgeSpec,
    ManagedOvs,
    OvsBridge,
    OvsError,
    PortKind,
    PortSpec,
    open_ovsdb,
)
from contivd.ovs.testing import FakeOvsdb

pytestmark = pytest.mark.ovs


async def _scenario(bridge: Callable[[str], OvsBridge]) -> list[Any]:
    br, other = bridge("cvpa"), bridge("cvpb")
    out: list[Any] = []
    for b in (br, other, br):
        await b.ensure_bridge()
    out.append(await br.ensure_port(PortSpec("cvp1", PortKind.INTERNAL, external_ids={"contiv-endpoint": "ep-1"})))
    out.append(await br.ensure_port(PortSpec("cvp2", PortKind.INTERNAL)))
    out.append(await br.ensure_port(PortSpec.vxlan("cvx1", "198.18.0.9", external_ids={"contiv-vtep": "198.18.0.9"})))
    out.append(await br.ensure_port(PortSpec("cvp1", PortKind.INTERNAL, external_ids={"contiv-network": "n1"})))
    out.append(await other.ensure_port(PortSpec("cvq1", PortKind.INTERNAL)))
    await br.set_port_external_ids("cvp2", {"contiv-endpoint": "ep-2"})
    out.append(await br.get_port_external_ids("cvp1"))
    await br.set_ingress_policing("cvp2", 5_000, 500)
    out.append(await br.list_ports())
    await br.remove_port("cvx1")
    await br.remove_port("cvx1")
    out.append([p.name for p in await br.list_ports()])
    for attempt in (
        lambda: br.get_port_external_ids("cvnone"),
        lambda: br.ensure_port(PortSpec("cvq1", PortKind.INTERNAL)),
        lambda: br.set_ingress_policing("cvp1", -1, 0),
    ):
        with pytest.raises(OvsError) as failure:
            await attempt()
        out.append(str(failure.value).split(":")[0])  # "bridge cvpa port <name>"
    await other.delete_bridge()
    out.append([p.name for p in await br.list_ports()])
    return out


async def test_fake_and_real_bridge_agree(ovs: ManagedOvs) -> None:
    async with open_ovsdb(ovs.db_socket) as db:
        real = await _scenario(lambda name: db.bridge(BridgeSpec(name, datapath_type=ovs.datapath_type)))
    fake_db = FakeOvsdb()
    fake = await _scenario(lambda name: fake_db.bridge(BridgeSpec(name)))
    assert fake == real

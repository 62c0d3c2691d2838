"""OvsdbappBridge on real Open vSwitch (userspace datapath): bridge settings, ports of every kind,
external_ids, ofports, policing, idempotence and errors that name the bridge and port."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

import pytest

from contivd.ovs import BridgeSpec, ManagedOvs, OvsError, PortKind, PortSpec, open_ovsdb

from .helpers import sh, vsctl

pytestmark = pytest.mark.ovs

CONTROLLER = "tcp:127.0.0.1:6653"


def _get(ovs: ManagedOvs, table: str, record: str, column: str) -> str:
    return vsctl(ovs, "--no-wait", "get", table, record, column)


async def test_bridge_is_created_with_contiv_settings_idempotently(ovs: ManagedOvs, run_id: str) -> None:
    name = f"cvb{run_id}"
    async with open_ovsdb(ovs.db_socket) as db:
        br = db.bridge(BridgeSpec(name, datapath_type=ovs.datapath_type, controller=CONTROLLER))
        await br.ensure_bridge()
        controller_row = vsctl(ovs, "--no-wait", "get", "Bridge", name, "controller")
        await br.ensure_bridge()  # unchanged controller: same row, so the OpenFlow session is kept
        assert vsctl(ovs, "--no-wait", "get", "Bridge", name, "controller") == controller_row
        assert _get(ovs, "Bridge", name, "datapath_type") == ovs.datapath_type
        assert _get(ovs, "Bridge", name, "fail_mode") == "secure"
        assert _get(ovs, "Bridge", name, "protocols") == "[OpenFlow13]"
        assert _get(ovs, "Bridge", name, "other_config:disable-in-band") == '"true"'
        assert vsctl(ovs, "--no-wait", "get-controller", name) == CONTROLLER
        # The bridge answers OpenFlow 1.3 on its management socket in the private run dir.
        assert "OF1.3" in sh("ovs-ofctl", "-O", "OpenFlow13", "show", ovs.management_socket(name))

        await db.bridge(BridgeSpec(name, datapath_type=ovs.datapath_type)).ensure_bridge()
        assert vsctl(ovs, "--no-wait", "get-controller", name) == ""

        await br.delete_bridge()
        await br.delete_bridge()
        assert name not in vsctl(ovs, "list-br").split()


async def test_ports_external_ids_ofports_and_policing(ovs: ManagedOvs, run_id: str, make_veth: Callable[..., tuple[str, str]]) -> None:
    host_end, _ = make_veth("a", netns=ovs.netns)
    uplink, _ = make_veth("u", netns=ovs.netns)
    internal, tunnel = f"cvi{run_id}", f"cvx{run_id}"
    async with open_ovsdb(ovs.db_socket) as db:
        br = db.bridge(BridgeSpec(f"cvb{run_id}", datapath_type=ovs.datapath_type, controller=CONTROLLER))
        await br.ensure_bridge()
        owner = {"contiv-endpoint": "ep-1", "contiv-network": "default-net"}
        ofports = {
            host_end: await br.ensure_port(PortSpec(host_end, PortKind.SYSTEM, external_ids=owner)),
            uplink: await br.ensure_port(PortSpec(uplink, PortKind.SYSTEM, external_ids={"contiv-uplink": "true"})),
            internal: await br.ensure_port(PortSpec(internal, PortKind.INTERNAL)),
            tunnel: await br.ensure_port(PortSpec.vxlan(tunnel, "198.18.0.2", external_ids={"contiv-vtep": "198.18.0.2"})),
        }
        assert all(n > 0 for n in ofports.values()) and len(set(ofports.values())) == 4

        # Idempotent: repeating an ensure keeps the ofport; a changed remote VTEP is applied in place.
        assert await br.ensure_port(PortSpec(host_end, PortKind.SYSTEM, external_ids=owner)) == ofports[host_end]
        assert await br.ensure_port(PortSpec.vxlan(tunnel, "198.18.0.3")) == ofports[tunnel]
        tos = PortSpec(tunnel, PortKind.VXLAN, {"remote_ip": "198.18.0.3", "key": "flow", "tos": "inherit"})
        await br.ensure_port(tos)
        assert await br.ensure_port(PortSpec.vxlan(tunnel, "198.18.0.3")) == ofports[tunnel]  # drops tos again

        await br.set_port_external_ids(host_end, {"contiv-attempt": "2"})
        assert await br.get_port_external_ids(host_end) == {**owner, "contiv-attempt": "2"}
        await br.set_ingress_policing(host_end, 10_000, 1_000)

        ports = {p.name: p for p in await br.list_ports()}
        assert {name: p.ofport for name, p in ports.items()} == ofports
        assert ports[tunnel].kind is PortKind.VXLAN
        assert ports[tunnel].options == {"remote_ip": "198.18.0.3", "key": "flow"}
        assert ports[internal].kind is PortKind.INTERNAL and ports[uplink].kind is PortKind.SYSTEM
        assert ports[tunnel].external_ids == {"contiv-vtep": "198.18.0.2"}
        assert (ports[host_end].ingress_policing_rate_kbps, ports[host_end].ingress_policing_burst_kb) == (10_000, 1_000)
        assert _get(ovs, "Interface", host_end, "ingress_policing_rate") == "10000"

        # The OpenFlow view agrees with OVSDB's ofports.
        desc = sh("ovs-ofctl", "-O", "OpenFlow13", "dump-ports-desc", ovs.management_socket(br.name))
        for name, number in ofports.items():
            assert f" {number}({name[:15]})" in desc

        await br.remove_port(tunnel)
        await br.remove_port(tunnel)
        assert tunnel not in {p.name for p in await br.list_ports()}
        assert br.statistics().errors == 0


async def test_errors_name_the_bridge_and_port(ovs: ManagedOvs, run_id: str) -> None:
    async with open_ovsdb(ovs.db_socket) as db:
        br = db.bridge(BridgeSpec(f"cvb{run_id}", datapath_type=ovs.datapath_type))
        other = db.bridge(BridgeSpec(f"cvo{run_id}", datapath_type=ovs.datapath_type))
        await br.ensure_bridge()
        await other.ensure_bridge()

        missing = f"cvm{run_id}"
        with pytest.raises(OvsError, match=f"bridge {br.name}.*{missing}.*No such device"):
            await br.ensure_port(PortSpec(missing, PortKind.SYSTEM))
        await br.remove_port(missing)

        with pytest.raises(OvsError, match=f"bridge {br.name} port {missing}"):
            await br.get_port_external_ids(missing)
        with pytest.raises(OvsError, match=f"bridge {br.name} port {missing}"):
            await br.set_ingress_policing(missing, 100, 10)

        internal = f"cvi{run_id}"
        await other.ensure_port(PortSpec(internal, PortKind.INTERNAL))
        with pytest.raises(OvsError, match=f"bridge {br.name} port {internal}: the port is on bridge {other.name}"):
            await br.ensure_port(PortSpec(internal, PortKind.INTERNAL))
        assert br.statistics().errors == 4


async def test_a_stalled_vswitchd_is_one_ovs_error_and_no_ovsdbapp_traceback(ovs: ManagedOvs, run_id: str, caplog: pytest.LogCaptureFixture) -> None:
    """ovsdbapp's ovs-vsctl-style transactions wait for ovs-vswitchd to apply each commit and log
    `Post-commit checks failed` with a traceback at ERROR when it does not in time (a busy or
    still-starting vswitchd: every start of the packaged unit logged one). contivd's transactions
    do not wait there: the ofport wait after them reports the same condition once, as OvsError."""
    vswitchd = int((ovs.run_dir / "ovs-vswitchd.pid").read_text())
    os.kill(vswitchd, signal.SIGSTOP)
    try:
        async with open_ovsdb(ovs.db_socket, timeout_s=2) as db:
            with pytest.raises(OvsError, match="not attached by ovs-vswitchd within"):
                await db.bridge(BridgeSpec(f"cvs{run_id}", datapath_type=ovs.datapath_type)).ensure_bridge()
    finally:
        os.kill(vswitchd, signal.SIGCONT)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors]

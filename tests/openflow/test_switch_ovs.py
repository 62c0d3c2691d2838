"""The OpenFlow channel against a real ovs-vswitchd (userspace datapath)."""

from __future__ import annotations

import re
import signal
import struct

import pytest
import trio

from fastpath import (
    Command,
    FlowSpec,
    Output,
    SetField,
    encode_bundle,
    encode_flow_mods,
)
from openflow._ofp import SwitchError
from openflow.switch import (
    Controller,
    SwitchConnected,
    SwitchConnection,
    SwitchDisconnected,
)
from tests.openflow.ovs_fixture import Ovs, fixture_ovs, fixture_ovs_instance  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ovs

TIMEOUT_S = 15
COOKIE = 0x00C0_FFEE_0000_0000
OFPP_ANY = 0xFFFFFFFF  # not a valid output port: OVS rejects it with OFPBAC_BAD_OUT_PORT
OFPP_CONTROLLER = 0xFFFFFFFD


def good_flows() -> list[FlowSpec]:
    return [
        FlowSpec(table=0, priority=100, cookie=COOKIE | 1, eth_type=0x0800, ipv4_dst=(0xC6120005, 32),
                 apply=(SetField("eth_dst", 0x0A0000000005),), goto_table=10),
        FlowSpec(table=0, priority=0, cookie=COOKIE | 2),
        FlowSpec(table=10, priority=200, cookie=COOKIE | 3, eth_type=0x0800, ip_proto=6, tp_dst=(80, 80),
                 apply=(Output(OFPP_CONTROLLER),)),
    ]  # fmt: skip


def ofctl_flows(ovs: Ovs, bridge: str) -> list[str]:
    """``ovs-ofctl dump-flows`` lines with the volatile counters removed."""
    text = ovs.ofctl("dump-flows", ovs.mgmt(bridge))
    lines = [line.strip() for line in text.splitlines() if "cookie=" in line]
    return sorted(re.sub(r" (duration|n_packets|n_bytes)=[^,]*,", "", line) for line in lines)


async def start(nursery: trio.Nursery, echo_interval: float = 5.0, echo_timeout: float = 10.0) -> Controller:
    controller = Controller("127.0.0.1", 0, echo_interval=echo_interval, echo_timeout=echo_timeout)
    await nursery.start(controller.run)
    return controller


async def connect(ovs: Ovs, controller: Controller) -> tuple[str, SwitchConnection]:
    bridge = await trio.to_thread.run_sync(ovs.add_bridge, controller.port)
    dpid = await trio.to_thread.run_sync(ovs.datapath_id, bridge)
    with trio.fail_after(TIMEOUT_S):
        return bridge, await controller.wait_connected(dpid)


async def test_two_bridges_connect_with_their_datapath_ids(ovs: Ovs) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start(nursery)
        first, conn1 = await connect(ovs, controller)
        second, conn2 = await connect(ovs, controller)
        assert conn1.datapath_id == ovs.datapath_id(first)
        assert conn2.datapath_id == ovs.datapath_id(second)
        assert {conn1.datapath_id, conn2.datapath_id} <= set(controller.statistics().connected)
        nursery.cancel_scope.cancel()


async def test_bundle_installs_flows_and_dump_flows_reads_them_back(ovs: Ovs) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start(nursery)
        bridge, conn = await connect(ovs, controller)
        await conn.send_bundle(encode_bundle(good_flows(), bundle_id=7, xid=1))

        lines = ofctl_flows(ovs, bridge)
        assert lines == sorted([
            (
                "cookie=0xc0ffee00000001, table=0, priority=100,ip,nw_dst=198.18.0.5 "
                "actions=set_field:0a:00:00:00:00:05->eth_dst,goto_table:10"
            ),
            "cookie=0xc0ffee00000002, table=0, priority=0 actions=drop",
            "cookie=0xc0ffee00000003, table=10, priority=200,tcp,tp_dst=80 actions=CONTROLLER:65509",
        ])  # fmt: skip

        records = await conn.dump_flows()
        assert {(r.table, r.priority, r.cookie) for r in records} == {
            (0, 100, COOKIE | 1), (0, 0, COOKIE | 2), (10, 200, COOKIE | 3)
        }  # fmt: skip
        by_cookie = {r.cookie: r for r in records}
        assert dict(by_cookie[COOKIE | 1].match) == {"eth_type": 0x0800, "ipv4_dst": "198.18.0.5"}
        assert dict(by_cookie[COOKIE | 3].match) == {"eth_type": 0x0800, "ip_proto": 6, "tcp_dst": 80}
        assert by_cookie[COOKIE | 2].instructions == ()
        assert len(by_cookie[COOKIE | 1].instructions) == 2

        only_table_10 = await conn.dump_flows(table=10)
        assert [r.cookie for r in only_table_10] == [COOKIE | 3]
        by_cookie_filter = await conn.dump_flows(cookie=COOKIE | 2)
        assert [r.cookie for r in by_cookie_filter] == [COOKIE | 2]
        masked = await conn.dump_flows(cookie=COOKIE, cookie_mask=0xFFFFFFFF00000000)
        assert len(masked) == 3
        nursery.cancel_scope.cancel()


async def test_bad_flow_fails_the_bundle_and_leaves_nothing(ovs: Ovs) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start(nursery)
        bridge, conn = await connect(ovs, controller)
        bad = FlowSpec(table=0, priority=50, cookie=COOKIE | 9, apply=(Output(OFPP_ANY),))
        batch = [*good_flows()[:2], bad, good_flows()[2]]
        with pytest.raises(SwitchError) as caught:
            await conn.send_bundle(encode_bundle(batch, bundle_id=1))
        # The error names the failed bundle-add, and its data holds the offending flow-mod
        # (bundle-add header 24 bytes + flow-mod header 8: the cookie is at 32).
        assert caught.value.request == "ONF_BUNDLE_ADD"
        assert "OFPBAC_BAD_OUT_PORT" in str(caught.value)
        assert struct.unpack_from("!Q", caught.value.data, 32)[0] == COOKIE | 9
        # Open vSwitch would commit the other three flows here (it drops only the failed
        # add); the channel's barrier-before-commit makes it discard the whole bundle.
        assert ofctl_flows(ovs, bridge) == []
        assert await conn.dump_flows() == []

        # The connection is still usable, and so is a later good bundle.
        await conn.send_bundle(encode_bundle(good_flows(), bundle_id=1))
        assert len(await conn.dump_flows()) == 3
        nursery.cancel_scope.cancel()


async def test_bare_flow_mods_report_the_failing_one(ovs: Ovs) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start(nursery)
        bridge, conn = await connect(ovs, controller)
        await conn.send_flow_mods(encode_flow_mods(good_flows()))
        await conn.barrier()
        assert len(ofctl_flows(ovs, bridge)) == 3
        bad = FlowSpec(table=3, priority=1, apply=(Output(OFPP_ANY),))
        with pytest.raises(SwitchError, match="FLOW_MOD xid=.*OFPBAC_BAD_OUT_PORT"):
            await conn.send_flow_mods(encode_flow_mods([bad]))
        await conn.send_flow_mods(encode_flow_mods(good_flows(), Command.DELETE_STRICT))
        assert ofctl_flows(ovs, bridge) == []
        nursery.cancel_scope.cancel()


async def test_vswitchd_restart_produces_disconnect_then_reconnect(ovs: Ovs) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start(nursery)
        with controller.subscribe() as events:
            _, conn = await connect(ovs, controller)
            with trio.fail_after(TIMEOUT_S):
                first = await events.receive()
            assert isinstance(first, SwitchConnected) and first.datapath_id == conn.datapath_id

            await trio.to_thread.run_sync(lambda: ovs.stop("ovs-vswitchd", sig=signal.SIGKILL))
            with trio.fail_after(TIMEOUT_S):
                gone = await events.receive()
            assert isinstance(gone, SwitchDisconnected) and gone.datapath_id == conn.datapath_id
            assert conn.closed

            await trio.to_thread.run_sync(ovs.start_vswitchd)
            with trio.fail_after(TIMEOUT_S):
                back = await events.receive()
            assert isinstance(back, SwitchConnected) and back.datapath_id == conn.datapath_id
            assert back.connection is not conn
            # The new connection works; the restarted switch lost its flows (why we reconcile).
            await back.connection.barrier()
            assert await back.connection.dump_flows() == []
        nursery.cancel_scope.cancel()


async def test_echo_keeps_an_idle_connection_alive(ovs: Ovs) -> None:
    async with trio.open_nursery() as nursery:
        controller = await start(nursery, echo_interval=0.05, echo_timeout=0.5)
        _, conn = await connect(ovs, controller)
        with trio.fail_after(TIMEOUT_S):
            while conn.statistics().echo_replies_received < 5:
                await trio.sleep(0.02)
        stats = conn.statistics()
        assert not conn.closed and stats.last_echo_rtt is not None and stats.last_echo_rtt < 0.5
        assert controller.statistics().connected == (conn.datapath_id,)
        nursery.cancel_scope.cancel()

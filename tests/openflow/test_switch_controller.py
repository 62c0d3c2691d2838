"""The trio Controller against a scripted fake switch on loopback (no OVS, no root)."""

from __future__ import annotations

import struct

import pytest
import trio
from os_ken.ofproto import ofproto_v1_3 as ofp  # type: ignore[import-untyped]

from openflow._ofp import ConnectionClosed
from openflow.switch import Controller, SwitchConnected, SwitchDisconnected
from tests.openflow.test_switch_session import DPID, HEADER, features_reply, hello, msg

TIMEOUT_S = 5


class ScriptedSwitch:
    """Just enough of a switch on the wire: reads whole messages, answers what a test tells it to (the flow
    pipeline's model is tests/support/fakeswitch.py's FakeSwitch)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = bytearray()

    @classmethod
    async def connect(cls, port: int) -> ScriptedSwitch:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def receive(self) -> tuple[int, int, bytes]:
        """(type, xid, message) of the next message; (-1, -1, b"") at EOF."""
        while True:
            if len(self.buf) >= 8:
                _, type_, length, xid = HEADER.unpack_from(self.buf)
                if len(self.buf) >= length:
                    message = bytes(self.buf[:length])
                    del self.buf[:length]
                    return type_, xid, message
            data = await self.stream.receive_some(65536)
            if not data:
                return -1, -1, b""
            self.buf += data

    async def handshake(self) -> None:
        assert (await self.receive())[0] == ofp.OFPT_HELLO
        await self.stream.send_all(hello(4))
        type_, xid, _ = await self.receive()
        assert type_ == ofp.OFPT_FEATURES_REQUEST
        await self.stream.send_all(features_reply(xid))


async def started(nursery: trio.Nursery, echo_interval: float = 5.0, echo_timeout: float = 10.0) -> Controller:
    controller = Controller("127.0.0.1", 0, echo_interval=echo_interval, echo_timeout=echo_timeout)
    await nursery.start(controller.run)
    return controller


async def test_silent_switch_is_probed_then_dropped() -> None:
    async with trio.open_nursery() as nursery:
        controller = await started(nursery, echo_interval=0.1, echo_timeout=0.2)
        with controller.subscribe() as events, trio.fail_after(TIMEOUT_S):
            switch = await ScriptedSwitch.connect(controller.port)
            await switch.handshake()
            assert isinstance(await events.receive(), SwitchConnected)
            assert (await switch.receive())[0] == ofp.OFPT_ECHO_REQUEST  # and never answered
            gone = await events.receive()
            assert isinstance(gone, SwitchDisconnected) and gone.datapath_id == DPID
            assert "ConnectionTimeout" in gone.reason
            assert (await switch.receive())[0] == -1  # the controller closed the socket
        assert controller.statistics().connected == ()
        nursery.cancel_scope.cancel()


async def test_switch_answering_echo_stays_connected() -> None:
    async with trio.open_nursery() as nursery:
        controller = await started(nursery, echo_interval=0.05, echo_timeout=0.1)
        with trio.fail_after(TIMEOUT_S):
            switch = await ScriptedSwitch.connect(controller.port)
            await switch.handshake()
            for _ in range(5):  # five probes, well past interval + timeout
                type_, xid, _ = await switch.receive()
                assert type_ == ofp.OFPT_ECHO_REQUEST
                await switch.stream.send_all(msg(ofp.OFPT_ECHO_REPLY, xid))
        [stats] = controller.statistics().switches
        assert stats.echo_replies_received >= 4 and controller.statistics().connected == (DPID,)
        nursery.cancel_scope.cancel()


async def test_version_mismatch_is_refused_and_recorded() -> None:
    async with trio.open_nursery() as nursery:
        controller = await started(nursery)
        with trio.fail_after(TIMEOUT_S):
            switch = await ScriptedSwitch.connect(controller.port)
            await switch.receive()
            await switch.stream.send_all(hello(1))
            type_, _, error = await switch.receive()
            assert type_ == ofp.OFPT_ERROR and struct.unpack_from("!H", error, 8)[0] == ofp.OFPET_HELLO_FAILED
            assert (await switch.receive())[0] == -1
        stats = controller.statistics()
        assert stats.handshake_failures == 1 and stats.last_failure is not None
        assert "VersionMismatch" in stats.last_failure and "OpenFlow13" in stats.last_failure
        nursery.cancel_scope.cancel()


async def test_pending_request_fails_when_the_switch_goes_away() -> None:
    async with trio.open_nursery() as nursery:
        controller = await started(nursery)
        with trio.fail_after(TIMEOUT_S):
            switch = await ScriptedSwitch.connect(controller.port)
            await switch.handshake()
            connection = await controller.wait_connected(DPID)

            async def close_after_barrier_request() -> None:
                assert (await switch.receive())[0] == ofp.OFPT_BARRIER_REQUEST
                await switch.stream.aclose()

            nursery.start_soon(close_after_barrier_request)
            with pytest.raises(ConnectionClosed):
                await connection.barrier()
            assert connection.closed
            with pytest.raises(ConnectionClosed):
                await connection.barrier()
        nursery.cancel_scope.cancel()


async def test_reconnect_of_same_datapath_replaces_the_old_connection() -> None:
    async with trio.open_nursery() as nursery:
        controller = await started(nursery)
        with trio.fail_after(TIMEOUT_S):
            old = await ScriptedSwitch.connect(controller.port)
            await old.handshake()
            first = await controller.wait_connected()
            with controller.subscribe() as events:
                replayed = await events.receive()  # subscribing replays the live connection
                assert isinstance(replayed, SwitchConnected) and replayed.connection is first
                new = await ScriptedSwitch.connect(controller.port)
                await new.handshake()
                assert isinstance(await events.receive(), SwitchDisconnected)
                back = await events.receive()
                assert isinstance(back, SwitchConnected) and back.connection is not first
            assert first.closed and controller.connection(DPID) is back.connection
            assert (await old.receive())[0] == -1
        nursery.cancel_scope.cancel()


async def test_packet_in_reaches_the_shared_channel() -> None:
    async with trio.open_nursery() as nursery:
        controller = await started(nursery)
        with trio.fail_after(TIMEOUT_S):
            switch = await ScriptedSwitch.connect(controller.port)
            await switch.handshake()
            await controller.wait_connected(DPID)
            empty_match = struct.pack("!HH4x", 1, 4)
            body = struct.pack("!IHBBQ", ofp.OFP_NO_BUFFER, 3, 0, 0, 0) + empty_match + b"\x00\x00abc"
            await switch.stream.send_all(msg(ofp.OFPT_PACKET_IN, 0, body))
            event = await controller.packet_ins().receive()
        assert event.datapath_id == DPID and event.message.data == b"abc"
        nursery.cancel_scope.cancel()

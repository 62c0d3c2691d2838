"""The sans-IO OpenFlow session: protocol rules without sockets, clocks or a switch."""

from __future__ import annotations

import struct

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp  # type: ignore[import-untyped]
from os_ken.ofproto import ofproto_v1_3_parser as parser

from fastpath import FlowSpec, Output, encode_bundle, encode_flow_mods, split_messages
from openflow._ofp import (
    ConnectionClosed,
    ConnectionTimeout,
    OpenFlowError,
    PacketIn,
    ProtocolError,
    Ready,
    RequestDone,
    RequestFailed,
    Session,
    State,
    SwitchError,
    VersionMismatch,
    flow_records,
)

HEADER = struct.Struct("!BBHI")
DPID = 0x0000_1234_5678_9ABC
ONF = 0x4F4E4600


def msg(type_: int, xid: int, body: bytes = b"", version: int = 4) -> bytes:
    return HEADER.pack(version, type_, HEADER.size + len(body), xid) + body


def hello(version: int = 4, bitmap: int | None = None) -> bytes:
    body = b"" if bitmap is None else struct.pack("!HHI", 1, 8, bitmap)
    return msg(ofp.OFPT_HELLO, 1, body, version)


def features_reply(xid: int) -> bytes:
    return msg(ofp.OFPT_FEATURES_REPLY, xid, struct.pack("!QIBB2xII", DPID, 0, 254, 0, 0, 0))


def error(xid: int, type_: int, code: int, failed: bytes) -> bytes:
    return msg(ofp.OFPT_ERROR, xid, struct.pack("!HH", type_, code) + failed[:64])


def bundle_reply(xid: int, bundle_id: int, control: int) -> bytes:
    return msg(ofp.OFPT_EXPERIMENTER, xid, struct.pack("!IIIHH", ONF, 2300, bundle_id, control, 3))


def flow_stats(table: int, priority: int, cookie: int, goto: int | None) -> bytes:
    match = parser.OFPMatch(eth_type=0x0800, ipv4_dst="198.18.0.1")
    buf = bytearray()
    match.serialize(buf, 0)  # padded to 8 bytes in buf
    if goto is not None:
        parser.OFPInstructionGotoTable(goto).serialize(buf, len(buf))
    head = struct.pack("!HBxIIHHHH4xQQQ", 48 + len(buf), table, 0, 0, priority, 0, 0, 0, cookie, 1, 2)
    return head + bytes(buf)


def flow_stats_reply(xid: int, more: bool, *entries: bytes) -> bytes:
    flags = ofp.OFPMPF_REPLY_MORE if more else 0
    return msg(ofp.OFPT_MULTIPART_REPLY, xid, struct.pack("!HH4x", ofp.OFPMP_FLOW, flags) + b"".join(entries))


def sent(session: Session) -> list[tuple[int, int, bytes]]:
    """(type, xid, message) of everything the session queued."""
    out = []
    for m in split_messages(session.data_to_send()):
        _, type_, _, xid = HEADER.unpack_from(m)
        out.append((type_, xid, m))
    return out


def ready_session(now: float = 0.0) -> Session:
    session = Session(now, echo_interval=1.0, echo_timeout=2.0)
    sent(session)
    session.receive_data(hello(6, bitmap=(1 << 4) | (1 << 6)), now)
    [(type_, xid, _)] = sent(session)
    assert type_ == ofp.OFPT_FEATURES_REQUEST
    assert session.receive_data(features_reply(xid), now) == [Ready(DPID, 254)]
    return session


def test_hello_offers_only_13_and_handshake_yields_the_datapath_id() -> None:
    session = Session(0.0)
    [(type_, _, raw)] = sent(session)
    assert type_ == ofp.OFPT_HELLO and raw[0] == 4
    assert struct.unpack_from("!HHI", raw, 8) == (1, 8, 1 << 4)
    # Async messages before FEATURES_REPLY (OVS sends PORT_STATUS) are tolerated.
    session.receive_data(hello(4), 0.0)
    [(type_, xid, _)] = sent(session)
    assert session.receive_data(msg(ofp.OFPT_PORT_STATUS, 0, bytes(72)), 0.0) == []
    assert session.receive_data(features_reply(xid), 0.0) == [Ready(DPID, 254)]
    assert session.state is State.READY and session.statistics().datapath_id == DPID


@pytest.mark.parametrize("data", [hello(1), hello(6, bitmap=(1 << 1) | (1 << 6)), hello(3)])
def test_switch_without_openflow13_is_refused_with_a_clear_error(data: bytes) -> None:
    session = Session(0.0)
    sent(session)
    with pytest.raises(VersionMismatch, match="OpenFlow13"):
        session.receive_data(data, 0.0)
    [(type_, _, raw)] = sent(session)
    assert type_ == ofp.OFPT_ERROR
    assert struct.unpack_from("!HH", raw, 8) == (ofp.OFPET_HELLO_FAILED, ofp.OFPHFC_INCOMPATIBLE)


def test_first_message_must_be_hello() -> None:
    session = Session(0.0)
    with pytest.raises(ProtocolError, match="expected HELLO"):
        session.receive_data(msg(ofp.OFPT_ECHO_REQUEST, 5), 0.0)


def test_messages_split_across_reads_are_reassembled() -> None:
    session = ready_session()
    barrier = session.send_barrier()
    sent(session)
    reply = msg(ofp.OFPT_BARRIER_REPLY, barrier)
    assert session.receive_data(reply[:3], 0.0) == []
    assert session.receive_data(reply[3:] + msg(ofp.OFPT_ECHO_REQUEST, 77, b"hi"), 0.0) == [RequestDone(barrier)]
    [(type_, xid, raw)] = sent(session)
    assert (type_, xid, raw[8:]) == (ofp.OFPT_ECHO_REPLY, 77, b"hi")


def test_echo_liveness_sends_probe_then_times_out() -> None:
    session = ready_session(now=10.0)
    assert session.next_deadline() == 11.0
    session.tick(10.5)
    assert sent(session) == []
    session.tick(11.0)
    [(type_, xid, _)] = sent(session)
    assert type_ == ofp.OFPT_ECHO_REQUEST
    assert session.next_deadline() == 13.0
    session.receive_data(msg(ofp.OFPT_ECHO_REPLY, xid), 11.25)
    stats = session.statistics()
    assert (stats.echo_replies_received, stats.last_echo_rtt, stats.last_echo_reply_at) == (1, 0.25, 11.25)
    session.tick(12.25)
    [(type_, _, _)] = sent(session)
    assert type_ == ofp.OFPT_ECHO_REQUEST
    with pytest.raises(ConnectionTimeout):
        session.tick(14.25)


def test_handshake_never_sends_echo_and_times_out() -> None:
    session = Session(0.0, echo_interval=1.0, echo_timeout=2.0)
    sent(session)
    assert session.next_deadline() == 3.0
    session.tick(2.0)
    assert sent(session) == []
    with pytest.raises(ConnectionTimeout):
        session.tick(3.0)


def test_barrier_replies_are_matched_by_xid() -> None:
    session = ready_session()
    first, second = session.send_barrier(), session.send_barrier()
    assert [xid for _, xid, _ in sent(session)] == [first, second]
    assert session.receive_data(msg(ofp.OFPT_BARRIER_REPLY, second), 0.0) == [RequestDone(second)]
    assert session.receive_data(msg(ofp.OFPT_BARRIER_REPLY, 9999), 0.0) == []
    assert session.receive_data(msg(ofp.OFPT_BARRIER_REPLY, first), 0.0) == [RequestDone(first)]
    assert session.statistics().pending_requests == 0


def test_error_names_the_failed_request_and_its_xid() -> None:
    session = ready_session()
    request = session.send_barrier()
    [(_, xid, raw)] = sent(session)
    [event] = session.receive_data(error(xid, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE, raw), 0.0)
    assert isinstance(event, RequestFailed) and event.request == request
    assert isinstance(event.error, SwitchError)
    assert (event.error.type, event.error.code, event.error.xid) == (1, ofp.OFPBRC_BAD_TYPE, xid)
    assert str(event.error) == (f"switch rejected OFPT_BARRIER_REQUEST xid={xid}: OFPET_BAD_REQUEST/OFPBRC_BAD_TYPE (type=1, code=1)")
    assert session.statistics().errors == 1


def test_flow_stats_parts_are_collected_into_records() -> None:
    session = ready_session()
    request = session.request_flows(table=3, cookie=0xAB)
    [(type_, xid, raw)] = sent(session)
    assert type_ == ofp.OFPT_MULTIPART_REQUEST
    assert struct.unpack_from("!B3xII4xQQ", raw, 16) == (3, ofp.OFPP_ANY, ofp.OFPG_ANY, 0xAB, 2**64 - 1)
    part1 = flow_stats_reply(xid, True, flow_stats(3, 10, 0xAB, goto=5))
    part2 = flow_stats_reply(xid, False, flow_stats(3, 20, 0xAB, goto=None), flow_stats(3, 30, 0xAB, goto=7))
    assert session.receive_data(part1, 0.0) == []
    [done] = session.receive_data(part2, 0.0)
    assert isinstance(done, RequestDone) and done.request == request and done.result is not None
    records = flow_records(done.result)  # the caller parses, off the reader's path
    assert [(r.table, r.priority, r.cookie) for r in records] == [(3, 10, 0xAB), (3, 20, 0xAB), (3, 30, 0xAB)]
    first = records[0]
    assert first.match == (("eth_type", 0x0800), ("ipv4_dst", "198.18.0.1"))
    assert first.instructions == ((("OFPInstructionGotoTable", (("len", 8), ("table_id", 5), ("type", 1))),),)
    assert records[1].instructions == ()
    assert (first.packet_count, first.byte_count) == (1, 2)
    assert hash(first) == hash(first)


def bundle_of(n: int) -> bytes:
    specs = [FlowSpec(table=0, priority=i + 1, apply=(Output(1),)) for i in range(n)]
    return encode_bundle(specs, bundle_id=42, xid=500).data


def test_bundle_is_restamped_and_committed_only_after_the_barrier() -> None:
    session = ready_session()
    request = session.begin_bundle(bundle_of(2))
    out = sent(session)
    assert [t for t, _, _ in out] == [ofp.OFPT_EXPERIMENTER] * 3 + [ofp.OFPT_BARRIER_REQUEST]
    xids = [xid for _, xid, _ in out]
    assert xids == list(range(xids[0], xids[0] + 4)) and request == xids[0]
    for _, _xid, raw in out[:3]:
        assert struct.unpack_from("!I", raw, 16)[0] == 1  # the session's bundle id, not 42
    for _, xid, raw in out[1:3]:
        assert struct.unpack_from("!I", raw, 28)[0] == xid  # inner flow-mod xid follows the add
    assert session.receive_data(msg(ofp.OFPT_BARRIER_REPLY, xids[3]), 0.0) == []
    [(type_, commit_xid, raw)] = sent(session)
    assert type_ == ofp.OFPT_EXPERIMENTER and struct.unpack_from("!IH", raw, 16) == (1, 4)  # COMMIT_REQUEST
    assert session.receive_data(bundle_reply(commit_xid, 1, 5), 0.0) == [RequestDone(request)]


def test_a_failed_add_discards_the_bundle_and_reports_that_add() -> None:
    session = ready_session()
    request = session.begin_bundle(bundle_of(3))
    out = sent(session)
    _, bad_xid, bad = out[2]
    bad_action = error(bad_xid, ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT, bad[24:])
    assert session.receive_data(bad_action, 0.0) == []
    assert session.receive_data(msg(ofp.OFPT_BARRIER_REPLY, out[-1][1]), 0.0) == []
    [(_, discard_xid, raw)] = sent(session)
    assert struct.unpack_from("!H", raw, 20)[0] == 6  # DISCARD_REQUEST
    [failed] = session.receive_data(bundle_reply(discard_xid, 1, 7), 0.0)
    assert isinstance(failed, RequestFailed) and failed.request == request
    assert isinstance(failed.error, SwitchError) and failed.error.xid == bad_xid
    assert "OFPT_FLOW_MOD" in str(failed.error) and "OFPBAC_BAD_OUT_PORT" in str(failed.error)


def test_a_failed_commit_reports_the_inner_error_first() -> None:
    session = ready_session()
    request = session.begin_bundle(bundle_of(1))
    out = sent(session)
    session.receive_data(msg(ofp.OFPT_BARRIER_REPLY, out[-1][1]), 0.0)
    [(_, commit_xid, commit)] = sent(session)
    inner = error(out[1][1], ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP, out[1][2][24:])
    experimenter = msg(ofp.OFPT_ERROR, commit_xid, struct.pack("!HHI", 0xFFFF, 2310, ONF) + commit)
    assert session.receive_data(inner, 0.0) == []
    [failed] = session.receive_data(experimenter, 0.0)
    assert isinstance(failed, RequestFailed) and failed.request == request
    assert isinstance(failed.error, SwitchError) and failed.error.code == ofp.OFPFMFC_OVERLAP


def test_bare_flow_mods_fail_at_their_barrier_with_the_first_error() -> None:
    session = ready_session()
    specs = [FlowSpec(table=0, priority=p) for p in (1, 2)]
    request = session.send_flow_mods(encode_flow_mods(specs, xid=900))
    out = sent(session)
    assert [t for t, _, _ in out] == [ofp.OFPT_FLOW_MOD, ofp.OFPT_FLOW_MOD, ofp.OFPT_BARRIER_REQUEST]
    assert request == out[-1][1]
    session.receive_data(error(out[0][1], ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_TABLE_FULL, out[0][2]), 0.0)
    [failed] = session.receive_data(msg(ofp.OFPT_BARRIER_REPLY, request), 0.0)
    assert isinstance(failed, RequestFailed) and "OFPFMFC_TABLE_FULL" in str(failed.error)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (encode_flow_mods([FlowSpec(table=0, priority=1)]).data, "OPEN_REQUEST"),
        (bundle_of(1)[:-24], "COMMIT_REQUEST"),
        (bundle_of(1)[:24] + encode_flow_mods([FlowSpec(table=0, priority=1)]).data + bundle_of(1)[-24:],
         "bundle-add"),
    ],
)  # fmt: skip
def test_malformed_bundles_are_rejected_before_sending(data: bytes, problem: str) -> None:
    session = ready_session()
    with pytest.raises(ValueError, match=problem):
        session.begin_bundle(data)
    assert sent(session) == []


def test_requests_before_the_handshake_are_refused() -> None:
    with pytest.raises(OpenFlowError, match="not ready"):
        Session(0.0).send_barrier()


def test_packet_in_passes_through() -> None:
    session = ready_session()
    match = parser.OFPMatch(in_port=3)
    buf = bytearray()
    match.serialize(buf, 0)
    body = struct.pack("!IHBBQ", ofp.OFP_NO_BUFFER, 4, 0, 2, 0x77) + bytes(buf) + b"\x00\x00" + b"data"
    [event] = session.receive_data(msg(ofp.OFPT_PACKET_IN, 0, body), 0.0)
    assert isinstance(event, PacketIn) and event.datapath_id == DPID
    assert event.message.match["in_port"] == 3 and event.message.data == b"data"
    assert event.message.cookie == 0x77


def test_close_fails_every_pending_request() -> None:
    session = ready_session()
    first, second = session.send_barrier(), session.request_flows()
    reason = ConnectionClosed("gone")
    events = session.close(reason)
    assert events == [RequestFailed(first, reason), RequestFailed(second, reason)]
    assert session.statistics().state == "closed"

"""Sans-IO OpenFlow 1.3 controller session: bytes in, events and bytes out.

:class:`Session` owns the protocol state of one switch connection: the
HELLO/FEATURES handshake (1.3 only), echo both ways and liveness, xid
allocation and correlation of replies and errors with the request that
caused them, multipart FLOW_STATS reassembly, and the two-phase bundle
protocol.  It never touches a socket or a clock: the caller feeds received
bytes and the current time, drains :meth:`Session.data_to_send`, and calls
:meth:`Session.tick` at :meth:`Session.next_deadline`.  That keeps every
protocol rule testable without trio or a switch (``openflow/switch.py`` is
the trio shell).

Messages are built and parsed with os-ken's ``ofproto_v1_3_parser``;
flow-mods and bundle messages arrive pre-encoded (fastpath) and are only
re-stamped with this session's xids and bundle ids, never re-encoded, so
the hot path stays a byte copy.

Bundles are two-phase because Open vSwitch drops a bundle-add that fails
validation but would still commit the rest of the bundle: the session sends
OPEN, the adds and a BARRIER; only when the barrier reply shows no add
failed does it send COMMIT, otherwise DISCARD, so a bad flow never leaves
part of a batch installed.

Not responsible for sockets, timers, logging or deciding what to install.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from fastpath import BundleCtrl, Messages, bundle_ctrl, split_messages

OFP_VERSION = ofp.OFP_VERSION
"""The only OpenFlow version this controller speaks (0x04, OpenFlow 1.3)."""

_HEADER = struct.Struct("!BBHI")
_U32 = 0xFFFFFFFF
_ONF_EXPERIMENTER = 0x4F4E4600
_ONF_BUNDLE_CONTROL = ofp.ONF_ET_BUNDLE_CONTROL
_ONF_BUNDLE_ADD = ofp.ONF_ET_BUNDLE_ADD_MESSAGE
_BCT_COMMIT_REPLY = ofp.ONF_BCT_COMMIT_REPLY
_BCT_DISCARD_REPLY = ofp.ONF_BCT_DISCARD_REPLY
_EXP_HEADER = struct.Struct("!II")  # experimenter, exp_type (after the 8-byte header)
_MULTIPART_FLAGS = struct.Struct("!H")  # ofp_multipart_reply flags, after the header and the 2-byte type
_BUNDLE_ID_OFFSET = 16  # bundle_id u32 in both bundle control and bundle add
_BUNDLE_FLAGS_OFFSET = 22  # flags u16 in both
_BUNDLE_INNER_OFFSET = 24  # the embedded message of a bundle add
_HELLO_ELEM_BITMAP = 1
_HELLO = struct.Struct("!BBHIHHI")  # header + one version-bitmap element

# The datapath object os-ken's (de)serialisers need: only protocol modules.
_DP: Any = SimpleNamespace(ofproto=ofp, ofproto_parser=parser, id=None)

_ERROR_TYPES = {v: k for k, v in vars(ofp).items() if k.startswith("OFPET_")}
_ERROR_CODE_PREFIX = {
    ofp.OFPET_HELLO_FAILED: "OFPHFC_", ofp.OFPET_BAD_REQUEST: "OFPBRC_",
    ofp.OFPET_BAD_ACTION: "OFPBAC_", ofp.OFPET_BAD_INSTRUCTION: "OFPBIC_",
    ofp.OFPET_BAD_MATCH: "OFPBMC_", ofp.OFPET_FLOW_MOD_FAILED: "OFPFMFC_",
    ofp.OFPET_GROUP_MOD_FAILED: "OFPGMFC_", ofp.OFPET_PORT_MOD_FAILED: "OFPPMFC_",
    ofp.OFPET_TABLE_MOD_FAILED: "OFPTMFC_", ofp.OFPET_QUEUE_OP_FAILED: "OFPQOFC_",
    ofp.OFPET_SWITCH_CONFIG_FAILED: "OFPSCFC_", ofp.OFPET_ROLE_REQUEST_FAILED: "OFPRRFC_",
    ofp.OFPET_METER_MOD_FAILED: "OFPMMFC_", ofp.OFPET_TABLE_FEATURES_FAILED: "OFPTFFC_",
}  # fmt: skip
_ONF_ERRORS = {v: k for k, v in vars(ofp).items() if k.startswith("ONFERR_ET_")}
_MSG_TYPES = {v: k for k, v in vars(ofp).items() if k.startswith("OFPT_")}


def _code_name(type_: int, code: int) -> str:
    prefix = _ERROR_CODE_PREFIX.get(type_)
    if prefix is not None:
        for name, value in vars(ofp).items():
            if name.startswith(prefix) and value == code:
                return str(name)
    return str(code)


class OpenFlowError(Exception):
    """The one exception type of the OpenFlow channel boundary."""


class VersionMismatch(OpenFlowError):
    """The switch does not offer OpenFlow 1.3 (set the bridge's ``protocols`` to include OpenFlow13)."""


class ProtocolError(OpenFlowError):
    """The switch sent something this session cannot accept (bad framing or an unexpected message)."""


class ConnectionTimeout(OpenFlowError):
    """Nothing, not even an echo reply, arrived from the switch within the liveness window."""


class ConnectionClosed(OpenFlowError):
    """The connection ended while a request was waiting for its answer."""


class SwitchError(OpenFlowError):
    """The switch rejected a request with an OFPT_ERROR.

    Names the failed request (its message type and xid) and the error
    type/code both numerically and by os-ken's constant name, so a log line
    is enough to find the offending flow.
    """

    def __init__(self, type_: int, code: int, xid: int, request: str, data: bytes) -> None:
        self.type = type_
        self.code = code
        self.xid = xid
        self.request = request
        self.data = data
        if type_ == ofp.OFPET_EXPERIMENTER:
            what = f"experimenter error {_ONF_ERRORS.get(code, code)}"
        else:
            what = f"{_ERROR_TYPES.get(type_, type_)}/{_code_name(type_, code)} (type={type_}, code={code})"
        super().__init__(f"switch rejected {request} xid={xid}: {what}")


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """One installed flow as reported by FLOW_STATS, in a hashable form for reconcile.

    ``match`` is os-ken's ``OFPMatch.items()`` sorted by field name (masked
    fields as ``(value, mask)``); ``instructions`` are os-ken instruction
    objects' JSON dicts frozen into nested tuples, so records compare and
    hash by value.
    """

    table: int
    priority: int
    cookie: int
    match: tuple[tuple[str, Any], ...]
    instructions: tuple[Any, ...]
    packet_count: int = field(default=0, compare=False)
    byte_count: int = field(default=0, compare=False)


# Events the session produces ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ready:
    """The handshake finished: the switch speaks 1.3 and told us its datapath id."""

    datapath_id: int
    n_tables: int


@dataclass(frozen=True, slots=True)
class PacketIn:
    """An OFPT_PACKET_IN, passed through as os-ken's ``OFPPacketIn``."""

    datapath_id: int
    message: Any


@dataclass(frozen=True, slots=True)
class RequestDone:
    """A request finished; ``result`` holds a flow dump's FLOW_STATS reply messages as received
    (:func:`flow_records` parses them), else None."""

    request: int
    result: tuple[bytes, ...] | None = None


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """A request failed; ``error`` is the first :class:`SwitchError` the switch sent for it."""

    request: int
    error: OpenFlowError


Event = Ready | PacketIn | RequestDone | RequestFailed


class State(enum.Enum):
    """Where the session is in its life."""

    HELLO = "hello"
    FEATURES = "features"
    READY = "ready"
    CLOSED = "closed"


class _Kind(enum.Enum):
    BARRIER = "barrier"
    FLOWS = "flow-stats"
    FLOW_MODS = "flow-mods"
    BUNDLE = "bundle"


@dataclass(slots=True)
class _Op:
    """One outstanding request; may span many xids (a batch) and phases (a bundle)."""

    kind: _Kind
    request: int
    done_xid: int
    """The xid whose reply finishes the current phase."""
    xids: list[int] = field(default_factory=list)
    parts: list[bytes] = field(default_factory=list)
    """A flow dump's reply messages, parsed by the caller: at thousands of flows os-ken takes
    seconds, which must not stall the connection's reader (echo replies, other requests)."""
    error: SwitchError | None = None
    bundle_id: int = 0
    bundle_flags: int = 0
    committing: bool = False


@dataclass(frozen=True, slots=True)
class SessionStatistics:
    """Counters of one session; rendered by the REST API and status page."""

    state: str
    datapath_id: int | None
    messages_in: int
    messages_out: int
    errors: int
    echo_requests_sent: int
    echo_replies_received: int
    last_echo_reply_at: float | None
    last_echo_rtt: float | None
    pending_requests: int


class Session:
    """The controller side of one OpenFlow 1.3 connection (see the module docstring).

    ``now`` values are seconds on any monotonic clock; liveness: after
    ``echo_interval`` s without receiving anything the session sends an
    ECHO_REQUEST, and after a further ``echo_timeout`` s of silence
    :meth:`tick` raises :class:`ConnectionTimeout`.  Errors in
    :meth:`receive_data` (:class:`VersionMismatch`, :class:`ProtocolError`)
    mean the connection must be closed; outstanding requests are then failed
    by :meth:`close`.
    """

    def __init__(self, now: float, *, echo_interval: float = 5.0, echo_timeout: float = 10.0) -> None:
        self.state = State.HELLO
        self.datapath_id: int | None = None
        self._echo_interval = echo_interval
        self._echo_timeout = echo_timeout
        self._last_rx = now
        self._echo_sent_at: float | None = None
        self._echo_xid = 0
        self._out: list[bytes] = []
        self._buf = bytearray()
        self._next_xid = 1
        self._next_bundle = 1
        self._ops: dict[int, _Op] = {}  # request id -> op
        self._by_xid: dict[int, _Op] = {}  # every xid still owned by an op
        self._messages_in = 0
        self._messages_out = 0
        self._errors = 0
        self._echo_requests = 0
        self._echo_replies = 0
        self._last_echo_at: float | None = None
        self._last_rtt: float | None = None
        # Hand-packed: os-ken's OFPHello does not serialise its elements, and the
        # version bitmap is what lets a newer switch settle on 1.3 explicitly.
        self._out.append(_HELLO.pack(OFP_VERSION, ofp.OFPT_HELLO, _HELLO.size, self._xid(),
                                     _HELLO_ELEM_BITMAP, 8, 1 << OFP_VERSION))  # fmt: skip
        self._messages_out += 1

    # -- output ------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Return (and forget) every byte queued for the switch."""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def _send_msg(self, msg: Any, xid: int) -> None:
        msg.set_xid(xid)
        msg.serialize()
        self._out.append(bytes(msg.buf))
        self._messages_out += 1

    def _xid(self) -> int:
        xid = self._next_xid
        self._next_xid = xid % _U32 + 1  # never 0: some switches treat xid 0 as unsolicited
        return xid

    # -- liveness ----------------------------------------------------------

    def next_deadline(self) -> float:
        """When :meth:`tick` must next run (an echo is due or the connection expires)."""
        if self._echo_sent_at is None and self.state is State.READY:
            return self._last_rx + self._echo_interval
        return self._last_rx + self._echo_interval + self._echo_timeout

    def tick(self, now: float) -> None:
        """Send an echo if the switch has been quiet; raise ConnectionTimeout if it stayed quiet."""
        if self.state is State.CLOSED:
            return
        silent = now - self._last_rx
        if silent >= self._echo_interval + self._echo_timeout:
            raise ConnectionTimeout(f"no message from the switch for {silent:.1f} s")
        # No echo before the handshake: OpenFlow allows only HELLO until then.
        if silent >= self._echo_interval and self._echo_sent_at is None and self.state is State.READY:
            self._echo_xid = self._xid()
            self._echo_sent_at = now
            self._echo_requests += 1
            self._send_msg(parser.OFPEchoRequest(_DP, data=b""), self._echo_xid)

    # -- requests ----------------------------------------------------------

    def _require_ready(self) -> None:
        if self.state is not State.READY:
            raise OpenFlowError(f"session is {self.state.value}, not ready")

    def _add_op(self, op: _Op) -> int:
        self._ops[op.request] = op
        for xid in op.xids:
            self._by_xid[xid] = op
        return op.request

    def send_barrier(self) -> int:
        """Queue a BARRIER_REQUEST; returns the request id its RequestDone will carry."""
        self._require_ready()
        xid = self._xid()
        self._send_msg(parser.OFPBarrierRequest(_DP), xid)
        return self._add_op(_Op(_Kind.BARRIER, xid, xid, [xid]))

    def request_flows(self, table: int | None = None, cookie: int | None = None, cookie_mask: int = 0) -> int:
        """Queue a FLOW_STATS request (all tables when ``table`` is None).

        ``cookie`` selects flows whose cookie equals it under ``cookie_mask``
        (OpenFlow's cookie filter); ``cookie`` without a mask means exact.
        """
        self._require_ready()
        if cookie is not None and cookie_mask == 0:
            cookie_mask = 0xFFFFFFFFFFFFFFFF
        xid = self._xid()
        request = parser.OFPFlowStatsRequest(
            _DP,
            table_id=ofp.OFPTT_ALL if table is None else table,
            cookie=cookie or 0,
            cookie_mask=cookie_mask,
        )
        self._send_msg(request, xid)
        return self._add_op(_Op(_Kind.FLOWS, xid, xid, [xid]))

    def send_flow_mods(self, encoded: Messages | bytes) -> int:
        """Queue pre-encoded reply-less messages (flow-mods, group-mods; not a bundle) and a barrier.

        The barrier's RequestDone/RequestFailed reports the first error any of them caused.
        """
        self._require_ready()
        messages = _split(encoded)
        for msg in messages:
            if msg[1] == ofp.OFPT_EXPERIMENTER:
                raise ValueError("bundle messages go through begin_bundle(), not send_flow_mods()")
        xids = self._stamp(messages, bundle_id=None)
        barrier = self._xid()
        self._send_msg(parser.OFPBarrierRequest(_DP), barrier)
        return self._add_op(_Op(_Kind.FLOW_MODS, barrier, barrier, [*xids, barrier]))

    def begin_bundle(self, encoded: Messages | bytes) -> int:
        """Queue a fastpath bundle (open, adds, commit) as open + adds + barrier.

        The caller's commit is dropped: the session commits (or discards)
        itself once the barrier shows whether any add failed.  xids and the
        bundle id are re-stamped so concurrent batches never collide.
        """
        self._require_ready()
        messages = _split(encoded)
        if len(messages) < 2 or _bundle_type(messages[0]) != (_ONF_BUNDLE_CONTROL, BundleCtrl.OPEN_REQUEST):
            raise ValueError("a bundle must start with an ONF bundle OPEN_REQUEST")
        if _bundle_type(messages[-1]) != (_ONF_BUNDLE_CONTROL, BundleCtrl.COMMIT_REQUEST):
            raise ValueError("a bundle must end with an ONF bundle COMMIT_REQUEST")
        adds = messages[1:-1]
        if any(_bundle_type(m)[0] != _ONF_BUNDLE_ADD for m in adds):
            raise ValueError("a bundle may only hold ONF bundle-add messages between open and commit")
        bundle_id = self._next_bundle
        self._next_bundle = bundle_id % _U32 + 1
        (flags,) = struct.unpack_from("!H", messages[0], _BUNDLE_FLAGS_OFFSET)
        xids = self._stamp(messages[:-1], bundle_id=bundle_id)
        barrier = self._xid()
        self._send_msg(parser.OFPBarrierRequest(_DP), barrier)
        op = _Op(_Kind.BUNDLE, xids[0], barrier, [*xids, barrier], bundle_id=bundle_id, bundle_flags=flags)
        return self._add_op(op)

    def _stamp(self, messages: list[bytes], bundle_id: int | None) -> list[int]:
        """Queue ``messages`` with fresh xids (and ``bundle_id``); returns the xids in order."""
        xids = []
        for msg in messages:
            buf = bytearray(msg)
            xid = self._xid()
            struct.pack_into("!I", buf, 4, xid)
            if bundle_id is not None:
                struct.pack_into("!I", buf, _BUNDLE_ID_OFFSET, bundle_id)
                if len(buf) > _BUNDLE_INNER_OFFSET:  # bundle add: the inner xid must match
                    struct.pack_into("!I", buf, _BUNDLE_INNER_OFFSET + 4, xid)
            self._out.append(bytes(buf))
            xids.append(xid)
        self._messages_out += len(messages)
        return xids

    def _finish(self, op: _Op, event: Event) -> Event:
        del self._ops[op.request]
        for xid in op.xids:
            self._by_xid.pop(xid, None)
        return event

    # -- input -------------------------------------------------------------

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        """Consume bytes from the switch; returns the events they complete, in order."""
        if self.state is State.CLOSED:
            raise OpenFlowError("session is closed")
        self._last_rx = now
        self._buf += data
        events: list[Event] = []
        while len(self._buf) >= _HEADER.size:
            version, type_, length, xid = _HEADER.unpack_from(self._buf)
            if length < _HEADER.size:
                raise ProtocolError(f"message with impossible length {length}")
            if len(self._buf) < length:
                break
            msg = bytes(self._buf[:length])
            del self._buf[:length]
            self._messages_in += 1
            event = self._handle(version, type_, xid, msg, now)
            if event is not None:
                events.append(event)
        return events

    def _handle(self, version: int, type_: int, xid: int, msg: bytes, now: float) -> Event | None:
        if self.state is State.HELLO:
            if type_ != ofp.OFPT_HELLO:
                raise ProtocolError(f"expected HELLO, got message type {type_}")
            self._negotiate(version, msg)
            return None
        if version != OFP_VERSION:
            raise ProtocolError(f"message version {version} after negotiating OpenFlow 1.3")
        if type_ == ofp.OFPT_ECHO_REQUEST:
            self._send_msg(parser.OFPEchoReply(_DP, data=msg[_HEADER.size :]), xid)
        elif type_ == ofp.OFPT_ECHO_REPLY:
            if self._echo_sent_at is not None and xid == self._echo_xid:
                self._echo_replies += 1
                self._last_echo_at = now
                self._last_rtt = now - self._echo_sent_at
                self._echo_sent_at = None
        elif type_ == ofp.OFPT_ERROR:
            return self._on_error(xid, msg)
        elif self.state is State.FEATURES:
            # OVS may send PORT_STATUS (or other async messages) before its
            # FEATURES_REPLY; they describe a switch we have not registered yet.
            if type_ != ofp.OFPT_FEATURES_REPLY:
                return None
            features = _parse(msg)
            self.datapath_id = int(features.datapath_id)
            self.state = State.READY
            return Ready(self.datapath_id, int(features.n_tables))
        elif type_ == ofp.OFPT_PACKET_IN:
            assert self.datapath_id is not None
            return PacketIn(self.datapath_id, _parse(msg))
        elif type_ == ofp.OFPT_BARRIER_REPLY:
            return self._on_barrier(xid)
        elif type_ == ofp.OFPT_MULTIPART_REPLY:
            return self._on_multipart(xid, msg)
        elif type_ == ofp.OFPT_EXPERIMENTER:
            return self._on_experimenter(xid, msg)
        # Anything else (PORT_STATUS, FLOW_REMOVED, ...) has no consumer yet.
        return None

    def _negotiate(self, version: int, msg: bytes) -> None:
        """Accept the switch's HELLO only if 1.3 is common to both sides (OF 1.3 spec 6.3.1)."""
        offered = {version}
        pos = _HEADER.size
        while pos + 4 <= len(msg):
            elem_type, elem_len = struct.unpack_from("!HH", msg, pos)
            if elem_len < 4:
                break
            if elem_type == _HELLO_ELEM_BITMAP:
                offered = {
                    32 * i + bit
                    for i in range((elem_len - 4) // 4)
                    for bit in range(32)
                    if struct.unpack_from("!I", msg, pos + 4 + 4 * i)[0] >> bit & 1
                }
            pos += (elem_len + 7) // 8 * 8
        has_bitmap = offered != {version}
        if (has_bitmap and OFP_VERSION not in offered) or (not has_bitmap and version < OFP_VERSION):
            error = parser.OFPErrorMsg(_DP, type_=ofp.OFPET_HELLO_FAILED, code=ofp.OFPHFC_INCOMPATIBLE, data=b"OpenFlow 1.3 only")
            self._send_msg(error, self._xid())
            raise VersionMismatch(
                f"switch offers OpenFlow versions {sorted(offered)} (wire values), contivd needs 1.3 (4); "
                "set the bridge's protocols to include OpenFlow13"
            )
        self.state = State.FEATURES
        self._send_msg(parser.OFPFeaturesRequest(_DP), self._xid())

    def _on_error(self, xid: int, msg: bytes) -> Event | None:
        self._errors += 1
        type_, code = struct.unpack_from("!HH", msg, _HEADER.size)
        data = msg[_HEADER.size + 4 :]
        if type_ == ofp.OFPET_EXPERIMENTER:
            (code,) = struct.unpack_from("!H", msg, _HEADER.size + 2)
            data = msg[_HEADER.size + 8 :]
        request = _MSG_TYPES.get(data[1], f"type {data[1]}") if len(data) >= 2 else "request"
        if len(data) >= 16 and data[1] == ofp.OFPT_EXPERIMENTER:
            request = {_ONF_BUNDLE_CONTROL: "ONF_BUNDLE_CONTROL", _ONF_BUNDLE_ADD: "ONF_BUNDLE_ADD"}.get(
                struct.unpack_from("!I", data, 12)[0], request
            )
        error = SwitchError(type_, code, xid, request, data)
        if self.state is not State.READY and type_ == ofp.OFPET_HELLO_FAILED:
            raise VersionMismatch(str(error))
        op = self._by_xid.get(xid)
        if op is None:
            return None  # unsolicited (or for a request already answered): counted only
        if op.error is None:
            op.error = error
        if op.kind in (_Kind.BARRIER, _Kind.FLOWS) or (op.committing and xid == op.done_xid):
            return self._finish(op, RequestFailed(op.request, op.error))
        return None  # a batch member: the barrier (or commit) ends the op

    def _on_barrier(self, xid: int) -> Event | None:
        op = self._by_xid.get(xid)
        if op is None or xid != op.done_xid:
            return None
        if op.kind is not _Kind.BUNDLE:
            if op.error is not None:
                return self._finish(op, RequestFailed(op.request, op.error))
            return self._finish(op, RequestDone(op.request))
        control = BundleCtrl.DISCARD_REQUEST if op.error is not None else BundleCtrl.COMMIT_REQUEST
        op.done_xid = self._xid()
        op.xids.append(op.done_xid)
        op.committing = True
        self._by_xid[op.done_xid] = op
        self._out.append(bundle_ctrl(control, op.bundle_id, op.bundle_flags, op.done_xid))
        self._messages_out += 1
        return None

    def _on_experimenter(self, xid: int, msg: bytes) -> Event | None:
        op = self._by_xid.get(xid)
        if op is None or not op.committing or xid != op.done_xid or len(msg) < 24:
            return None
        experimenter, exp_type = _EXP_HEADER.unpack_from(msg, _HEADER.size)
        (control,) = struct.unpack_from("!H", msg, 20)
        if experimenter != _ONF_EXPERIMENTER or exp_type != _ONF_BUNDLE_CONTROL:
            return None
        if control == _BCT_DISCARD_REPLY and op.error is not None:
            return self._finish(op, RequestFailed(op.request, op.error))
        if control == _BCT_COMMIT_REPLY:
            return self._finish(op, RequestDone(op.request))
        raise ProtocolError(f"unexpected bundle control reply type {control} for xid {xid}")

    def _on_multipart(self, xid: int, msg: bytes) -> Event | None:
        op = self._by_xid.get(xid)
        if op is None or op.kind is not _Kind.FLOWS:
            return None
        op.parts.append(msg)
        (flags,) = _MULTIPART_FLAGS.unpack_from(msg, _HEADER.size + 2)
        if flags & ofp.OFPMPF_REPLY_MORE:
            return None
        return self._finish(op, RequestDone(op.request, tuple(op.parts)))

    # -- end ---------------------------------------------------------------

    def close(self, reason: OpenFlowError) -> list[Event]:
        """Mark the session closed; returns a RequestFailed for every request still waiting."""
        self.state = State.CLOSED
        pending = list(self._ops.values())
        return [self._finish(op, RequestFailed(op.request, reason)) for op in pending]

    def statistics(self) -> SessionStatistics:
        """Counters for the status page; cheap enough to call on every render."""
        return SessionStatistics(
            state=self.state.value,
            datapath_id=self.datapath_id,
            messages_in=self._messages_in,
            messages_out=self._messages_out,
            errors=self._errors,
            echo_requests_sent=self._echo_requests,
            echo_replies_received=self._echo_replies,
            last_echo_reply_at=self._last_echo_at,
            last_echo_rtt=self._last_rtt,
            pending_requests=len(self._ops),
        )


def _split(encoded: Messages | bytes) -> list[bytes]:
    data = encoded.data if isinstance(encoded, Messages) else encoded
    messages = split_messages(data)
    for msg in messages:
        if msg[0] != OFP_VERSION:
            raise ValueError(f"pre-encoded message has OpenFlow version {msg[0]}, not 1.3")
    return messages


def _bundle_type(msg: bytes) -> tuple[int, int]:
    """(exp_type, control type) of an ONF bundle message; (-1, -1) for anything else."""
    if msg[1] != ofp.OFPT_EXPERIMENTER or len(msg) < 24:
        return -1, -1
    experimenter, exp_type = _EXP_HEADER.unpack_from(msg, _HEADER.size)
    if experimenter != _ONF_EXPERIMENTER:
        return -1, -1
    (control,) = struct.unpack_from("!H", msg, 20)
    return exp_type, control


def _parse(msg: bytes) -> Any:
    version, type_, length, xid = _HEADER.unpack_from(msg)
    decoded = ofproto_parser.msg(_DP, version, type_, length, xid, msg)
    if decoded is None:
        raise ProtocolError(f"cannot decode {_MSG_TYPES.get(type_, type_)} xid={xid}")
    return decoded


def _freeze(value: Any) -> Any:
    """Turn os-ken JSON dicts/lists into nested tuples so records hash and compare by value."""
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in sorted(value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def match_items(match: Any) -> tuple[tuple[str, Any], ...]:
    """An os-ken OFPMatch as FlowRecord.match holds it: items sorted by field name, values frozen."""
    return tuple(sorted((k, _freeze(v)) for k, v in match.items()))


def flow_records(parts: Iterable[bytes]) -> list[FlowRecord]:
    """The flows of a dump's FLOW_STATS reply messages (``RequestDone.result``), in order."""
    return [_flow_record(stats) for msg in parts for stats in _parse(msg).body]


def _flow_record(stats: Any) -> FlowRecord:
    return FlowRecord(
        table=int(stats.table_id),
        priority=int(stats.priority),
        cookie=int(stats.cookie),
        match=match_items(stats.match),
        instructions=_instructions(stats.instructions),
        packet_count=int(stats.packet_count),
        byte_count=int(stats.byte_count),
    )


def _instructions(instructions: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(_freeze(i.to_jsondict()) for i in instructions)

"""OpenFlow 1.3 flow-mod and ONF bundle (EXT-230) encoding from compact flow specs.

:class:`FlowSpec` is the compact, hashable description of one rule; it
validates itself on construction (ValueError naming the field) and packs
itself once into the fixed binary record the backends consume, so encoding
a batch is one join plus one call into C.  The bytes produced are identical
to os-ken's ``ofproto_v1_3_parser`` serialisation of the same flow, built as:

* match: fields in OXM order; a zero mask omits a field (``/0`` prefixes,
  port range 0-65535), an all-ones mask emits it unmasked, anything else is
  ``value & mask`` with the mask; VLAN ids are matched with OFPVID_PRESENT;
  L4 ports use tcp_/udp_/sctp_ fields according to ``ip_proto``;
  ``tcp_flags`` is the ONF experimenter OXM (EXT-109, os-ken's ``tcp_flags``);
* flow-mod: cookie_mask 0, buffer_id OFP_NO_BUFFER, out_port OFPP_ANY,
  out_group OFPG_ANY;
* instructions, in the order OVS requires: apply-actions (the ``apply``
  actions in order), write-metadata, goto-table; no instructions means drop.
  DELETE_STRICT messages carry no instructions (the switch ignores them).

A port range becomes the minimal set of value/mask matches and one flow-mod
per match, the cartesian product when both ranges are given (source outer,
destination inner).  Message k of a batch gets xid ``xid + k`` (mod 2^32),
so replies can be traced to the spec that caused them.

Not responsible for sending, batching policy or barriers; that is the
OpenFlow session's job.

Packed record (little-endian; the C side is parse_record in csrc/flowmod.c)::

    0 cookie Q, 8 metadata Q, 16 metadata_mask Q, 24 write_metadata Q,
    32 write_metadata_mask Q, 40 in_port I, 44 ipv4_src I, 48 ipv4_dst I,
    52 present I (FP_HAS_* bits), 56 priority H, 58 eth_type H, 60 vlan_vid H,
    62 tp_src lo H, 64 tp_src hi H, 66 tp_dst lo H, 68 tp_dst hi H,
    70 tcp_flags H, 72 tcp_flags_mask H, 74 idle_timeout H, 76 hard_timeout H,
    78 flags H, 80 table B, 81 src prefix B, 82 dst prefix B, 83 ip_proto B,
    84 goto_table B, 85 n_actions B, 86 reserved H
    then n_actions x (kind B, field B, max_len H, port I, value Q)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from fastpath import _reference as ref
from fastpath._backend import Backend, backend_or_default, error

_U16 = 0xFFFF
_U32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_TABLE_MAX = 254  # 255 is OFPTT_ALL
_ETH_TYPE_IPV4 = 0x0800
_L4_PROTOS = (6, 17, 132)  # tcp, udp, sctp
_TCP = 6
_MAX_PORT_MASKS = 30  # worst case for a 16-bit range (e.g. 1-65534)
OFPCML_MAX = 0xFFE5
"""os-ken's default ``max_len`` for output actions (bytes sent to the controller)."""

# OXM field numbers and value widths (bytes) of the fields SetField may write.
_SET_FIELDS = {
    "eth_dst": (3, 6),
    "eth_src": (4, 6),
    "vlan_vid": (6, 2),
    "ipv4_src": (11, 4),
    "ipv4_dst": (12, 4),
    "tunnel_id": (38, 8),
}

_REC_HEADER = struct.Struct("<5Q4I12H6BH")
_REC_ACTION = struct.Struct("<BBHIQ")


class Command(IntEnum):
    """OFPFC_* flow-mod commands this encoder produces (strict variants only)."""

    ADD = 0
    MODIFY_STRICT = 2
    DELETE_STRICT = 4


class BundleCtrl(IntEnum):
    """ONF_BCT_* bundle control request types."""

    OPEN_REQUEST = 0
    CLOSE_REQUEST = 2
    COMMIT_REQUEST = 4
    DISCARD_REQUEST = 6


ONF_BF_ATOMIC = 1
ONF_BF_ORDERED = 2


@dataclass(frozen=True, slots=True)
class Output:
    """Output action: send to ``port`` (an OFPP_* reserved value is allowed)."""

    port: int
    max_len: int = OFPCML_MAX


@dataclass(frozen=True, slots=True)
class SetField:
    """Set-field action on one of eth_dst, eth_src, vlan_vid (a VID), ipv4_src, ipv4_dst, tunnel_id.

    Values are ints (MACs as 48-bit ints); vlan_vid is the 12-bit VID and is
    written with OFPVID_PRESENT, as in matches.
    """

    field: str
    value: int


def _check_uint(name: str, value: object, limit: int) -> None:
    if not isinstance(value, int) or not 0 <= value <= limit:
        raise ValueError(f"{name}={value!r}: must be an integer 0..{limit}")


def _check_pair(name: str, value: object, limit_a: int, limit_b: int) -> tuple[int, int]:
    if not isinstance(value, tuple) or len(value) != 2:
        raise ValueError(f"{name}={value!r}: expected a (value, mask) style pair")
    _check_uint(f"{name}[0]", value[0], limit_a)
    _check_uint(f"{name}[1]", value[1], limit_b)
    return value


def _pack_action(action: object) -> bytes:
    if isinstance(action, Output):
        _check_uint("Output.port", action.port, _U32)
        _check_uint("Output.max_len", action.max_len, _U16)
        return _REC_ACTION.pack(ref.FP_ACT_OUTPUT, 0, action.max_len, action.port, 0)
    if isinstance(action, SetField):
        if action.field not in _SET_FIELDS:
            raise ValueError(f"SetField.field={action.field!r}: must be one of {sorted(_SET_FIELDS)}")
        number, width = _SET_FIELDS[action.field]
        limit = 0xFFF if action.field == "vlan_vid" else (1 << (8 * width)) - 1
        _check_uint(f"SetField({action.field}).value", action.value, limit)
        return _REC_ACTION.pack(ref.FP_ACT_SET_FIELD, number, 0, 0, action.value)
    raise ValueError(f"action {action!r}: expected Output or SetField")


@dataclass(frozen=True)
class FlowSpec:
    """One flow in compact form; see the module docstring for how it is encoded.

    Optional match fields are None when not matched.  Pairs are
    ``(value, mask)`` except ``ipv4_src``/``ipv4_dst`` (``(address, prefix
    length)``) and ``tp_src``/``tp_dst`` (inclusive port range ``(lo, hi)``;
    ``(p, p)`` for one port).  Construction validates ranges and OpenFlow
    prerequisites (IPv4 fields need eth_type 0x0800, ports need ip_proto
    6/17/132, tcp_flags needs ip_proto 6) and raises ValueError.
    """

    table: int
    priority: int
    cookie: int = 0
    in_port: int | None = None
    metadata: tuple[int, int] | None = None
    eth_type: int | None = None
    vlan_vid: int | None = None
    ipv4_src: tuple[int, int] | None = None
    ipv4_dst: tuple[int, int] | None = None
    ip_proto: int | None = None
    tp_src: tuple[int, int] | None = None
    tp_dst: tuple[int, int] | None = None
    tcp_flags: tuple[int, int] | None = None
    apply: tuple[Output | SetField, ...] = ()
    write_metadata: tuple[int, int] | None = None
    goto_table: int | None = None
    idle_timeout: int = 0
    hard_timeout: int = 0
    flags: int = 0
    record: bytes = field(init=False, repr=False, compare=False)
    """The packed record the backends encode (computed once, here)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "record", self._pack())

    def _pack(self) -> bytes:
        """Validate every field (ValueError naming it) and return the packed record."""
        _check_uint("table", self.table, _TABLE_MAX)
        _check_uint("priority", self.priority, _U16)
        _check_uint("cookie", self.cookie, _U64)
        for name in ("idle_timeout", "hard_timeout", "flags"):
            _check_uint(name, getattr(self, name), _U16)
        present = 0
        in_port = eth_type = vlan = ip_proto = goto = 0
        metadata = write_meta = src = dst = tflags = sports = dports = _NO_PAIR
        if self.in_port is not None:
            _check_uint("in_port", self.in_port, _U32)
            present |= ref.FP_HAS_IN_PORT
            in_port = self.in_port
        if self.metadata is not None:
            metadata = _check_pair("metadata", self.metadata, _U64, _U64)
            present |= ref.FP_HAS_METADATA
        if self.eth_type is not None:
            _check_uint("eth_type", self.eth_type, _U16)
            present |= ref.FP_HAS_ETH_TYPE
            eth_type = self.eth_type
        if self.vlan_vid is not None:
            _check_uint("vlan_vid", self.vlan_vid, 0xFFF)
            present |= ref.FP_HAS_VLAN
            vlan = self.vlan_vid
        uses_ipv4 = self.ip_proto is not None or self.ipv4_src is not None or self.ipv4_dst is not None
        if uses_ipv4 and self.eth_type != _ETH_TYPE_IPV4:
            raise ValueError(f"eth_type={self.eth_type!r}: IPv4 and ip_proto matches need eth_type 0x0800")
        if self.ipv4_src is not None:
            src = _check_pair("ipv4_src", self.ipv4_src, _U32, 32)
            present |= ref.FP_HAS_IPV4_SRC
        if self.ipv4_dst is not None:
            dst = _check_pair("ipv4_dst", self.ipv4_dst, _U32, 32)
            present |= ref.FP_HAS_IPV4_DST
        if self.ip_proto is not None:
            _check_uint("ip_proto", self.ip_proto, 0xFF)
            present |= ref.FP_HAS_IP_PROTO
            ip_proto = self.ip_proto
        if self.tp_src is not None:
            sports = self._check_ports("tp_src", self.tp_src)
            present |= ref.FP_HAS_TP_SRC
        if self.tp_dst is not None:
            dports = self._check_ports("tp_dst", self.tp_dst)
            present |= ref.FP_HAS_TP_DST
        if self.tcp_flags is not None:
            tflags = _check_pair("tcp_flags", self.tcp_flags, _U16, _U16)
            if self.ip_proto != _TCP:
                raise ValueError(f"tcp_flags: needs ip_proto 6, not {self.ip_proto!r}")
            present |= ref.FP_HAS_TCP_FLAGS
        if not isinstance(self.apply, tuple) or len(self.apply) > ref.FP_REC_MAX_ACTIONS:
            raise ValueError(f"apply: must be a tuple of at most {ref.FP_REC_MAX_ACTIONS} actions")
        actions = b"".join([_pack_action(a) for a in self.apply])
        if self.write_metadata is not None:
            write_meta = _check_pair("write_metadata", self.write_metadata, _U64, _U64)
            present |= ref.FP_HAS_WRITE_METADATA
        if self.goto_table is not None:
            _check_uint("goto_table", self.goto_table, _TABLE_MAX)
            if self.goto_table <= self.table:
                raise ValueError(f"goto_table={self.goto_table}: must be after table {self.table}")
            present |= ref.FP_HAS_GOTO
            goto = self.goto_table
        header = _REC_HEADER.pack(
            self.cookie, metadata[0], metadata[1], write_meta[0], write_meta[1],
            in_port, src[0], dst[0], present,
            self.priority, eth_type, vlan, sports[0], sports[1], dports[0], dports[1],
            tflags[0], tflags[1], self.idle_timeout, self.hard_timeout, self.flags,
            self.table, src[1], dst[1], ip_proto, goto, len(self.apply), 0,
        )  # fmt: skip
        return header + actions

    def _check_ports(self, name: str, ports: tuple[int, int]) -> tuple[int, int]:
        lo, hi = _check_pair(name, ports, _U16, _U16)
        if lo > hi:
            raise ValueError(f"{name}={ports!r}: port range is reversed")
        if self.ip_proto not in _L4_PROTOS:
            raise ValueError(f"{name}: L4 port matches need ip_proto 6, 17 or 132, not {self.ip_proto!r}")
        return lo, hi


_NO_PAIR = (0, 0)


@dataclass(frozen=True)
class Messages:
    """OpenFlow messages back to back, ready for one socket write."""

    data: bytes
    count: int
    """Number of messages, i.e. of xids used."""

    def split(self) -> list[bytes]:
        """Return the individual messages (each header's length field delimits it)."""
        return split_messages(self.data)


def split_messages(data: bytes) -> list[bytes]:
    """Split back-to-back OpenFlow messages using each header's length."""
    out = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 8:
            raise ValueError(f"truncated OpenFlow header at byte {pos}")
        (length,) = struct.unpack_from("!H", data, pos + 2)
        if length < 8 or pos + length > len(data):
            raise ValueError(f"OpenFlow message at byte {pos} has bad length {length}")
        out.append(data[pos : pos + length])
        pos += length
    return out


def port_range_masks(lo: int, hi: int, *, backend: Backend | None = None) -> list[tuple[int, int]]:
    """Return the minimal ``(value, mask)`` matches covering ports ``lo..hi`` inclusive.

    A mask of 0 (the full range) means "any port"; 0xffff is an exact port.
    """
    b = backend_or_default(backend)
    values, masks = b.new_u16(_MAX_PORT_MASKS), b.new_u16(_MAX_PORT_MASKS)
    try:
        n = b.lib.fp_of_port_masks(lo, hi, values, masks, _MAX_PORT_MASKS)
    except OverflowError:
        n = ref.FP_ERR_PORT
    if n < 0:
        raise error(n, f"port range {lo}-{hi}")
    return [(int(values[i]), int(masks[i])) for i in range(n)]


def _encode(b: Backend, records: bytes, command: int, xid: int, bundle_id: int, flags: int) -> Messages:
    """Run fp_of_encode on a batch of packed records (bundle_id < 0: bare flow-mods)."""
    lib: Any = b.lib
    count = b.new_count()
    args = (records, len(records), command, xid, bundle_id, flags)
    out = b.null
    try:
        # First pass only sizes the output, so the buffer is allocated exactly once.
        size = lib.fp_of_encode(*args, out, 0, count)
        if size >= 0:
            out = b.new_bytes(size)
            size = lib.fp_of_encode(*args, out, size, count)
    except OverflowError:
        size = ref.FP_ERR_ARG
    if size == ref.FP_ERR_ARG or size == ref.FP_ERR_COMMAND:
        raise error(size, f"flow-mod batch (command={command!r}, xid={xid!r}, bundle_id={bundle_id!r})")
    if size < 0:
        raise error(size, f"flow record {count[0]}")
    return Messages(b.read_bytes(out, size), int(count[0]))


def encode_flow_mods(
    specs: Iterable[FlowSpec],
    command: Command = Command.ADD,
    xid: int = 0,
    *,
    backend: Backend | None = None,
) -> Messages:
    """Encode OFPT_FLOW_MOD messages for ``specs``.

    The whole batch crosses into the backend at once (a sizing pass, then the
    encoding pass into one buffer), so FFI overhead is per batch, not per flow.
    """
    records = b"".join([s.record for s in specs])
    return _encode(backend_or_default(backend), records, command, xid, -1, 0)


def bundle_ctrl(
    type_: BundleCtrl,
    bundle_id: int,
    flags: int = ONF_BF_ATOMIC | ONF_BF_ORDERED,
    xid: int = 0,
    *,
    backend: Backend | None = None,
) -> bytes:
    """Encode one ONF bundle control message (os-ken's ONFBundleCtrlMsg, no properties)."""
    b = backend_or_default(backend)
    out = b.new_bytes(24)
    try:
        size = b.lib.fp_of_bundle_ctrl(xid, bundle_id, type_, flags, out, 24)
    except OverflowError:
        size = ref.FP_ERR_ARG
    if size < 0:
        raise error(size, f"bundle control (xid={xid!r}, bundle_id={bundle_id!r}, type={type_!r}, flags={flags!r})")
    return b.read_bytes(out, size)


def encode_bundle_adds(
    specs: Iterable[FlowSpec],
    command: Command = Command.ADD,
    *,
    bundle_id: int,
    xid: int = 0,
    flags: int = ONF_BF_ATOMIC | ONF_BF_ORDERED,
    backend: Backend | None = None,
) -> Messages:
    """Only the bundle-add messages of ``encode_bundle`` (no open, no commit): for a caller that
    builds one bundle from several batches, some encoded elsewhere."""
    records = b"".join([s.record for s in specs])
    return _encode(backend_or_default(backend), records, command, xid, bundle_id, flags)


def encode_bundle(
    specs: Iterable[FlowSpec],
    command: Command = Command.ADD,
    *,
    bundle_id: int,
    xid: int = 0,
    flags: int = ONF_BF_ATOMIC | ONF_BF_ORDERED,
    backend: Backend | None = None,
) -> Messages:
    """Encode open, one bundle-add per flow-mod, and commit, so the switch applies the batch atomically.

    xids run from ``xid`` (open) through the adds to the commit; each
    add's inner flow-mod repeats its add's xid, as EXT-230 requires.
    """
    b = backend_or_default(backend)
    opening = bundle_ctrl(BundleCtrl.OPEN_REQUEST, bundle_id, flags, xid, backend=b)
    adds = encode_bundle_adds(specs, command, bundle_id=bundle_id, xid=(xid + 1) & _U32, flags=flags, backend=b)
    commit_xid = (xid + 1 + adds.count) & _U32
    commit = bundle_ctrl(BundleCtrl.COMMIT_REQUEST, bundle_id, flags, commit_xid, backend=b)
    return Messages(opening + adds.data + commit, adds.count + 2)

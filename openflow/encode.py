"""Flows and groups as OpenFlow 1.3 FLOW_MOD / GROUP_MOD bytes, ready for the session.

Flows that :class:`fastpath.FlowSpec` can express (classifier port flows,
destination EPG, policy rules, table misses: most of a large node's flows)
are encoded by fastpath in one batch per run; the rest (conntrack, groups,
VLAN push/pop, ARP fields, tunnel ids, DSCP, eth address matches) go through
os-ken's ``ofproto_v1_3_parser``, whose bytes fastpath reproduces exactly, so
the two paths are interchangeable (tests/openflow/test_encode.py checks it).
Message k of a batch gets xid ``xid + k``, as in fastpath.

Not responsible for bundling, xid re-stamping or sending: that is the session's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from enum import IntEnum
from itertools import groupby
from types import SimpleNamespace
from typing import Any, cast

from os_ken.ofproto import nicira_ext
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

import fastpath
from fastpath import format_ipv4
from openflow._ofp import match_items
from openflow.flow import (
    IP_TCP,
    SET_FIELDS,
    Action,
    Bucket,
    Ct,
    Flow,
    Group,
    GroupAction,
    LearnBackend,
    Move,
    Output,
    PopVlan,
    PushVlan,
    Resubmit,
    SetField,
    format_mac,
    prefix_len,
)

_DATAPATH = SimpleNamespace(ofproto=ofp, ofproto_parser=parser)
_U32 = 0xFFFFFFFF
_VID_PRESENT = 0x1000
_SELECT_WEIGHT = 100
_NX_NAT_F_DST = 1 << 1  # OVS include/openflow/nicira-ext.h; os-ken does not define it
_NX_IN_PORT = 0xFFF8  # OFPP_IN_PORT in the 16-bit port of resubmit: "resubmit(,table)"
_WIDTH = {"eth_src": 48, "eth_dst": 48, "arp_sha": 48, "arp_tha": 48, "arp_spa": 32, "arp_tpa": 32}
_FASTPATH_SET_FIELDS = {"eth_src": "eth_src", "eth_dst": "eth_dst", "vlan_vid": "vlan_vid", "tun_id": "tunnel_id"}
_FASTPATH_MATCH = frozenset({"in_port", "metadata", "eth_type", "vlan_vid", "ipv4_src", "ipv4_dst", "ip_proto", "tp_src", "tp_dst", "tcp_flags"})


class GroupCommand(IntEnum):
    ADD = ofp.OFPGC_ADD
    MODIFY = ofp.OFPGC_MODIFY
    DELETE = ofp.OFPGC_DELETE


def to_flowspec(flow: Flow) -> fastpath.FlowSpec | None:
    """The fastpath form of ``flow``, or None when FlowSpec cannot express it."""
    fields = {name: (value, mask) for name, value, mask in flow.match}
    if not fields.keys() <= _FASTPATH_MATCH or any(m is not None for n, (_, m) in fields.items() if n in ("tp_src", "tp_dst")):
        return None
    kwargs: dict[str, Any] = {}
    for name, (value, mask) in fields.items():
        if name in ("ipv4_src", "ipv4_dst"):
            length = 32 if mask is None else prefix_len(mask)
            if length is None:
                return None
            kwargs[name] = (value, length)
        elif name in ("tp_src", "tp_dst"):
            kwargs[name] = (value, value)
        elif name in ("metadata", "tcp_flags"):
            kwargs[name] = (value, (1 << (64 if name == "metadata" else 16)) - 1 if mask is None else mask)
        else:
            kwargs[name] = value
    actions: list[fastpath.Output | fastpath.SetField] = []
    for action in flow.actions:
        if isinstance(action, Output):
            actions.append(fastpath.Output(action.port))
        elif isinstance(action, SetField) and action.field in _FASTPATH_SET_FIELDS:
            actions.append(fastpath.SetField(_FASTPATH_SET_FIELDS[action.field], action.value))
        else:
            return None
    return fastpath.FlowSpec(
        flow.table, flow.priority, flow.cookie, apply=tuple(actions),
        write_metadata=flow.write_metadata, goto_table=flow.goto, **kwargs,
    )  # fmt: skip


def _match(flow: Flow) -> parser.OFPMatch:
    fields = {name: (value, mask) for name, value, mask in flow.match}
    proto = "tcp" if fields.get("ip_proto", (0, None))[0] == IP_TCP else "udp"
    kwargs: dict[str, Any] = {}
    for name, (value, mask) in fields.items():
        fmt = {
            "eth_src": format_mac,
            "eth_dst": format_mac,
            "arp_sha": format_mac,
            "ipv4_src": format_ipv4,
            "ipv4_dst": format_ipv4,
            "arp_spa": format_ipv4,
            "arp_tpa": format_ipv4,
        }.get(name)
        key = {"tun_id": "tunnel_id", "tp_src": f"{proto}_src", "tp_dst": f"{proto}_dst"}.get(name, name)
        if name == "vlan_vid":
            value |= _VID_PRESENT
        kwargs[key] = (fmt(value) if fmt else value) if mask is None else ((fmt(value), fmt(mask)) if fmt else (value, mask))
    return parser.OFPMatch(**kwargs)


def record_match(flow: Flow) -> tuple[tuple[str, Any], ...]:
    """``flow``'s match in the form a dumped :class:`~openflow.FlowRecord` carries it."""
    return match_items(_match(flow))


def _set_field(action: SetField) -> Any:
    kind = SET_FIELDS[action.field].fmt
    value: Any = {"mac": format_mac, "ipv4": format_ipv4}.get(kind, lambda v: v)(action.value)
    if kind == "vlan":
        value = action.value | _VID_PRESENT
    return parser.OFPActionSetField(**{"tunnel_id" if action.field == "tun_id" else action.field: value})


def _ct(action: Ct) -> Any:
    nat = []
    if action.nat is not None:
        if action.nat.ip:
            # os-ken writes no padding after a NAT action whose ranges are not 8-byte aligned, which
            # corrupts a group bucket that ends with one; so send exactly 8 bytes of ranges: the
            # address once (max defaults to min in OVS) with the port, or min and max without one.
            ip, port = format_ipv4(action.nat.ip), action.nat.port
            ranges: dict[str, Any] = {"range_proto_min": port, "range_proto_max": port} if port else {"range_ipv4_max": ip}
            nat = [parser.NXActionNAT(_NX_NAT_F_DST, range_ipv4_min=ip, **ranges)]
        else:
            nat = [parser.NXActionNAT(0)]
    flags = nicira_ext.NX_CT_F_COMMIT if action.commit else 0
    return parser.NXActionCT(flags, None, action.zone, action.table, 0, nat)


def _action(action: Action) -> Any:
    if isinstance(action, Output):
        return parser.OFPActionOutput(action.port)
    if isinstance(action, SetField):
        return _set_field(action)
    if isinstance(action, Move):
        return parser.NXActionRegMove(action.src, action.dst, _WIDTH[action.src])
    if isinstance(action, PushVlan):
        return parser.OFPActionPushVlan(action.ethertype)
    if isinstance(action, PopVlan):
        return parser.OFPActionPopVlan()
    if isinstance(action, GroupAction):
        return parser.OFPActionGroup(action.group_id)
    if isinstance(action, Resubmit):
        return parser.NXActionResubmitTable(in_port=_NX_IN_PORT, table_id=action.table)
    if isinstance(action, LearnBackend):
        return _learn(action)
    return _ct(action)


def _learn(learn: LearnBackend) -> Any:
    port = "tcp_dst_nxm" if learn.proto == IP_TCP else "udp_dst_nxm"
    specs = [
        parser.NXFlowSpecMatch(src=0x0800, dst=("eth_type_nxm", 0), n_bits=16),
        parser.NXFlowSpecMatch(src=learn.proto, dst=("ip_proto_nxm", 0), n_bits=8),
        parser.NXFlowSpecMatch(src=("ipv4_src_nxm", 0), dst=("ipv4_src_nxm", 0), n_bits=32),
        parser.NXFlowSpecMatch(src=("ipv4_dst_nxm", 0), dst=("ipv4_dst_nxm", 0), n_bits=32),
        parser.NXFlowSpecMatch(src=(port, 0), dst=(port, 0), n_bits=16),
        parser.NXFlowSpecLoad(src=learn.backend_ip, dst=("reg0", 0), n_bits=32),
        parser.NXFlowSpecLoad(src=learn.backend_port, dst=("reg1", 0), n_bits=16),
    ]
    return parser.NXActionLearn(table_id=learn.table, specs=specs, idle_timeout=learn.idle_timeout, priority=learn.priority, cookie=learn.cookie)


def _instructions(flow: Flow) -> list[Any]:
    out: list[Any] = []
    if flow.actions:
        out.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [_action(a) for a in flow.actions]))
    if flow.write_metadata is not None:
        out.append(parser.OFPInstructionWriteMetadata(*flow.write_metadata))
    if flow.goto is not None:
        out.append(parser.OFPInstructionGotoTable(flow.goto))
    return out


def _serialize(msg: Any, xid: int) -> bytes:
    msg.xid = xid & _U32
    msg.serialize()
    return bytes(msg.buf)


def flow_mod_osken(flow: Flow, command: fastpath.Command, xid: int) -> bytes:
    """One FLOW_MOD through os-ken (strict delete carries no instructions, as in fastpath)."""
    msg = parser.OFPFlowMod(
        _DATAPATH, cookie=flow.cookie, table_id=flow.table, command=int(command), priority=flow.priority,
        buffer_id=ofp.OFP_NO_BUFFER, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=_match(flow),
        instructions=[] if command == fastpath.Command.DELETE_STRICT else _instructions(flow),
    )  # fmt: skip
    return _serialize(msg, xid)


def _runs(flows: Iterable[Flow]) -> Iterator[tuple[bool, list[tuple[Flow, fastpath.FlowSpec | None]]]]:
    pairs = ((f, to_flowspec(f)) for f in flows)
    for fast, run in groupby(pairs, key=lambda pair: pair[1] is not None):
        yield fast, list(run)


def encode_flows(flows: Iterable[Flow], command: fastpath.Command = fastpath.Command.ADD, xid: int = 0) -> fastpath.Messages:
    """FLOW_MODs for ``flows`` in order; fastpath for runs it can express, os-ken for the rest."""
    chunks: list[bytes] = []
    count = 0
    for fast, run in _runs(flows):
        if fast:
            batch = fastpath.encode_flow_mods([spec for _, spec in run if spec is not None], command, (xid + count) & _U32)
            chunks.append(batch.data)
        else:
            chunks += [flow_mod_osken(flow, command, xid + count + k) for k, (flow, _) in enumerate(run)]
        count += len(run)
    return fastpath.Messages(b"".join(chunks), count)


_ONF_EXPERIMENTER = 0x4F4E4600
_ONF_ET_BUNDLE_ADD = 2301
_BUNDLE_FLAGS = fastpath.ONF_BF_ATOMIC | fastpath.ONF_BF_ORDERED


def bundle_add(message: bytes, bundle_id: int, flags: int = _BUNDLE_FLAGS) -> bytes:
    """Wrap one encoded OpenFlow 1.3 message in an ONF bundle-add with the same xid (EXT-230)."""
    xid = int.from_bytes(message[4:8], "big")
    header = struct.pack(
        "!BBHIIIIHH", ofp.OFP_VERSION, ofp.OFPT_EXPERIMENTER, 24 + len(message), xid, _ONF_EXPERIMENTER, _ONF_ET_BUNDLE_ADD, bundle_id, 0, flags
    )
    return header + message


def encode_flow_bundle(changes: Iterable[tuple[fastpath.Command, Iterable[Flow]]], bundle_id: int = 1, xid: int = 0) -> fastpath.Messages:
    """One atomic, ordered bundle (open, adds, commit) applying each (command, flows) in turn, so
    a whole diff lands on the switch at once or not at all; fastpath encodes the runs it can."""
    chunks = [fastpath.bundle_ctrl(fastpath.BundleCtrl.OPEN_REQUEST, bundle_id, _BUNDLE_FLAGS, xid)]
    count = 1
    for command, flows in changes:
        for fast, run in _runs(flows):
            if fast:
                specs = [spec for _, spec in run if spec is not None]
                adds = fastpath.encode_bundle_adds(specs, command, bundle_id=bundle_id, xid=(xid + count) & _U32)
                chunks.append(adds.data)
                count += adds.count
            else:
                for flow, _ in run:
                    chunks.append(bundle_add(flow_mod_osken(flow, command, (xid + count) & _U32), bundle_id))
                    count += 1
    chunks.append(fastpath.bundle_ctrl(fastpath.BundleCtrl.COMMIT_REQUEST, bundle_id, _BUNDLE_FLAGS, (xid + count) & _U32))
    return fastpath.Messages(b"".join(chunks), count + 1)


def group_mod_osken(group: Group, command: GroupCommand, xid: int) -> bytes:
    """One GROUP_MOD through os-ken (select buckets weigh 100; a delete carries no buckets)."""
    weight = _SELECT_WEIGHT if group.type == "select" else 0
    buckets = [
        parser.OFPBucket(weight, ofp.OFPP_ANY, ofp.OFPG_ANY, [_action(a) for a in bucket])
        for bucket in (() if command == GroupCommand.DELETE else group.buckets)
    ]
    kind = ofp.OFPGT_SELECT if group.type == "select" else ofp.OFPGT_ALL
    return _serialize(parser.OFPGroupMod(_DATAPATH, int(command), kind, group.group_id, buckets), xid)


_BUCKET_BYTES: dict[int, dict[Bucket, bytes | None]] = {}  # by weight
_BUCKET_BYTES_MAX = 100_000  # distinct buckets kept per weight; cleared when full
_GROUP_MOD = struct.Struct("!BBHIHBxI")


_BUCKET = struct.Struct("!HHII4x")  # ofp_bucket: len, weight, watch_port, watch_group
_NX_CT = struct.Struct("!HHIHHIHB3xH")  # nx_action_conntrack: type, len, vendor, subtype, flags, zone_src, zone, table, alg
_NX_NAT = struct.Struct("!HHIH2xHH")  # nx_action_nat: type, len, vendor, subtype, flags, range_present
_NX_VENDOR, _NXAST_CT, _NXAST_NAT = 0x00002320, 35, 36
_NAT_IPV4_MIN, _NAT_IPV4_MAX, _NAT_PROTO_MIN, _NAT_PROTO_MAX = 0x01, 0x02, 0x10, 0x20


def ct_bytes(action: Ct) -> bytes:
    """os-ken's bytes for a ct action (:func:`_ct`), packed directly: a service's select group has
    a ct bucket per backend, and os-ken takes milliseconds per bucket (1 000 Services: seconds).
    tests/openflow/test_encode.py checks the two agree byte for byte."""
    nat = b""
    if action.nat is not None and not action.nat.ip:
        nat = _NX_NAT.pack(ofp.OFPAT_EXPERIMENTER, _NX_NAT.size, _NX_VENDOR, _NXAST_NAT, 0, 0)
    elif action.nat is not None:
        ip, port = action.nat.ip, action.nat.port
        present, ranges = (
            (_NAT_IPV4_MIN | _NAT_PROTO_MIN | _NAT_PROTO_MAX, struct.pack("!IHH", ip, port, port))
            if port
            else (_NAT_IPV4_MIN | _NAT_IPV4_MAX, struct.pack("!II", ip, ip))
        )
        nat = _NX_NAT.pack(ofp.OFPAT_EXPERIMENTER, _NX_NAT.size + len(ranges), _NX_VENDOR, _NXAST_NAT, _NX_NAT_F_DST, present) + ranges
    flags = nicira_ext.NX_CT_F_COMMIT if action.commit else 0
    return _NX_CT.pack(ofp.OFPAT_EXPERIMENTER, _NX_CT.size + len(nat), _NX_VENDOR, _NXAST_CT, flags, 0, action.zone, action.table, 0) + nat


def _bucket_bytes(bucket: Bucket, weight: int) -> bytes | None:
    """``bucket`` as os-ken serialises it; None when os-ken leaves it shorter than its length
    field (unaligned actions: then only os-ken's whole-message path reproduces its bytes).
    Buckets of ct actions alone (a service's backends) are packed directly (:func:`ct_bytes`)."""
    if all(isinstance(action, Ct) for action in bucket):
        actions = b"".join(ct_bytes(action) for action in bucket if isinstance(action, Ct))
        return _BUCKET.pack(_BUCKET.size + len(actions), weight, ofp.OFPP_ANY, ofp.OFPG_ANY) + actions
    encoded, buf = parser.OFPBucket(weight, ofp.OFPP_ANY, ofp.OFPG_ANY, [_action(a) for a in bucket]), bytearray()
    encoded.serialize(buf, 0)
    return bytes(buf) if len(buf) == encoded.len else None


def _group_mod(group: Group, command: GroupCommand, xid: int) -> bytes:
    """os-ken's bytes for ``group``, assembled from buckets serialised once each: a flood group
    repeats a bucket per local port, and is modified on every attach and detach."""
    weight = _SELECT_WEIGHT if group.type == "select" else 0
    buckets = () if command == GroupCommand.DELETE else group.buckets
    cache = _BUCKET_BYTES.setdefault(weight, {})
    parts = list(map(cache.get, buckets))
    if None in parts:
        if len(cache) + len(buckets) > _BUCKET_BYTES_MAX:
            cache.clear()
        parts = [cache[b] if b in cache else cache.setdefault(b, _bucket_bytes(b, weight)) for b in buckets]
        if None in parts:
            return group_mod_osken(group, command, xid)
    body = b"".join(cast(list[bytes], parts))
    kind = ofp.OFPGT_SELECT if group.type == "select" else ofp.OFPGT_ALL
    return _GROUP_MOD.pack(ofp.OFP_VERSION, ofp.OFPT_GROUP_MOD, _GROUP_MOD.size + len(body), xid & _U32, int(command), kind, group.group_id) + body


def encode_groups(groups: Iterable[Group], command: GroupCommand = GroupCommand.ADD, xid: int = 0) -> fastpath.Messages:
    """GROUP_MODs for ``groups`` in order, byte for byte what :func:`group_mod_osken` gives."""
    chunks = [_group_mod(group, command, xid + k) for k, group in enumerate(groups)]
    return fastpath.Messages(b"".join(chunks), len(chunks))


def encode_delete_cookie(cookie: int, cookie_mask: int, xid: int = 0) -> bytes:
    """One non-strict FLOW_MOD DELETE of every flow in every table whose cookie matches
    `cookie`/`cookie_mask`: how a reconcile sweeps an old round (diff.round_sweep)."""
    msg = parser.OFPFlowMod(
        _DATAPATH, cookie=cookie, cookie_mask=cookie_mask, table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE,
        buffer_id=ofp.OFP_NO_BUFFER, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=parser.OFPMatch(),
    )  # fmt: skip
    return _serialize(msg, xid)

"""os-ken reference messages for FlowSpecs, for parity tests and the benchmark.

Builds, for a :class:`~fastpath.flowmod.FlowSpec`, the os-ken
``ofproto_v1_3_parser`` objects a hand-written os-ken controller would send
for the same flow, following the mapping in fastpath.flowmod's docstring.
Serialising them gives the bytes fastpath must reproduce exactly.

Lives under tests/ because nothing shipped needs it: only the parity tests and the benchmark.
"""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from fastpath import _reference
from fastpath.flowmod import BundleCtrl, Command, FlowSpec, Output, SetField

DATAPATH = SimpleNamespace(ofproto=ofp, ofproto_parser=parser, id=1)
"""The minimal datapath os-ken messages need to serialise."""

_L4_NAMES = {6: "tcp", 17: "udp", 132: "sctp"}


def _mac(value: int) -> str:
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def _ipv4(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def _masked(value: int, mask: int, full: int) -> Any:
    """os-ken user value for a (value, mask) pair; None means leave the field out."""
    if mask == 0:
        return None
    return value if mask == full else (value, mask)


def _ipv4_match(pair: tuple[int, int]) -> Any:
    addr, prefix = pair
    if prefix == 0:
        return None
    if prefix == 32:
        return _ipv4(addr)
    return (_ipv4(addr), _ipv4((0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF))


def _action(action: Output | SetField) -> Any:
    if isinstance(action, Output):
        return parser.OFPActionOutput(action.port, action.max_len)
    value: Any = action.value
    if action.field in ("eth_src", "eth_dst"):
        value = _mac(value)
    elif action.field in ("ipv4_src", "ipv4_dst"):
        value = _ipv4(value)
    elif action.field == "vlan_vid":
        value |= ofp.OFPVID_PRESENT
    return parser.OFPActionSetField(**{action.field: value})


def _port_list(ports: tuple[int, int] | None) -> list[tuple[int, int] | None]:
    return [None] if ports is None else list(_reference._port_masks(*ports))


def flow_mods(spec: FlowSpec, command: Command = Command.ADD, xid: int = 0) -> list[Any]:
    """Return the os-ken OFPFlowMod objects for ``spec``; message k has xid ``xid + k``."""
    base: dict[str, Any] = {}
    if spec.in_port is not None:
        base["in_port"] = spec.in_port
    if spec.metadata is not None:
        base["metadata"] = _masked(*spec.metadata, (1 << 64) - 1)
    if spec.eth_type is not None:
        base["eth_type"] = spec.eth_type
    if spec.vlan_vid is not None:
        base["vlan_vid"] = ofp.OFPVID_PRESENT | spec.vlan_vid
    if spec.ip_proto is not None:
        base["ip_proto"] = spec.ip_proto
    if spec.ipv4_src is not None:
        base["ipv4_src"] = _ipv4_match(spec.ipv4_src)
    if spec.ipv4_dst is not None:
        base["ipv4_dst"] = _ipv4_match(spec.ipv4_dst)
    if spec.tcp_flags is not None:
        base["tcp_flags"] = _masked(*spec.tcp_flags, 0xFFFF)
    instructions = []
    if command != Command.DELETE_STRICT:
        if spec.apply:
            actions = [_action(a) for a in spec.apply]
            instructions.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
        if spec.write_metadata is not None:
            instructions.append(parser.OFPInstructionWriteMetadata(*spec.write_metadata))
        if spec.goto_table is not None:
            instructions.append(parser.OFPInstructionGotoTable(spec.goto_table))
    l4 = _L4_NAMES.get(spec.ip_proto or 0, "")
    out: list[Any] = []
    for src in _port_list(spec.tp_src):
        for dst in _port_list(spec.tp_dst):
            fields = dict(base)
            if src is not None:
                fields[f"{l4}_src"] = _masked(*src, 0xFFFF)
            if dst is not None:
                fields[f"{l4}_dst"] = _masked(*dst, 0xFFFF)
            match = parser.OFPMatch(**{k: v for k, v in fields.items() if v is not None})
            msg = parser.OFPFlowMod(
                DATAPATH, spec.cookie, 0, spec.table, command, spec.idle_timeout,
                spec.hard_timeout, spec.priority, ofp.OFP_NO_BUFFER, ofp.OFPP_ANY,
                ofp.OFPG_ANY, spec.flags, match, instructions,
            )  # fmt: skip
            msg.set_xid((xid + len(out)) & 0xFFFFFFFF)
            out.append(msg)
    return out


def serialize(msg: Any) -> bytes:
    """Serialise an os-ken message and return its wire bytes."""
    msg.serialize()
    return bytes(msg.buf)


def flow_mod_bytes(specs: list[FlowSpec], command: Command = Command.ADD, xid: int = 0) -> bytes:
    """os-ken's serialisation of what ``encode_flow_mods(specs, command, xid)`` must produce."""
    out = bytearray()
    for spec in specs:
        msgs = flow_mods(spec, command, xid)
        xid += len(msgs)
        out += b"".join(serialize(m) for m in msgs)
    return bytes(out)


def bundle_bytes(specs: list[FlowSpec], command: Command, bundle_id: int, xid: int, flags: int) -> bytes:
    """os-ken's serialisation of what ``encode_bundle(...)`` must produce."""
    out = bytearray()
    opening = parser.ONFBundleCtrlMsg(DATAPATH, bundle_id, BundleCtrl.OPEN_REQUEST, flags, [])
    opening.set_xid(xid)
    out += serialize(opening)
    xid = (xid + 1) & 0xFFFFFFFF
    for spec in specs:
        for inner in flow_mods(spec, command, xid):
            # ONFBundleAddMsg copies its own xid into the inner message, which must not have one yet.
            add = parser.ONFBundleAddMsg(DATAPATH, bundle_id, flags, inner, [])
            add.set_xid(inner.xid)
            inner.xid = None
            out += serialize(add)
            xid = (xid + 1) & 0xFFFFFFFF
    commit = parser.ONFBundleCtrlMsg(DATAPATH, bundle_id, BundleCtrl.COMMIT_REQUEST, flags, [])
    commit.set_xid(xid)
    out += serialize(commit)
    return bytes(out)

"""Render flows and groups as ``ovs-ofctl -O OpenFlow13 --no-stats dump-flows`` / ``dump-groups`` text.

The same strings serve golden unit tests and comparisons against a real
bridge, so the format follows OVS: cookie and table omitted when 0, fields in
OVS's print order with protocol keywords (ip, arp, tcp, udp, icmp), ports and
metadata in hex when masked, ``actions=drop`` for no instructions.  Select
group buckets are printed with weight 100, the weight the encoder gives them.
"""

from __future__ import annotations

from fastpath import format_ipv4
from openflow.flow import (
    ETH_ARP,
    MATCH_FIELDS,
    NXM_NAMES,
    OFPP_IN_PORT,
    SET_FIELDS,
    Action,
    Ct,
    FieldDef,
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

_PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp"}
_CT_STATE_BITS = ("new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat")
_TCP_FLAG_BITS = ("fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns")
_DEFAULT_PRIORITY = 0x8000


def _hex(value: int) -> str:
    """Hex as OVS prints it: ``0x64``, but a bare ``0``."""
    return f"{value:#x}" if value else "0"


def _flags(names: tuple[str, ...], value: int, mask: int) -> str:
    return "".join(("+" if value & (1 << i) else "-") + name for i, name in enumerate(names) if mask & (1 << i))


def _value(spec: FieldDef, value: int, mask: int | None) -> str:
    if spec.fmt == "ct_state":
        return _flags(_CT_STATE_BITS, value, 0xFF if mask is None else mask)
    if spec.fmt == "tcp_flags":
        return _flags(_TCP_FLAG_BITS, value, 0xFFF if mask is None else mask)
    if spec.fmt == "mac":
        return format_mac(value) + ("" if mask is None else "/" + format_mac(mask))
    if spec.fmt == "ipv4":
        if mask is None:
            return format_ipv4(value)
        length = prefix_len(mask)
        return f"{format_ipv4(value)}/{format_ipv4(mask) if length is None else length}"
    if spec.fmt == "vlan":
        return str(value | 0x1000)  # OFPVID_PRESENT, as OVS prints vlan_vid set_field
    if mask is not None:
        return f"{_hex(value)}/{_hex(mask)}"
    return _hex(value) if spec.fmt == "hex" else str(value)


def match_text(flow: Flow) -> str:
    """``priority=N,<fields>`` exactly as OVS prints the match part."""
    fields = {name: (value, mask) for name, value, mask in flow.match}
    proto = fields.get("ip_proto", (0, None))[0]
    keyword = "arp" if fields.get("eth_type", (0, None))[0] == ETH_ARP else _PROTOCOLS.get(proto, "ip")
    parts = [] if flow.priority == _DEFAULT_PRIORITY else [f"priority={flow.priority}"]
    for name, (value, mask) in fields.items():
        if name == "eth_type":
            parts.append(keyword)
        elif name == "ip_proto" and proto in _PROTOCOLS:
            continue
        else:
            parts.append(f"{MATCH_FIELDS[name].ovs}={_value(MATCH_FIELDS[name], value, mask)}")
    return ",".join(parts)


def action_text(action: Action) -> str:
    if isinstance(action, Output):
        return "IN_PORT" if action.port == OFPP_IN_PORT else f"output:{action.port}"
    if isinstance(action, SetField):
        spec = SET_FIELDS[action.field]
        return f"set_field:{_value(spec, action.value, None)}->{spec.ovs}"
    if isinstance(action, Move):
        return f"move:{NXM_NAMES[action.src]}->{NXM_NAMES[action.dst]}"
    if isinstance(action, PushVlan):
        return f"push_vlan:{action.ethertype:#x}"
    if isinstance(action, PopVlan):
        return "pop_vlan"
    if isinstance(action, GroupAction):
        return f"group:{action.group_id}"
    if isinstance(action, Resubmit):
        return f"resubmit(,{action.table})"
    if isinstance(action, LearnBackend):
        return _learn_text(action)
    return _ct_text(action)


def _learn_text(learn: LearnBackend) -> str:
    port_field = "NXM_OF_TCP_DST[]" if learn.proto == 6 else "NXM_OF_UDP_DST[]"
    return (
        f"learn(table={learn.table},idle_timeout={learn.idle_timeout},priority={learn.priority},cookie={_hex(learn.cookie)},"
        f"eth_type=0x800,nw_proto={learn.proto},NXM_OF_IP_SRC[],NXM_OF_IP_DST[],{port_field},"
        f"load:{_hex(learn.backend_ip)}->NXM_NX_REG0[],load:{_hex(learn.backend_port)}->NXM_NX_REG1[0..15])"
    )


def _ct_text(ct: Ct) -> str:
    parts = ["commit"] if ct.commit else []
    parts += [f"table={ct.table}", f"zone={ct.zone}"]
    if ct.nat is not None:
        if not ct.nat.ip:
            parts.append("nat")
        else:
            port = f":{ct.nat.port}" if ct.nat.port else ""
            parts.append(f"nat(dst={format_ipv4(ct.nat.ip)}{port})")
    return f"ct({','.join(parts)})"


def actions_text(flow: Flow) -> str:
    parts = [action_text(a) for a in flow.actions]
    if flow.write_metadata is not None:
        value, mask = flow.write_metadata
        parts.append(f"write_metadata:{_hex(value)}" + ("" if mask == (1 << 64) - 1 else f"/{_hex(mask)}"))
    if flow.goto is not None:
        parts.append(f"goto_table:{flow.goto}")
    return ",".join(parts) or "drop"


def flow_text(flow: Flow, *, cookie: bool = True) -> str:
    """One ``dump-flows --no-stats`` line (without OVS's leading space)."""
    head = ([f"cookie={_hex(flow.cookie)}"] if cookie and flow.cookie else []) + ([f"table={flow.table}"] if flow.table else [])
    return ", ".join([*head, match_text(flow)]) + f" actions={actions_text(flow)}"


def group_text(group: Group) -> str:
    """One ``dump-groups`` line (OpenFlow 1.3)."""
    weight = "weight:100," if group.type == "select" else ""
    buckets = ",".join(f"bucket={weight}actions={','.join(action_text(a) for a in b)}" for b in group.buckets)
    return f"group_id={group.group_id},type={group.type},{buckets}"

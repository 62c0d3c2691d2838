"""The neutral flow and group records the builders return (hashable, ordered, validated).

``fastpath.FlowSpec`` cannot express conntrack, groups, VLAN push/pop, ARP
fields, tunnel ids or DSCP, so builders produce these records instead;
:mod:`openflow.text` renders them to ``ovs-ofctl`` text.  A Flow is only
made through :meth:`openflow.pipeline.Table.flow`, which checks it against
the declared pipeline; this module checks what holds for any table
(field widths and OpenFlow prerequisites).

Match fields use OXM-like names; ``tp_src``/``tp_dst`` mean the TCP or UDP
port according to ``ip_proto`` (as in FlowSpec).  A match is a tuple of
``(field, value, mask)`` in the order OVS prints fields (mask None = exact).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

ETH_IPV4 = 0x0800
ETH_ARP = 0x0806
IP_TCP = 6
IP_UDP = 17
IP_ICMP = 1

OFPP_IN_PORT = 0xFFFFFFF8


def format_mac(value: int) -> str:
    """``aa:bb:cc:dd:ee:ff`` text of a 48-bit MAC (the form OVS and os-ken use)."""
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def prefix_len(mask: int) -> int | None:
    """Length of an IPv4 netmask, or None if ``mask`` is not a CIDR prefix."""
    length = mask.bit_count()
    return length if mask == ((1 << length) - 1) << (32 - length) else None


class PipelineError(ValueError):
    """A flow, group or input that breaks the declared pipeline; the message names the offender."""


@dataclass(frozen=True)
class FieldDef:
    """A match or set-field: width in bits and how OVS prints its value."""

    bits: int
    fmt: str  # dec | hex | mac | ipv4 | vlan | ct_state | tcp_flags
    ovs: str  # name OVS prints in matches


# Insertion order is OVS's match print order (lib/match.c match_format); eth_type and
# ip_proto are printed as a protocol keyword (ip, arp, tcp, udp, icmp) when possible.
MATCH_FIELDS: dict[str, FieldDef] = {
    "ct_state": FieldDef(8, "ct_state", "ct_state"),
    "eth_type": FieldDef(16, "hex", "dl_type"),
    "reg0": FieldDef(32, "hex", "reg0"),
    "reg1": FieldDef(32, "hex", "reg1"),
    "tun_id": FieldDef(64, "hex", "tun_id"),
    "metadata": FieldDef(64, "hex", "metadata"),
    "in_port": FieldDef(32, "dec", "in_port"),
    "vlan_vid": FieldDef(12, "dec", "dl_vlan"),
    "eth_src": FieldDef(48, "mac", "dl_src"),
    "eth_dst": FieldDef(48, "mac", "dl_dst"),
    "ipv4_src": FieldDef(32, "ipv4", "nw_src"),
    "ipv4_dst": FieldDef(32, "ipv4", "nw_dst"),
    "arp_spa": FieldDef(32, "ipv4", "arp_spa"),
    "arp_tpa": FieldDef(32, "ipv4", "arp_tpa"),
    "ip_proto": FieldDef(8, "dec", "nw_proto"),
    "arp_op": FieldDef(16, "dec", "arp_op"),
    "arp_sha": FieldDef(48, "mac", "arp_sha"),
    "tp_src": FieldDef(16, "dec", "tp_src"),
    "tp_dst": FieldDef(16, "dec", "tp_dst"),
    "tcp_flags": FieldDef(12, "tcp_flags", "tcp_flags"),
}
_UNMASKABLE = frozenset({"in_port", "eth_type", "ip_proto", "arp_op", "vlan_vid"})
_PREREQ: dict[str, tuple[str, tuple[int, ...]]] = {
    "ipv4_src": ("eth_type", (ETH_IPV4,)),
    "ipv4_dst": ("eth_type", (ETH_IPV4,)),
    "ip_proto": ("eth_type", (ETH_IPV4,)),
    "arp_spa": ("eth_type", (ETH_ARP,)),
    "arp_tpa": ("eth_type", (ETH_ARP,)),
    "arp_op": ("eth_type", (ETH_ARP,)),
    "arp_sha": ("eth_type", (ETH_ARP,)),
    "tp_src": ("ip_proto", (IP_TCP, IP_UDP)),
    "tp_dst": ("ip_proto", (IP_TCP, IP_UDP)),
    "tcp_flags": ("ip_proto", (IP_TCP,)),
}

SET_FIELDS: dict[str, FieldDef] = {
    "eth_src": FieldDef(48, "mac", "eth_src"),
    "eth_dst": FieldDef(48, "mac", "eth_dst"),
    "vlan_vid": FieldDef(12, "vlan", "vlan_vid"),
    "tun_id": FieldDef(64, "hex", "tun_id"),
    "arp_op": FieldDef(16, "dec", "arp_op"),
    "arp_sha": FieldDef(48, "mac", "arp_sha"),
    "arp_spa": FieldDef(32, "ipv4", "arp_spa"),
    "ip_dscp": FieldDef(6, "dec", "ip_dscp"),
    "reg0": FieldDef(32, "hex", "reg0"),
    "reg1": FieldDef(32, "hex", "reg1"),
}

_FIELD_ORDER = {name: index for index, name in enumerate(MATCH_FIELDS)}  # a match's canonical field order

Match = tuple[tuple[str, int, int | None], ...]
MatchValue = int | tuple[int, int]
"""An exact value, or ``(value, mask)``."""
MatchArg = Mapping[str, MatchValue]


def make_match(fields: MatchArg) -> Match:
    """Validate ``{field: value | (value, mask)}`` and return it in canonical order."""
    out: dict[str, tuple[int, int | None]] = {}
    for name, arg in fields.items():
        spec = MATCH_FIELDS.get(name)
        if spec is None:
            raise PipelineError(f"match field {name!r} is unknown")
        full = (1 << spec.bits) - 1
        value, mask = arg if isinstance(arg, tuple) else (arg, full)
        if not (0 <= value <= full and 0 <= mask <= full):
            raise PipelineError(f"match {name}={value:#x}/{mask:#x}: wider than {spec.bits} bits")
        if value & ~mask:
            raise PipelineError(f"match {name}={value:#x}/{mask:#x}: value has bits outside the mask")
        if mask != full and name in _UNMASKABLE:
            raise PipelineError(f"match field {name} cannot be masked")
        if mask:
            out[name] = (value, None if mask == full else mask)
    if out.get("eth_type", (ETH_IPV4,))[0] not in (ETH_IPV4, ETH_ARP):
        raise PipelineError(f"match eth_type={out['eth_type'][0]:#06x}: the pipeline handles IPv4 and ARP only")
    for name, (req, allowed) in _PREREQ.items():
        if name in out and out.get(req, (None,))[0] not in allowed:
            raise PipelineError(f"match field {name} needs {req} in {[hex(a) for a in allowed]}")
    return tuple((name, *out[name]) for name in sorted(out, key=_FIELD_ORDER.__getitem__))


@dataclass(frozen=True, order=True)
class Output:
    """Send to a port number or an OFPP_* reserved port."""

    port: int


@dataclass(frozen=True, order=True)
class SetField:
    """Write ``value`` to ``field`` (one of SET_FIELDS; vlan_vid is the 12-bit VID)."""

    field: str
    value: int

    def __post_init__(self) -> None:
        spec = SET_FIELDS.get(self.field)
        if spec is None:
            raise PipelineError(f"set_field {self.field!r} is not settable")
        if not 0 <= self.value < (1 << spec.bits):
            raise PipelineError(f"set_field {self.field}={self.value}: wider than {spec.bits} bits")


NXM_NAMES = {  # fields Move may copy, with the NXM names OVS prints
    "eth_src": "NXM_OF_ETH_SRC[]",
    "eth_dst": "NXM_OF_ETH_DST[]",
    "arp_sha": "NXM_NX_ARP_SHA[]",
    "arp_tha": "NXM_NX_ARP_THA[]",
    "arp_spa": "NXM_OF_ARP_SPA[]",
    "arp_tpa": "NXM_OF_ARP_TPA[]",
}


@dataclass(frozen=True, order=True)
class Move:
    """Copy one whole field into another of the same width (names from NXM_NAMES)."""

    src: str
    dst: str

    def __post_init__(self) -> None:
        for name in (self.src, self.dst):
            if name not in NXM_NAMES:
                raise PipelineError(f"move: field {name!r} is not one of {sorted(NXM_NAMES)}")


@dataclass(frozen=True, order=True)
class PushVlan:
    ethertype: int = 0x8100


@dataclass(frozen=True, order=True)
class PopVlan:
    pass


@dataclass(frozen=True, order=True)
class GroupAction:
    group_id: int


@dataclass(frozen=True, order=True)
class Nat:
    """Destination NAT to ``ip:port`` (port 0 = keep the port); ``ip`` 0 = plain ``nat`` (un-NAT only)."""

    ip: int = 0
    port: int = 0


@dataclass(frozen=True, order=True)
class Ct:
    """Send through conntrack, optionally commit, then resubmit to table ``table`` (an id)."""

    table: int
    zone: int
    commit: bool = False
    nat: Nat | None = None


@dataclass(frozen=True, order=True)
class Resubmit:
    """Run table ``table`` (an id) on the packet and come back: how a flow consults a table of
    learned flows, whose entries cannot continue the pipeline themselves."""

    table: int


@dataclass(frozen=True, order=True)
class LearnBackend:
    """sessionAffinity: write into ``table`` a flow matching this packet's client IP, destination
    IP (the VIP), ``proto`` and destination port that loads ``backend_ip`` into reg0 and
    ``backend_port`` into reg1[0..15], expiring after ``idle_timeout`` seconds without a new
    connection (OVS ``learn``; the only kind of learned flow the pipeline uses)."""

    table: int
    idle_timeout: int
    priority: int
    cookie: int
    proto: int
    backend_ip: int
    backend_port: int

    def __post_init__(self) -> None:
        if self.proto not in (IP_TCP, IP_UDP):
            raise PipelineError(f"learn: protocol {self.proto} is not TCP/UDP")
        if not (0 < self.idle_timeout <= 0xFFFF and 0 <= self.backend_port <= 0xFFFF and 0 <= self.backend_ip <= 0xFFFFFFFF):
            raise PipelineError(f"learn: idle_timeout {self.idle_timeout} / backend port {self.backend_port} out of range")


Action = Output | SetField | Move | PushVlan | PopVlan | GroupAction | Ct | Resubmit | LearnBackend


@dataclass(frozen=True)
class Flow:
    """One flow entry; (table, priority, match) is its identity on the switch.

    Flows sort by table, priority, match (:func:`key_order`), then cookie and actions (by repr,
    because actions of different kinds do not compare), so sorted output is
    deterministic even for two flows that share a match.
    """

    table: int
    priority: int
    match: Match
    actions: tuple[Action, ...] = ()
    write_metadata: tuple[int, int] | None = None
    goto: int | None = None
    cookie: int = 0

    @property
    def key(self) -> tuple[int, int, Match]:
        return (self.table, self.priority, self.match)

    def __lt__(self, other: Flow) -> bool:
        return self._order < other._order

    @cached_property
    def _order(self) -> tuple[object, ...]:
        """Computed once per flow: sorting a bridge's flows compares each many times."""
        return (key_order(self.key), self.cookie, repr(self.actions), repr(self.write_metadata), repr(self.goto))


def key_order(key: tuple[int, int, Match]) -> tuple[int, int, tuple[tuple[str, int, int], ...]]:
    """A flow key in a form that always compares: an exact field's mask (None) becomes -1, so an
    exact and a masked field with the same value (``nw_src=10.1.1.0`` and ``10.1.1.0/24``) sort."""
    table, priority, match = key
    return table, priority, tuple((name, value, -1 if mask is None else mask) for name, value, mask in match)


def sort_flows(flows: Iterable[Flow]) -> list[Flow]:
    """``sorted(flows)`` with each flow's order key computed once and compared in C (no ``__lt__`` calls)."""
    return sorted(flows, key=_flow_order)


def _flow_order(flow: Flow) -> tuple[object, ...]:
    return flow._order


Bucket = tuple[Action, ...]


@dataclass(frozen=True)
class Group:
    """An OpenFlow group: ``all`` (flooding) or ``select`` (load balancing); sorts by id."""

    group_id: int
    type: str
    buckets: tuple[Bucket, ...]

    def __post_init__(self) -> None:
        if self.type not in ("all", "select"):
            raise PipelineError(f"group {self.group_id:#x}: type {self.type!r} is not all/select")
        if not self.buckets:
            raise PipelineError(f"group {self.group_id:#x}: has no buckets")

    def __lt__(self, other: Group) -> bool:
        return (self.group_id, self.type, repr(self.buckets)) < (other.group_id, other.type, repr(other.buckets))

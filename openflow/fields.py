"""Every bit the pipeline carries between tables, and the cookie layout, in one place.

Metadata (the 64-bit OpenFlow pipeline field) is the per-packet scratch space the node agent
uses between tables (OVS keeps it across ``ct`` recirculation).  Registers serve one purpose
only: reg0 and reg1[0..15] name a service backend (IP, port) between session_affinity, the
select group and endpoint_dnat, because a learned flow can only load fields.  The metadata bits::

    bit 63..58  unused (must stay 0)
    bit 57      OUTSIDE  packet entered from outside the cluster (not from a pod of it, nor the
                         node itself): its ingress NetworkPolicy is judged here (docs/policy.md)
    bit 56      REMOTE   packet entered from a tunnel or VLAN uplink, not a local port
    bit 55..32  NETWORK  VNI (vxlan bridge) or VLAN id (vlan bridge) of the packet's network
    bit 31..16  SRC_EPG  endpoint-group id of the sending local endpoint (0 = none)
    bit 15..0   DST_EPG  endpoint-group id of the destination endpoint (0 = unknown)

EPG ids are 16 bits because the control plane allocates them from 1..65535
(contivd.netmaster.resources); a wider id would alias another group, so
:meth:`MetaField.value` refuses it instead of truncating.

Cookie (64 bits) = ``round << 48 | category << 40 | object``: the round is
bumped on every agent start so a restart re-adds all flows under the new
round before the old round is deleted; category names the feature that owns
the flow and object a stable 40-bit hash of the owning object's key
(endpoint id, rule id, ...), so one object's flows can be found by cookie.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import IntEnum

_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class MetaField:
    """A bit range of the metadata field."""

    name: str
    offset: int
    width: int

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.offset

    def value(self, value: int) -> int:
        """``value`` shifted into place; ValueError if it does not fit (never truncate)."""
        if not 0 <= value < (1 << self.width):
            raise ValueError(f"{self.name}={value}: does not fit in {self.width} bits")
        return value << self.offset

    def get(self, metadata: int) -> int:
        return (metadata & self.mask) >> self.offset


DST_EPG = MetaField("DST_EPG", 0, 16)
SRC_EPG = MetaField("SRC_EPG", 16, 16)
NETWORK = MetaField("NETWORK", 32, 24)
REMOTE = MetaField("REMOTE", 56, 1)
OUTSIDE = MetaField("OUTSIDE", 57, 1)


def meta(**fields: int) -> tuple[int, int]:
    """``(value, mask)`` setting or matching the named metadata fields, e.g. ``meta(NETWORK=100, REMOTE=0)``."""
    known = {f.name: f for f in (DST_EPG, SRC_EPG, NETWORK, REMOTE, OUTSIDE)}
    value = mask = 0
    for name, v in fields.items():
        field = known[name]
        value |= field.value(v)
        mask |= field.mask
    return value, mask


class Category(IntEnum):
    """Which feature owns a flow (cookie bits 47..40) or a group (group id bits 31..24)."""

    PIPELINE = 1  # table-miss flows
    CLASSIFIER = 2
    SPOOF_GUARD = 3
    ARP = 4
    SERVICE = 5
    DST_EPG = 6
    POLICY = 7
    QOS = 8
    FORWARD = 9
    FLOOD = 10
    ROUTING = 11  # routing mode: the router port, the uplink, learned routes
    NETPOL = 12  # Kubernetes NetworkPolicy rules (object: the rule_id)


ROUND_BITS = 16
CATEGORY_SHIFT = 40
ROUND_SHIFT = 48
OBJECT_MASK = (1 << CATEGORY_SHIFT) - 1
ROUND_MASK = ((1 << ROUND_BITS) - 1) << ROUND_SHIFT


def object_id(key: str, bits: int = 40) -> int:
    """Stable hash of an object key (stable across processes, unlike ``hash()``)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << bits) - 1)


def cookie(category: Category, key: str, round_: int = 0) -> int:
    """The cookie of the flows ``category`` installs for the object named ``key``."""
    if not 0 <= round_ < (1 << ROUND_BITS):
        raise ValueError(f"round={round_}: does not fit in {ROUND_BITS} bits")
    return (round_ << ROUND_SHIFT) | (int(category) << CATEGORY_SHIFT) | object_id(key)


def with_round(cookie_: int, round_: int) -> int:
    """``cookie_`` moved to ``round_`` (category and object unchanged)."""
    if not 0 <= round_ < (1 << ROUND_BITS):
        raise ValueError(f"round={round_}: does not fit in {ROUND_BITS} bits")
    return (cookie_ & ~ROUND_MASK & _U64) | (round_ << ROUND_SHIFT)


def round_of(cookie_: int) -> int:
    return (cookie_ & ROUND_MASK) >> ROUND_SHIFT


def group_id(category: Category, key: str) -> int:
    """Group id = category << 24 | 24-bit hash of the key; desired state rejects collisions."""
    return (int(category) << 24) | object_id(key, 24)


CT_ZONE = 0xFFF0
"""Conntrack zone of all service connections: one zone, so the DNAT committed on a
client's packet is found again by the reply arriving from a tunnel.  Cost: two
tenants with an identical 5-tuple through the same node share conntrack entries."""

"""Cluster-wide tag allocation: VLANs, VXLAN VNIs, local VLANs and EPG ids, as pure functions.

One state object (layout.TAGS_STATE) holds a fastpath bitset per kind; a set bit is a tag in
use. Allocation takes the lowest free tag inside the configured global ranges, or checks a
requested one. EPG ids are persisted and reused only after release (Contiv kept a volatile
counter that restarted at 1 after a failover, so ids could collide).
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from fastpath import Bitset

from ..model import ConflictError, TagRange

State = dict[str, Any]
TagKind = Literal["vlan", "vxlan", "localVlan", "epgId"]

_SIZES: dict[str, int] = {"vlan": 4096, "vxlan": 1 << 24, "localVlan": 4096, "epgId": 1 << 16}
_FULL_RANGE: dict[str, tuple[TagRange, ...]] = {
    "localVlan": (TagRange(1, 4094),),
    "epgId": (TagRange(1, 65535),),
}
_NAMES = {"vlan": "vlans", "vxlan": "vxlans", "localVlan": "local vlans", "epgId": "endpoint group ids"}


def new_tags_state() -> State:
    return {kind: base64.b64encode(Bitset(size).to_bytes()).decode() for kind, size in _SIZES.items()}


def _bits(state: State, kind: str) -> Bitset:
    return Bitset.from_bytes(base64.b64decode(state[kind]))


def _store(state: State, kind: str, bits: Bitset) -> None:
    state[kind] = base64.b64encode(bits.to_bytes()).decode()


def allocate(state: State, kind: TagKind, ranges: tuple[TagRange, ...] = (), requested: int = 0) -> int:
    """Take `requested` (0 = the lowest free tag in `ranges`); mutates `state`."""
    ranges = ranges or _FULL_RANGE[kind]
    bits = _bits(state, kind)
    if requested:
        if not any(requested in r for r in ranges):
            raise ConflictError(f"requested {kind} {requested} is out of range {', '.join(map(str, ranges))}")
        if bits.set(requested):
            raise ConflictError(f"requested {kind} not available - {kind}:{requested}")
        _store(state, kind, bits)
        return requested
    for tag_range in ranges:
        found = bits.next_clear(tag_range.first)
        if found is not None and found <= tag_range.last:
            bits.set(found)
            _store(state, kind, bits)
            return found
    raise ConflictError(f"no {_NAMES[kind]} available")


def release(state: State, kind: TagKind, tag: int) -> None:
    if tag:
        bits = _bits(state, kind)
        bits.clear(tag)
        _store(state, kind, bits)


def in_use(state: State, kind: TagKind) -> list[int]:
    """Every allocated tag of a kind, ascending (for range-change checks and inspect)."""
    bits = _bits(state, kind)
    used: list[int] = []
    index = bits.next_set(0)
    while index is not None:
        used.append(index)
        index = bits.next_set(index + 1) if index + 1 < bits.nbits else None
    return used

"""Cluster-wide tag allocation: VLANs, VXLAN VNIs, local VLANs and EPG ids, as pure functions.

One record (contivd.state's TagsState) holds a fastpath bitset per kind; a set bit is a tag in
use. Allocation takes the lowest free tag inside the configured global ranges, or checks a
requested one. EPG ids are persisted and reused only after release (Contiv kept a volatile
counter that restarted at 1 after a failover, so ids could collide).
"""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Literal

from fastpath import Bitset

from ..model import ConflictError, TagRange
from ..state import TagsState

TagKind = Literal["vlan", "vxlan", "localVlan", "epgId"]

_SIZES: dict[str, int] = {"vlan": 4096, "vxlan": 1 << 24, "localVlan": 4096, "epgId": 1 << 16}
_FULL_RANGE: dict[str, tuple[TagRange, ...]] = {
    "localVlan": (TagRange(1, 4094),),
    "epgId": (TagRange(1, 65535),),
}
_FIELDS: dict[str, str] = {"vlan": "vlan", "vxlan": "vxlan", "localVlan": "local_vlan", "epgId": "epg_id"}
_NAMES = {"vlan": "vlans", "vxlan": "vxlans", "localVlan": "local vlans", "epgId": "endpoint group ids"}


def new_tags_state() -> TagsState:
    empty = {kind: base64.b64encode(Bitset(size).to_bytes()).decode() for kind, size in _SIZES.items()}
    return TagsState(**{_FIELDS[kind]: bits for kind, bits in empty.items()})


def _bits(tags: TagsState, kind: str) -> Bitset:
    return Bitset.from_bytes(base64.b64decode(getattr(tags, _FIELDS[kind])))


def _with(tags: TagsState, kind: str, bits: Bitset) -> TagsState:
    return replace(tags, **{_FIELDS[kind]: base64.b64encode(bits.to_bytes()).decode()})


def allocate(tags: TagsState, kind: TagKind, ranges: tuple[TagRange, ...] = (), requested: int = 0) -> tuple[TagsState, int]:
    """Take `requested` (0 = the lowest free tag in `ranges`): the tags with it taken, and the tag."""
    ranges = ranges or _FULL_RANGE[kind]
    bits = _bits(tags, kind)
    if requested:
        if not any(requested in r for r in ranges):
            raise ConflictError(f"requested {kind} {requested} is out of range {', '.join(map(str, ranges))}")
        if bits.set(requested):
            raise ConflictError(f"requested {kind} not available - {kind}:{requested}")
        return _with(tags, kind, bits), requested
    for tag_range in ranges:
        found = bits.next_clear(tag_range.first)
        if found is not None and found <= tag_range.last:
            bits.set(found)
            return _with(tags, kind, bits), found
    raise ConflictError(f"no {_NAMES[kind]} available")


def release(tags: TagsState, kind: TagKind, tag: int) -> TagsState:
    """The tags with `tag` free again (0: no tag, nothing changes)."""
    if not tag:
        return tags
    bits = _bits(tags, kind)
    bits.clear(tag)
    return _with(tags, kind, bits)


def in_use(tags: TagsState, kind: TagKind) -> list[int]:
    """Every allocated tag of a kind, ascending (for range-change checks and inspect)."""
    bits = _bits(tags, kind)
    used: list[int] = []
    index = bits.next_set(0)
    while index is not None:
        used.append(index)
        index = bits.next_set(index + 1) if index + 1 < bits.nbits else None
    return used

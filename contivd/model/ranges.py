"""VLAN and VXLAN tag ranges as Contiv writes them (`"1-4094"`, `"100-200,300-400"`).

The `global` object carries one range per encapsulation; the allocators hand out tags from it and
refuse requested tags outside it. This module owns only the text form, its limits and membership:
which tags are *in use* is allocator state, passed in by the caller.

Limits follow Contiv's `netutils.ParseTagRanges`: VLAN lists may have several comma-separated
ranges, VXLAN exactly one range at most 16000 wide with VNIs up to 65535. One deliberate change:
VLAN 4095 is refused (802.1Q reserves it and Contiv's allocator never hands it out anyway).
The REST regex of `global.vlans` still admits a single `a-b` only; lists are for internal callers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class TagSpace:
    """One tag namespace and the limits a range in it must respect."""

    name: str
    max_tag: int
    max_ranges: int | None = None
    max_width: int | None = None


VLAN = TagSpace("vlan", max_tag=4094)
VXLAN = TagSpace("vxlan", max_tag=65535, max_ranges=1, max_width=16000)


@dataclass(frozen=True, order=True)
class TagRange:
    """An inclusive run of tags `first..last`."""

    first: int
    last: int

    def __contains__(self, tag: object) -> bool:
        return isinstance(tag, int) and self.first <= tag <= self.last

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


def parse_tag_ranges(text: str, space: TagSpace) -> tuple[TagRange, ...]:
    """Parse `"a-b[,c-d...]"` (a bare `"a"` means `a-a`) into sorted, disjoint ranges.

    Raises `ValueError` naming the bad piece; `""` parses to `()` (no tags allowed).
    """
    if text == "":
        return ()
    pieces = [piece.strip() for piece in text.split(",")]
    if space.max_ranges is not None and len(pieces) > space.max_ranges:
        raise ValueError(f"{space.name} takes at most {space.max_ranges} range, got {len(pieces)}")
    ranges = sorted(_parse_one(piece, space) for piece in pieces)
    for before, after in pairwise(ranges):
        if after.first <= before.last:
            raise ValueError(f"{space.name} ranges {before} and {after} overlap")
    return tuple(ranges)


def _parse_one(piece: str, space: TagSpace) -> TagRange:
    bounds = piece.split("-")
    if len(bounds) > 2 or not all(bound.isdigit() and bound.isascii() for bound in bounds):
        raise ValueError(f"invalid {space.name} range {piece!r}, expected 'min-max' like '10-50'")
    first, last = int(bounds[0]), int(bounds[-1])
    if first < 1:
        raise ValueError(f"invalid {space.name} range {piece!r}, tags start at 1")
    if first > last:
        raise ValueError(f"invalid {space.name} range {piece!r}, min is greater than max")
    if last > space.max_tag:
        raise ValueError(f"invalid {space.name} range {piece!r}, {space.name} tags stop at {space.max_tag}")
    if space.max_width is not None and last - first > space.max_width:
        raise ValueError(f"invalid {space.name} range {piece!r}, a range spans at most {space.max_width} tags")
    return TagRange(first, last)


def in_ranges(tag: int, ranges: Iterable[TagRange]) -> bool:
    """Whether `tag` lies in any of `ranges`."""
    return any(tag in one for one in ranges)


def format_tag_ranges(ranges: Iterable[TagRange]) -> str:
    """The inverse of `parse_tag_ranges`: `"a-b,c-d"`."""
    return ",".join(str(one) for one in ranges)


def format_tags(tags: Iterable[int]) -> str:
    """Tags as maximal runs, the way `global` inspect shows tags in use: `"1, 10-12"`."""
    runs: list[list[int]] = []
    for tag in sorted(set(tags)):
        if runs and tag == runs[-1][1] + 1:
            runs[-1][1] = tag
        else:
            runs.append([tag, tag])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)

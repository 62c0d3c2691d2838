"""Tag ranges: Contiv's ParseTagRanges limits and the formats global shows."""

from __future__ import annotations

import pytest

from contivd.model import VLAN, VXLAN, TagRange, TagSpace, format_tag_ranges, format_tags, in_ranges, parse_tag_ranges


@pytest.mark.parametrize(
    ("text", "space", "expected"),
    [
        ("1-4094", VLAN, (TagRange(1, 4094),)),
        ("100-200,300-400", VLAN, (TagRange(100, 200), TagRange(300, 400))),
        ("300-400, 100-200", VLAN, (TagRange(100, 200), TagRange(300, 400))),
        ("7", VLAN, (TagRange(7, 7),)),
        ("1-10000", VXLAN, (TagRange(1, 10000),)),
        ("50000-65535", VXLAN, (TagRange(50000, 65535),)),
        ("", VLAN, ()),
    ],
)
def test_parse(text: str, space: TagSpace, expected: tuple[TagRange, ...]) -> None:
    assert parse_tag_ranges(text, space) == expected


@pytest.mark.parametrize(
    ("text", "space", "problem"),
    [
        ("0-4094", VLAN, "tags start at 1"),
        ("1-5000", VLAN, "stop at 4094"),
        ("1-4095", VLAN, "stop at 4094"),
        ("10-5", VLAN, "min is greater than max"),
        ("1?2", VLAN, "expected 'min-max'"),
        ("abcd", VLAN, "expected 'min-max'"),
        ("1-2-3", VLAN, "expected 'min-max'"),
        ("100-200,150-300", VLAN, "overlap"),
        ("1-100000", VXLAN, "stop at 65535"),
        ("1-20000", VXLAN, "at most 16000"),
        ("1-10,20-30", VXLAN, "at most 1 range"),
    ],
)
def test_parse_rejects(text: str, space: TagSpace, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_tag_ranges(text, space)


def test_membership_and_formatting() -> None:
    ranges = parse_tag_ranges("100-200,300-400", VLAN)
    assert in_ranges(100, ranges) and in_ranges(350, ranges)
    assert not in_ranges(99, ranges) and not in_ranges(250, ranges)
    assert format_tag_ranges(ranges) == "100-200,300-400"
    assert format_tags([12, 1, 10, 11, 11]) == "1, 10-12"
    assert format_tags([]) == ""

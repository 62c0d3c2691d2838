"""The pipeline declaration enforces itself; field and cookie layouts hold."""

from __future__ import annotations

import dataclasses

import pytest

from openflow import fields
from openflow.desired import desired
from openflow.diff import round_sweep
from openflow.flow import (
    ETH_ARP,
    ETH_IPV4,
    Ct,
    Move,
    Output,
    PipelineError,
    SetField,
    make_match,
)
from openflow.pipeline import PIPELINE, TABLES, Tables, TableSpec
from tests.openflow.scenario import node_a


def test_table_ids_follow_declaration_order() -> None:
    assert [TABLES[s.name].id for s in PIPELINE] == list(range(len(PIPELINE)))
    assert list(TABLES) == [s.name for s in PIPELINE]


def test_every_table_has_exactly_one_miss_flow_with_its_declared_behaviour() -> None:
    misses = [f for f in desired(node_a()).flows if f.priority == 0]
    assert [(f.table, f.match, f.goto) for f in misses] == [(TABLES[s.name].id, (), None if s.miss is None else TABLES[s.miss].id) for s in PIPELINE]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"next": ("nowhere",)}, "unknown or not later"),
        ({"miss": "policy"}, "miss target"),
    ],
)
def test_bad_declarations_are_rejected(change: dict[str, object], message: str) -> None:
    specs = list(PIPELINE)
    specs[0] = dataclasses.replace(specs[0], **change)  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match=message):
        Tables(tuple(specs))


def test_backward_next_table_and_duplicate_names_are_rejected() -> None:
    backwards = (*PIPELINE, TableSpec("late", "x", "x", frozenset(), next=("classifier",)))
    with pytest.raises(PipelineError, match="not later"):
        Tables(backwards)
    with pytest.raises(PipelineError, match="declared twice"):
        Tables((*PIPELINE, PIPELINE[0]))


def test_unknown_table_name_fails() -> None:
    with pytest.raises(PipelineError, match="'routing' is not in the pipeline"):
        TABLES["routing"]


@pytest.mark.parametrize(
    "table, kwargs, message",
    [
        ("policy", {"match": {"in_port": 1}}, r"may not match \['in_port'\]"),
        ("classifier", {"match": {"in_port": 1}, "goto": "policy"}, "goto 'policy' is not an allowed next"),
        ("qos", {"match": {}, "actions": (SetField("eth_dst", 1),)}, "may not set eth_dst"),
        ("dst_epg", {"match": {}, "actions": (Move("eth_src", "arp_tha"),)}, "may not set arp_tha"),
        ("conntrack", {"match": {}, "actions": (Ct(TABLES["policy"].id, 1),)}, "ct may not resubmit"),
        ("forward", {"match": {}, "priority": 70000}, "priority 70000"),
    ],
)
def test_table_rejects_what_its_spec_does_not_declare(table: str, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"priority": 1, "cookie": 0, **kwargs}
    priority, match = args.pop("priority"), args.pop("match")
    with pytest.raises(PipelineError, match=message):
        TABLES[table].flow(priority, match, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "match, message",
    [
        ({"ipv4_dst": 1}, "needs eth_type"),
        ({"eth_type": ETH_ARP, "ipv4_dst": 1}, "needs eth_type"),
        ({"eth_type": ETH_IPV4, "ip_proto": 1, "tp_dst": 80}, "needs ip_proto"),
        ({"eth_type": ETH_IPV4, "ip_proto": 17, "tcp_flags": (2, 2)}, "needs ip_proto"),
        ({"metadata": (1, 0)}, "outside the mask"),
        ({"vlan_vid": 4096}, "wider than 12 bits"),
        ({"in_port": (1, 1)}, "cannot be masked"),
        ({"nw_dst": 1}, "unknown"),
    ],
)
def test_match_validation(match: dict[str, object], message: str) -> None:
    with pytest.raises(PipelineError, match=message):
        make_match(match)  # type: ignore[arg-type]


def test_match_is_canonical_and_drops_wildcards() -> None:
    a = make_match({"tp_dst": 80, "ip_proto": 6, "eth_type": ETH_IPV4, "metadata": (0, 0)})
    b = make_match({"eth_type": ETH_IPV4, "ip_proto": 6, "tp_dst": (80, 0xFFFF)})
    assert a == b == (("eth_type", ETH_IPV4, None), ("ip_proto", 6, None), ("tp_dst", 80, None))


def test_actions_validate_themselves() -> None:
    with pytest.raises(PipelineError, match="not settable"):
        SetField("ipv4_dst", 1)
    with pytest.raises(PipelineError, match="wider than 6 bits"):
        SetField("ip_dscp", 64)
    with pytest.raises(PipelineError, match="not one of"):
        Move("ipv4_src", "eth_dst")
    assert Output(3) == Output(3)


def test_metadata_layout_refuses_values_that_would_alias() -> None:
    assert fields.meta(NETWORK=100, SRC_EPG=5, REMOTE=0) == (0x6400050000, 0x1FFFFFFFFFF0000)
    assert fields.SRC_EPG.get(0x6400050000) == 5
    with pytest.raises(ValueError, match="SRC_EPG=65536: does not fit in 16 bits"):
        fields.meta(SRC_EPG=65536)
    masks = [f.mask for f in (fields.DST_EPG, fields.SRC_EPG, fields.NETWORK, fields.REMOTE)]
    assert sum(masks) == masks[0] | masks[1] | masks[2] | masks[3]  # no overlap


def test_cookie_is_round_category_object() -> None:
    c = fields.cookie(fields.Category.POLICY, "rule-1", 3)
    assert c >> 48 == 3 and (c >> 40) & 0xFF == fields.Category.POLICY
    assert c & fields.OBJECT_MASK == fields.object_id("rule-1")
    assert fields.round_of(fields.with_round(c, 4)) == 4
    assert fields.with_round(c, 4) & ~fields.ROUND_MASK == c & ~fields.ROUND_MASK
    assert round_sweep(3) == (3 << 48, 0xFFFF << 48)
    with pytest.raises(ValueError, match="round=65536"):
        fields.cookie(fields.Category.POLICY, "rule-1", 1 << 16)


def test_group_buckets_obey_the_table_that_uses_them() -> None:
    with pytest.raises(PipelineError, match="table qos: may not set tun_id"):
        TABLES["qos"].group(1, "all", ((SetField("tun_id", 1), Output(1)),))
    with pytest.raises(PipelineError, match="has no buckets"):
        TABLES["forward"].group(1, "all", ())

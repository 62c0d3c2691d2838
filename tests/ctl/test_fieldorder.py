"""netctl's JSON field order (contivd/ctl/fieldorder.py): pure, no server."""

from __future__ import annotations

import json

import pytest

from contivd.ctl import output
from contivd.ctl.commands import RESOURCES, SHOWS
from contivd.ctl.fieldorder import STRUCTS, ordered


def test_inspect_puts_config_then_oper_each_in_go_declaration_order() -> None:
    answer = {
        "Oper": {"pktTag": 1, "endpoints": [{"vtepIP": "", "ipAddress": ["198.18.1.2", ""], "containerName": "c"}], "allocatedAddressesCount": 1},
        "Config": {"tenantName": "t", "subnet": "198.18.1.0/24", "networkName": "n", "key": "t:n", "link-sets": {}, "links": {}},
    }
    shown = ordered(answer, "NetworkInspect")
    assert list(shown) == ["Config", "Oper"]
    assert list(shown["Config"]) == ["key", "networkName", "subnet", "tenantName", "link-sets", "links"]
    assert list(shown["Oper"]) == ["allocatedAddressesCount", "endpoints", "pktTag"]
    assert list(shown["Oper"]["endpoints"][0]) == ["containerName", "ipAddress", "vtepIP"]
    assert shown == answer  # only the order changes


def test_links_are_ordered_and_link_maps_sorted_by_key_as_go_encodes_maps() -> None:
    config = {
        "links": {"Tenant": {"key": "t", "type": "tenant"}},
        "link-sets": {"Networks": {"t:b": {"key": "t:b", "type": "network"}, "t:a": {"key": "t:a", "type": "network"}}},
        "tenantName": "t",
        "key": "t",
    }
    shown = ordered([config], "[]Tenant")[0]
    assert list(shown) == ["key", "tenantName", "link-sets", "links"]
    assert list(shown["link-sets"]["Networks"]) == ["t:a", "t:b"]
    assert list(shown["link-sets"]["Networks"]["t:a"]) == ["type", "key"]


def test_fields_netctl_does_not_know_follow_the_known_ones_in_the_servers_order() -> None:
    shown = ordered({"zeta": 1, "tenantName": "t", "alpha": 2, "key": "t"}, "Tenant")
    assert list(shown) == ["key", "tenantName", "zeta", "alpha"]


@pytest.mark.parametrize("value", [None, "text", 3, ["x"], {"Config": "not an object"}])
def test_a_value_of_an_unexpected_shape_is_left_as_sent(value: object) -> None:
    assert ordered(value, "TenantInspect") == value


def test_no_model_prints_the_answer_as_sent() -> None:
    assert list(ordered({"b": 1, "a": 2}, None)) == ["b", "a"]


def test_as_json_keeps_the_order_it_is_given() -> None:
    assert output.as_json(ordered({"tenantName": "t", "key": "t"}, "Tenant")) == '{\n  "key": "t",\n  "tenantName": "t"\n}\n'


def test_every_declared_model_and_nested_type_exists() -> None:
    """A typo in a model name would print the server's order silently: every name resolves."""
    named = [r.model for r in RESOURCES] + [f"{r.model}Inspect" for r in RESOURCES if r.name != "rule"]
    named += [s.model.removeprefix("[]") for s in SHOWS if s.model]
    nested = [
        kind.removeprefix("[]").removeprefix("{}")
        for fields in STRUCTS.values()
        for field in fields
        if isinstance(field, tuple)
        for kind in [field[1]]
    ]
    missing = {name for name in named + nested if name not in STRUCTS}
    assert not missing


def test_the_order_survives_a_json_round_trip() -> None:
    """ctl decodes the server's body into dicts, which keep the order it prints."""
    text = output.as_json(ordered(json.loads('{"Oper": {}, "Config": {"key": "global", "arpMode": "proxy"}}'), "GlobalInspect"))
    assert text.index('"Config"') < text.index('"Oper"') and text.index('"key"') < text.index('"arpMode"')

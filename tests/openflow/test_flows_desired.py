"""Desired state is deterministic and collision-checked; diff plans are minimal and hitless."""

from __future__ import annotations

import dataclasses

import pytest

from openflow.desired import desired
from openflow.diff import Plan, diff
from openflow.fields import OBJECT_MASK, Category, object_id, round_of
from openflow.flow import ETH_IPV4, PipelineError
from tests.openflow.scenario import IP, MAC, node_a
from tests.support.fakeswitch import FakeSwitch


def test_desired_is_deterministic_whatever_the_input_order() -> None:
    a = node_a()
    shuffled = dataclasses.replace(a, local_ports=a.local_ports[::-1], rules=a.rules[::-1])
    assert desired(a) == desired(shuffled)
    assert list(desired(a).flows) == sorted(desired(a).flows)


def test_every_cookie_carries_the_round_and_a_category() -> None:
    cookies = [f.cookie for f in desired(node_a(round_=7)).flows]
    assert {round_of(c) for c in cookies} == {7}
    assert {(c >> 40) & 0xFF for c in cookies} == {int(c) for c in Category} - {Category.ROUTING}  # node A bridges (no router)


def test_two_objects_claiming_one_match_fail_loudly() -> None:
    a = node_a()
    clash = dataclasses.replace(a.local_ports[1], endpoint_id="other", ofport=a.local_ports[0].ofport)
    with pytest.raises(PipelineError, match="two flows with one match in table 0 priority 100"):
        desired(dataclasses.replace(a, local_ports=(a.local_ports[0], clash)))


def test_diff_from_nothing_adds_everything_groups_first() -> None:
    want = desired(node_a())
    plan = diff(want)
    assert plan == Plan(add_groups=want.groups, add_flows=want.flows)
    assert diff(want, want.flows, want.groups).empty


def test_restart_readds_every_flow_under_the_new_round_and_deletes_nothing() -> None:
    old, new = desired(node_a(round_=1)), desired(node_a(round_=2))
    plan = diff(new, old.flows, old.groups)
    assert plan.add_flows == new.flows and not plan.delete_flows and not plan.add_groups and not plan.modify_groups


def _web1_to_db1(switch: FakeSwitch) -> list[int]:
    return switch.send(
        3,
        eth_src=MAC["web1"],
        eth_dst=MAC["db1"],
        eth_type=ETH_IPV4,
        ipv4_src=IP["web1"],
        ipv4_dst=IP["db1"],
        ip_proto=1,
    ).ports


def test_restart_never_leaves_a_window_without_forwarding() -> None:
    old, new = desired(node_a(round_=1)), desired(node_a(round_=2))
    switch = FakeSwitch.with_state(old)
    plan = diff(new, old.flows, old.groups)
    for flow in plan.add_flows:
        switch.apply(Plan(add_flows=(flow,)))
        assert _web1_to_db1(switch) == [4]
    assert {round_of(f.cookie) for f in switch.flows.values()} == {2}


def test_removing_an_endpoint_deletes_its_flows_and_shrinks_the_flood_groups() -> None:
    before = desired(node_a())
    a = node_a()
    after = desired(dataclasses.replace(a, local_ports=a.local_ports[:1]))
    plan = diff(after, before.flows, before.groups)
    assert {f.cookie & OBJECT_MASK for f in plan.delete_flows} == {object_id("blue.t-db1")}
    assert len(plan.delete_flows) == 8  # classifier, 2 spoof guard, arp, dst_epg, dscp, forward, from outside
    assert not plan.add_flows and not plan.delete_groups
    assert len(plan.modify_groups) == 2


def test_removing_a_service_deletes_its_group_after_its_flows() -> None:
    before, after = desired(node_a()), desired(node_a(services=()))
    plan = diff(after, before.flows, before.groups)
    assert len(plan.delete_groups) == 1 and len(plan.delete_flows) == 3  # VIP ARP, the VIP:port flow, the drop of the rest
    switch = FakeSwitch.with_state(before)
    switch.apply(plan)  # the fake refuses dangling group references
    assert sorted(switch.flows.values()) == list(after.flows)

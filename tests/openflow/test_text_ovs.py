"""Our ovs-ofctl text is what real Open vSwitch prints: load every desired flow and group, dump, compare."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from openflow.desired import Desired, desired
from openflow.inputs import NetpolPod, NodeInputs
from openflow.text import flow_text, group_text
from tests.openflow.ovs_fixture import Ovs, fixture_ovs, fixture_ovs_instance  # noqa: F401  (pytest fixtures)
from tests.openflow.scenario import KUBE_WEB, RED_VLAN, ep, kube_service_of, local_of, node_a, remote_of
from tests.openflow.test_flows_netpol import DB_RULES
from tests.openflow.test_flows_policy import rule
from tests.openflow.test_flows_routing import routed_node

pytestmark = pytest.mark.ovs
UNUSED_CONTROLLER_PORT = 9  # discard: the bridge never connects, flows come from ovs-ofctl


AFFINE = (dataclasses.replace(kube_service_of(KUBE_WEB), affinity_timeout=10800),)  # learn, resubmit, registers


def _vxlan_with_varied_rules() -> Desired:
    a = node_a()
    more = (
        rule(RuleId="x1", SrcEndpointGroup=100, DstEndpointGroup=200, SrcIpAddr="198.19.10.10/24",
             DstIpAddr="198.18.1.1/24", IpProtocol=6, SrcPort=200, DstPort=100, TcpFlags="syn,!ack"),
        rule(RuleId="x2", DstEndpointGroup=9, IpProtocol=17, SrcPort=53, Action="deny"),
        rule(RuleId="x3", SrcEndpointGroup=9, IpProtocol=1, Priority=3),
    )  # fmt: skip
    return desired(dataclasses.replace(a, rules=a.rules + more, services=a.services + AFFINE, netpol=(NetpolPod("prod/db", DB_RULES),)))


def _vlan() -> Desired:
    return desired(
        NodeInputs(
            "vlan",
            (local_of(ep("a", "198.18.2.2", 0, RED_VLAN), RED_VLAN, None, 3),),
            (remote_of(ep("b", "198.18.2.3", 0, RED_VLAN), RED_VLAN),),
            uplinks=(9, 8),
        )
    )


def _routed_vlan() -> Desired:
    return desired(routed_node())


@pytest.mark.parametrize("build", [_vxlan_with_varied_rules, _vlan, _routed_vlan])
def test_ovs_dumps_exactly_our_text(ovs: Ovs, build: Callable[[], Desired]) -> None:
    want = build()
    name = ovs.add_bridge(UNUSED_CONTROLLER_PORT)
    ovs.datapath_id(name)  # waits until vswitchd has the bridge (and its mgmt socket) up
    bridge = ovs.mgmt(name)
    for group in want.groups:
        ovs.ofctl("add-group", bridge, group_text(group))
    for flow in want.flows:
        ovs.ofctl("add-flow", bridge, flow_text(flow))
    flows = [line.strip() for line in ovs.ofctl("--no-stats", "dump-flows", bridge).splitlines()]
    groups = [line.strip() for line in ovs.ofctl("dump-groups", bridge).splitlines()[1:]]
    assert sorted(flows) == sorted(flow_text(f) for f in want.flows)
    assert sorted(groups) == sorted(group_text(g) for g in want.groups)

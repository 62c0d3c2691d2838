"""Encoding: fastpath and os-ken paths agree byte for byte, and OVS decodes every message to our text."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import pytest

import fastpath
from openflow.desired import Desired, desired
from openflow.encode import (
    GroupCommand,
    encode_flows,
    encode_groups,
    flow_mod_osken,
    to_flowspec,
)
from openflow.inputs import LocalPort, NodeInputs, RemoteEndpoint
from openflow.text import actions_text, group_text, match_text
from tests.openflow.scenario import RED_VLAN, ep, node_a
from tests.openflow.test_flows_policy import rule


def _states() -> list[Desired]:
    a = node_a()
    more = (
        rule(RuleId="x1", SrcEndpointGroup=100, DstEndpointGroup=200, SrcIpAddr="10.10.10.10/24",
             DstIpAddr="10.1.1.1/24", IpProtocol=6, SrcPort=200, DstPort=100, TcpFlags="syn,!ack"),
        rule(RuleId="x2", DstEndpointGroup=9, IpProtocol=17, SrcPort=53, Action="deny"),
    )  # fmt: skip
    vlan = NodeInputs(
        "vlan",
        (LocalPort.from_state(ep("a", "10.2.0.2", 0, RED_VLAN), RED_VLAN, None, 3),),
        (RemoteEndpoint.from_state(ep("b", "10.2.0.3", 0, RED_VLAN), RED_VLAN),),
        uplinks=(8,),
    )
    return [desired(dataclasses.replace(a, rules=a.rules + more)), desired(vlan)]


@pytest.mark.parametrize("command", [fastpath.Command.ADD, fastpath.Command.DELETE_STRICT])
def test_fastpath_and_osken_paths_are_byte_identical(command: fastpath.Command) -> None:
    flows = [f for d in _states() for f in d.flows]
    fast = [(f, spec) for f in flows if (spec := to_flowspec(f)) is not None]
    assert len(fast) >= len(flows) // 3  # policy, dst_epg, port classifier and misses take the fast path
    for k, (flow, spec) in enumerate(fast):
        assert fastpath.encode_flow_mods([spec], command, xid=k).data == flow_mod_osken(flow, command, k), flow


def test_mixed_batch_keeps_order_and_consecutive_xids() -> None:
    flows = _states()[0].flows
    messages = encode_flows(flows, xid=0xFFFFFFFE)
    parts = messages.split()
    assert messages.count == len(parts) == len(flows)
    assert [int.from_bytes(p[4:8], "big") for p in parts] == [(0xFFFFFFFE + k) & 0xFFFFFFFF for k in range(len(flows))]
    assert parts[5] == flow_mod_osken(flows[5], fastpath.Command.ADD, 3)


def _ofp_print(message: bytes) -> str:
    done = subprocess.run(["ovs-ofctl", "ofp-print", message.hex()], capture_output=True, text=True, check=True)
    return " ".join(done.stdout.split())


@pytest.mark.skipif(shutil.which("ovs-ofctl") is None, reason="ovs-ofctl not installed")
def test_ovs_decodes_every_message_to_our_text() -> None:
    for want in _states():
        for flow, message in zip(want.flows, encode_flows(want.flows).split(), strict=True):
            table = f"table:{flow.table} " if flow.table else ""
            expected = f"ADD {table}{match_text(flow)} cookie:{flow.cookie:#x} actions={actions_text(flow)}"
            assert re.sub(r"^OFPT_FLOW_MOD \(OF1.3\) \(xid=0x[0-9a-f]+\): ", "", _ofp_print(message)) == expected
        for group, message in zip(want.groups, encode_groups(want.groups).split(), strict=True):
            assert _ofp_print(message).endswith(f"ADD {group_text(group)}")


def test_group_delete_carries_no_buckets() -> None:
    group = _states()[0].groups[0]
    [message] = encode_groups([group], GroupCommand.DELETE).split()
    assert len(message) == 16

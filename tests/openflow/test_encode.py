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
    _action,
    bundle_add,
    ct_bytes,
    encode_flow_bundle,
    encode_flows,
    encode_groups,
    flow_mod_osken,
    group_mod_osken,
    to_flowspec,
)
from openflow.fields import CT_ZONE
from openflow.flow import Ct, Nat
from openflow.inputs import NodeInputs
from openflow.text import actions_text, group_text, match_text
from tests.openflow.scenario import KUBE_WEB, RED_VLAN, ep, kube_service_of, local_of, node_a, remote_of
from tests.openflow.test_flows_policy import rule

AFFINE = (dataclasses.replace(kube_service_of(KUBE_WEB), affinity_timeout=10800),)  # learn, resubmit, registers


def _states() -> list[Desired]:
    a = node_a()
    more = (
        rule(RuleId="x1", SrcEndpointGroup=100, DstEndpointGroup=200, SrcIpAddr="198.19.110.10/24",
             DstIpAddr="198.19.11.1/24", IpProtocol=6, SrcPort=200, DstPort=100, TcpFlags="syn,!ack"),
        rule(RuleId="x2", DstEndpointGroup=9, IpProtocol=17, SrcPort=53, Action="deny"),
    )  # fmt: skip
    vlan = NodeInputs(
        "vlan",
        (local_of(ep("a", "198.19.20.2", 0, RED_VLAN), RED_VLAN, None, 3),),
        (remote_of(ep("b", "198.19.20.3", 0, RED_VLAN), RED_VLAN),),
        uplinks=(8,),
    )
    return [desired(dataclasses.replace(a, rules=a.rules + more, services=a.services + AFFINE)), desired(vlan)]


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


@pytest.mark.parametrize("command", list(GroupCommand))
def test_group_mods_are_byte_identical_to_osken(command: GroupCommand) -> None:
    groups = [g for d in _states() for g in d.groups]
    assert {g.type for g in groups} == {"all", "select"}
    messages = encode_groups(groups, command, xid=0xFFFFFFFE).split()
    assert messages == [group_mod_osken(g, command, 0xFFFFFFFE + k) for k, g in enumerate(groups)]


def test_group_delete_carries_no_buckets() -> None:
    group = _states()[0].groups[0]
    [message] = encode_groups([group], GroupCommand.DELETE).split()
    assert len(message) == 16


def test_bundle_add_wraps_like_osken() -> None:
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    from openflow.encode import _DATAPATH

    flow = _states()[0].flows[0]
    inner = flow_mod_osken(flow, fastpath.Command.ADD, 7)
    msg = parser.OFPFlowMod(_DATAPATH, cookie=flow.cookie, table_id=flow.table, priority=flow.priority)
    wrapped = parser.ONFBundleAddMsg(_DATAPATH, 9, fastpath.ONF_BF_ATOMIC | fastpath.ONF_BF_ORDERED, msg, [])
    wrapped.xid = 7
    wrapped.serialize()
    expected_header = bytes(wrapped.buf)[:24]
    got = bundle_add(inner, 9)
    assert got[24:] == inner
    assert got[:2] == expected_header[:2] and got[4:24] == expected_header[4:24]  # length differs: os-ken's inner message is a bare one
    assert int.from_bytes(got[2:4], "big") == len(got)


def test_flow_bundle_holds_every_change_in_order_between_open_and_commit() -> None:
    flows = _states()[0].flows
    adds, deletes = flows[:7], flows[7:12]
    bundle = encode_flow_bundle([(fastpath.Command.ADD, adds), (fastpath.Command.DELETE_STRICT, deletes)], bundle_id=5)
    parts = bundle.split()
    assert bundle.count == len(parts) == 2 + len(adds) + len(deletes)
    assert parts[0] == fastpath.bundle_ctrl(fastpath.BundleCtrl.OPEN_REQUEST, 5, xid=0)
    assert parts[-1] == fastpath.bundle_ctrl(fastpath.BundleCtrl.COMMIT_REQUEST, 5, xid=len(parts) - 1)
    inner = [p[24:] for p in parts[1:-1]]
    expected = [flow_mod_osken(f, fastpath.Command.ADD, k + 1) for k, f in enumerate(adds)]
    expected += [flow_mod_osken(f, fastpath.Command.DELETE_STRICT, len(adds) + k + 1) for k, f in enumerate(deletes)]
    assert inner == expected


@pytest.mark.parametrize(
    "action",
    [
        Ct(5, CT_ZONE, commit=True, nat=Nat(0xC6120002, 8080)),
        Ct(5, CT_ZONE, commit=True, nat=Nat(0xC6120002)),
        Ct(4, CT_ZONE, nat=Nat()),
        Ct(7, 1),
    ],
)
def test_ct_actions_packed_directly_are_osken_bytes(action: Ct) -> None:
    buf = bytearray()
    encoded = _action(action)
    encoded.serialize(buf, 0)
    assert ct_bytes(action) == bytes(buf)

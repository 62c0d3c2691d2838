"""What of a remote pod's NetworkPolicy rules a node keeps (labels: tests/model/test_rulehits.py)."""

from __future__ import annotations

from contivd.agent.inputs import without_egress
from openflow.inputs import NetpolPod, NetpolRule


def test_a_remote_pods_record_keeps_only_its_ingress() -> None:
    ingress = NetpolRule("ingress", 100, 1, None, 0, None, "drop", "ns/p/ingress/isolation")
    egress = NetpolRule("egress", 100, 1, None, 0, None, "drop", "ns/p/egress/isolation")
    assert without_egress(NetpolPod("ns/p", (ingress, egress))) == NetpolPod("ns/p", (ingress,))

"""How NetworkPolicy rule ids become /metrics labels (tenant = namespace, policy, rule), and
what of a remote pod's rules a node keeps."""

from __future__ import annotations

from contivd.agent.inputs import without_egress
from contivd.agent.netpolstats import metric_labels
from openflow.inputs import NetpolPod, NetpolRule


def test_rule_and_isolation_labels() -> None:
    assert metric_labels("prod/db-in/ingress/0") == ("prod", "db-in", "ingress/0")
    assert metric_labels("prod/db/egress/isolation") == ("prod", "(isolation)", "db/egress")


def test_a_remote_pods_record_keeps_only_its_ingress() -> None:
    ingress = NetpolRule("ingress", 100, 1, None, 0, None, "drop", "ns/p/ingress/isolation")
    egress = NetpolRule("egress", 100, 1, None, 0, None, "drop", "ns/p/egress/isolation")
    assert without_egress(NetpolPod("ns/p", (ingress, egress))) == NetpolPod("ns/p", (ingress,))

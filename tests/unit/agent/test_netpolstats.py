"""How NetworkPolicy rule ids become /metrics labels (tenant = namespace, policy, rule)."""

from __future__ import annotations

from contivd.agent.netpolstats import metric_labels


def test_rule_and_isolation_labels() -> None:
    assert metric_labels("prod/db-in/ingress/0") == ("prod", "db-in", "ingress/0")
    assert metric_labels("prod/db/egress/isolation") == ("prod", "(isolation)", "db/egress")

"""The nodes' rule counters summed per model rule, NetworkPolicy rule and default drop, scoped
to a tenant or policy, and named as /metrics labels them (contivd.model.rulehits)."""

from __future__ import annotations

from contivd.model.policy import rule_key_of
from contivd.model.rulehits import DefaultDrop, contiv_labels, default_drop_of, netpol_labels, netpol_policies, policy_hits

NODE1 = {
    "default:web:default:lock:1:inRx": {"packets": 3, "bytes": 300, "flows": 1},
    "default:web:default:lock:1:inTx": {"packets": 1, "bytes": 60, "flows": 1},
    "default:db:default:lock:2:outTx": {"packets": 0, "bytes": 0, "flows": 1},
}
NODE2 = {"default:app:default:lock:1:inRx": {"packets": 2, "bytes": 200, "flows": 1}, "blue:x:blue:p:9:inRx": {"packets": 1, "bytes": 10}}
NP1 = {
    "prod/db-in/ingress/0": {"packets": 4, "bytes": 400, "flows": 2},
    "prod/db/ingress/isolation": {"packets": 2, "bytes": 120, "flows": 1},
    "dev/tool-out/egress/0": {"packets": 0, "bytes": 0, "flows": 1},
}
NP2 = {"prod/db-in/ingress/0": {"packets": 1, "bytes": 100}, "prod/db/ingress/isolation": {"packets": 1, "bytes": 60}}


def test_contiv_hits_are_summed_per_model_rule_over_directions_attachments_and_nodes() -> None:
    assert rule_key_of("default:web:default:lock:1:inRx") == "default:lock:1"
    hits = policy_hits([NODE1, NODE2], [])
    assert hits.rules == {
        "blue:p:9": {"packets": 1, "bytes": 10},
        "default:lock:1": {"packets": 6, "bytes": 560},
        "default:lock:2": {"packets": 0, "bytes": 0},
    }
    assert hits.compiled["default:web:default:lock:1:inRx"] == {"packets": 3, "bytes": 300}
    assert hits.netpol == {} and hits.default_drops == {}


def test_netpol_rules_and_isolations_are_kept_apart_and_summed_over_nodes() -> None:
    hits = policy_hits([], [NP1, NP2])
    assert hits.netpol == {"dev/tool-out/egress/0": {"packets": 0, "bytes": 0}, "prod/db-in/ingress/0": {"packets": 5, "bytes": 500}}
    assert hits.default_drops == {DefaultDrop("prod", "db", "ingress"): {"packets": 3, "bytes": 180}}
    assert hits.to_json()["defaultDrops"] == [{"tenant": "prod", "group": "db", "direction": "ingress", "packets": 3, "bytes": 180}]


def test_scopes_keep_one_tenant_or_one_policy() -> None:
    hits = policy_hits([NODE1, NODE2], [NP1, NP2])
    tenant = hits.scoped("default")
    assert set(tenant.rules) == {"default:lock:1", "default:lock:2"} and tenant.netpol == {} and tenant.default_drops == {}
    assert set(tenant.compiled) == {
        "default:web:default:lock:1:inRx",
        "default:web:default:lock:1:inTx",
        "default:db:default:lock:2:outTx",
        "default:app:default:lock:1:inRx",
    }
    prod = hits.scoped("prod")
    assert set(prod.netpol) == {"prod/db-in/ingress/0"} and set(prod.default_drops) == {DefaultDrop("prod", "db", "ingress")}
    one = hits.scoped("prod", "db-in")
    assert set(one.netpol) == {"prod/db-in/ingress/0"} and one.default_drops == {} and one.rules == {}
    assert hits.scoped("default", "lock").rules.keys() == {"default:lock:1", "default:lock:2"}
    assert hits.scoped("nosuch").to_json() == {"rules": {}, "compiled": {}, "netpol": {}, "defaultDrops": []}


def test_labels_name_tenant_policy_and_rule() -> None:
    assert netpol_labels("prod/db-in/ingress/0") == ("prod", "db-in", "ingress/0")
    assert netpol_labels("prod/db/egress/isolation") is None
    assert default_drop_of("prod/db/egress/isolation") == DefaultDrop("prod", "db", "egress")
    assert default_drop_of("prod/db-in/ingress/0") is None
    assert contiv_labels("default:web:default:lock:1:inRx") == ("default", "lock", "1")


def test_netpol_policies_by_namespace() -> None:
    assert netpol_policies(["prod/db-in/ingress/0", "prod/db/ingress/isolation", "dev/x/egress/isolation"]) == {"prod": {"db-in"}, "dev": set()}

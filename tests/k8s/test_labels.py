"""Pod labels → what the pod's endpoint should become (contivd/k8s/labels.py)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from contivd.k8s.labels import NotApplied, Relabel, plan_relabel, pod_labels
from contivd.state import EndpointState


def endpoint(group: str = "web", labels: dict[str, str] | None = None, tenant: str = "default", network: str = "pods") -> EndpointState:
    return EndpointState(
        id=f"{network}.{tenant}-c1-eth0",
        net_id=f"{network}.{tenant}",
        endpoint_id="c1-eth0",
        service_name=group,
        endpoint_group_id=3 if group else 0,
        endpoint_group_key=f"{group}:{tenant}" if group else "",
        ip_address="198.18.1.2",
        ipv6_address="",
        mac_address="02:02:c6:12:01:02",
        homing_host="node1",
        labels=None if labels is None else tuple(labels.items()),
        k8s_pod="shop/web-0",
    )


GROUP = "io.contiv.net-group"


def test_same_labels_ask_for_nothing() -> None:
    assert plan_relabel(endpoint(labels={GROUP: "web", "app": "a"}), {"app": "a", GROUP: "web"}) is None
    assert plan_relabel(endpoint(labels=None), {}) is None


def test_a_changed_group_label_moves_the_endpoint_and_labels_are_replaced() -> None:
    ep = endpoint(labels={GROUP: "web", "app": "a", "old": "x"})
    plan = plan_relabel(ep, {GROUP: "db", "app": "a"})
    assert plan == Relabel(ep, "db", {GROUP: "db", "app": "a"})
    assert isinstance(plan, Relabel)
    assert plan.request() == {"Tenant": "default", "Network": "pods", "EndpointID": "c1-eth0", "Group": "db", "Labels": {GROUP: "db", "app": "a"}}


def test_a_removed_group_label_means_no_group() -> None:
    ep = endpoint(labels={GROUP: "web"})
    assert plan_relabel(ep, {"app": "a"}) == Relabel(ep, "", {"app": "a"})


def test_an_unchanged_group_label_keeps_a_group_chosen_otherwise() -> None:
    """The CNI args or the network config chose `web`; the pod never had a group label."""
    ep = endpoint(group="web", labels={"app": "a"})
    assert plan_relabel(ep, {"app": "b"}) == Relabel(ep, "web", {"app": "b"})


def test_an_endpoint_not_yet_labelled_takes_the_pod_labels() -> None:
    ep = endpoint(group="web", labels=None)
    assert plan_relabel(ep, {GROUP: "web", "app": "a"}) == Relabel(ep, "web", {GROUP: "web", "app": "a"})


def test_a_tenant_or_network_change_is_not_applied_and_says_why() -> None:
    ep = endpoint(labels={"io.contiv.network": "pods"})
    plan = plan_relabel(ep, {"io.contiv.network": "other", GROUP: "db"})
    assert isinstance(plan, NotApplied) and plan.reason == "network-change"
    assert "network other" in plan.message and "default/pods" in plan.message and "re-create the pod" in plan.message
    tenant = plan_relabel(endpoint(labels={}), {"io.contiv.tenant": "blue"})
    assert isinstance(tenant, NotApplied) and tenant.reason == "tenant-change"


def test_a_tenant_or_network_label_naming_where_the_endpoint_is_or_removed_is_fine() -> None:
    ep = endpoint(labels={"io.contiv.network": "pods"})
    assert plan_relabel(ep, {"io.contiv.network": "pods", "io.contiv.tenant": "default", "app": "a"}) == Relabel(
        ep, "web", {"io.contiv.network": "pods", "io.contiv.tenant": "default", "app": "a"}
    )
    assert plan_relabel(ep, {}) == Relabel(ep, "web", {})


def test_pod_labels_reads_metadata() -> None:
    assert pod_labels({"metadata": {"labels": {"a": "1"}}}) == {"a": "1"}
    assert pod_labels({"metadata": {}}) == {} and pod_labels({}) == {} and pod_labels({"metadata": {"labels": ["x"]}}) == {}


KEYS = st.sampled_from([GROUP, "io.contiv.tenant", "io.contiv.network", "app", "tier"])
VALUES = st.sampled_from(["", "web", "db", "default", "pods", "other"])


@given(old=st.one_of(st.none(), st.dictionaries(KEYS, VALUES)), new=st.dictionaries(KEYS, VALUES), group=st.sampled_from(["", "web", "db"]))
def test_a_relabelled_endpoint_asks_for_nothing_more_and_never_leaves_its_network(
    old: dict[str, str] | None, new: dict[str, str], group: str
) -> None:
    ep = endpoint(group=group, labels=old)
    plan = plan_relabel(ep, new)
    if isinstance(plan, Relabel):
        moved = replace(ep, service_name=plan.group, labels=tuple(plan.labels.items()))
        assert plan_relabel(moved, new) is None, "applying the plan settles it"
        assert plan.labels == new
    elif isinstance(plan, NotApplied):
        assert new.get("io.contiv.tenant", "") not in ("", "default") or new.get("io.contiv.network", "") not in ("", "pods")
    else:
        assert dict(old or {}) == new

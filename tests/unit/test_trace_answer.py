"""The trace route's pure parts (contivd/api/tracing.py): the ends resolved from a snapshot, and
whether the datapaths' answers agree with the model."""

from __future__ import annotations

from ipaddress import IPv4Address

import pytest

from contivd.api.tracing import agreement, trace_end
from contivd.model import NotFoundError
from contivd.state import EndpointState, StateSnapshot


def snapshot() -> StateSnapshot:
    snap = StateSnapshot()
    for id_, ip, node, pod in (("pods.default-1", "198.18.10.1", "n1", "prod/client"), ("pods.default-2", "198.18.10.2", "n2", "")):
        snap.endpoints[id_] = EndpointState(
            id=id_,
            net_id="pods.default",
            endpoint_id=id_,
            service_name="web",
            endpoint_group_id=3,
            endpoint_group_key="web:default",
            ip_address=ip,
            ipv6_address="",
            mac_address="02:02:c6:12:0a:01",
            homing_host=node,
            k8s_pod=pod,
            ep_common_name=f"name-{id_[-1]}",
        )
    return snap


def test_ends_by_address_endpoint_id_pod_and_name() -> None:
    snap = snapshot()
    by_ip = trace_end(snap, "198.18.10.2")
    assert (by_ip.endpoint, by_ip.node, by_ip.group, by_ip.network) == ("pods.default-2", "n2", 3, "pods.default")
    assert trace_end(snap, "pods.default-1").node == "n1"
    assert trace_end(snap, "prod/client").endpoint == "pods.default-1"
    assert trace_end(snap, "x/name-2").endpoint == "pods.default-2"
    outside = trace_end(snap, "198.19.0.5")
    assert outside.endpoint == "" and outside.address == int(IPv4Address("198.19.0.5")), "an address outside every endpoint is external"
    with pytest.raises(NotFoundError, match="'prod/nobody'"):
        trace_end(snap, "prod/nobody")


@pytest.mark.parametrize(
    ("model", "source", "destination", "agree"),
    [
        ("allow", {"verdict": "allow"}, {"verdict": "allow"}, True),
        ("allow", {"verdict": "allow"}, {"verdict": "drop"}, False),
        ("allow", {"verdict": "drop"}, None, False),
        ("drop", {"verdict": "drop"}, {"skipped": "not reached"}, True),
        ("drop", {"verdict": "allow"}, None, False),
        ("allow", {"unanswered": "node n1 is down"}, {"verdict": "allow"}, True),
        ("allow", {"unanswered": "node n1 is down"}, {"unanswered": "down too"}, None),
        ("allow", {"skipped": "no endpoint"}, None, None),
    ],
)
def test_agreement(model: str, source: dict[str, str], destination: dict[str, str] | None, agree: bool | None) -> None:
    verdict, wrong = agreement(model, source, destination)
    assert verdict is agree and (len(wrong) > 0) == (agree is False)

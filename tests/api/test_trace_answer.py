"""The trace route's pure parts (contivd/api/tracing.py): the ends resolved from a snapshot,
whether the datapaths' answers agree with the model, and a Service address traced per backend
(the nodes' halves answered by a stand-in `ask`: the real agents are in tests/k8s)."""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Address

import pytest
import trio

from contivd.api.tracing import Half, agreement, trace, trace_end
from contivd.model import NotFoundError
from contivd.model.netpolicy import TraceQuery
from contivd.state import EndpointState, StateSnapshot
from contivd.state.records import KubeBackend, KubeServicePort, KubeServiceState


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
    assert not outside.node_itself and trace_end(snap, "172.19.255.254").node_itself, "the nodes' private address (Contiv's default pvtSubnet)"
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


@pytest.mark.parametrize(
    ("model", "destination", "agree"),
    [("drop", {"verdict": "drop"}, True), ("drop", {"verdict": "allow"}, False), ("allow", {"verdict": "drop"}, False), ("allow", None, None)],
)
def test_from_outside_the_destinations_node_must_give_the_models_verdict(model: str, destination: dict[str, str] | None, agree: bool | None) -> None:
    verdict, wrong = agreement(model, {"skipped": "no endpoint"}, destination, judged_there=True)
    assert verdict is agree and (len(wrong) > 0) == (agree is False)


def with_service(backends: tuple[KubeBackend, ...]) -> StateSnapshot:
    snap = snapshot()
    port = KubeServicePort("http", "TCP", 80, 0, backends)
    snap.k8s_services["shop/web"] = KubeServiceState("shop", "web", "198.18.96.10", (port,), 0, "1")
    return snap


def test_a_service_address_is_judged_and_traced_per_backend() -> None:
    asked: list[tuple[str, str, str, int]] = []

    async def ask(node: str, side: str, query: TraceQuery, src: str, dst: str) -> Half:
        asked.append((node, side, dst, query.port))
        verdict = "load-balanced" if dst == "198.18.96.10" else "allow"
        return {"node": node, "verdict": verdict}

    snap = with_service((KubeBackend("198.18.10.2", 8080),))
    answer = trio.run(trace, snap, TraceQuery("198.18.10.1", "198.18.96.10", 6, 80), "n1", ask)
    assert answer["verdict"] == "allow" and answer["agree"] is True, answer
    assert answer["service"]["id"] == "k8s:shop/web" and [b["backend"] for b in answer["service"]["backends"]] == ["198.18.10.2:8080"]
    assert sorted(asked) == [("n1", "source", "198.18.10.2", 8080), ("n1", "source", "198.18.96.10", 80), ("n2", "destination", "198.18.10.2", 8080)]
    assert answer["reasons"][0].startswith("service k8s:shop/web (198.18.96.10) tcp/80: DNATed"), answer


def test_a_service_without_backends_drops_and_an_ovs_that_delivers_disagrees() -> None:
    async def ask(node: str, side: str, query: TraceQuery, src: str, dst: str) -> Half:
        return {"node": node, "verdict": "allow"}

    answer = trio.run(trace, with_service(()), TraceQuery("198.18.10.1", "198.18.96.10", 6, 80), "n1", ask)
    assert answer["verdict"] == "drop" and answer["service"]["backends"] == [], answer
    assert "has no backend for tcp/80" in answer["reasons"][0]
    assert answer["agree"] is False and answer["disagreements"] == ["the source's node n1: OVS says allow for the VIP, the model drop"]


def test_an_outside_source_to_a_vip_is_not_load_balanced() -> None:
    async def ask(node: str, side: str, query: TraceQuery, src: str, dst: str) -> Half:
        raise AssertionError("no node sends it, and the VIP is no pod")

    answer = trio.run(trace, with_service((KubeBackend("198.18.10.2", 8080),)), TraceQuery("198.19.0.9", "198.18.96.10", 6, 80), "n1", ask)
    assert "service" not in answer and answer["verdict"] == "allow" and "REMOTE" in answer["reasons"][0], answer


def test_a_backend_on_another_network_is_dropped_in_bridge_mode() -> None:
    async def ask(node: str, side: str, query: TraceQuery, src: str, dst: str) -> Half:
        return {"node": node, "verdict": "load-balanced" if dst == "198.18.96.10" else "drop"}

    snap = with_service((KubeBackend("198.18.20.3", 8080),))
    other = snap.endpoints["pods.default-2"]
    snap.endpoints["svc.default-3"] = dataclasses.replace(other, id="svc.default-3", net_id="svc.default", ip_address="198.18.20.3")
    answer = trio.run(trace, snap, TraceQuery("198.18.10.1", "198.18.96.10", 6, 80), "n1", ask)
    (backend,) = answer["service"]["backends"]
    assert answer["verdict"] == backend["verdict"] == "drop" and answer["agree"] is True, answer
    assert backend["reasons"][-1].startswith("forward: drop: svc.default-3 is on network svc.default"), backend

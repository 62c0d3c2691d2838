"""The truth table once more, through the flows: every case between two pods is sent through
the FakeSwitch holding the flows of the compiled rules (all pods local on one bridge), and the
packet must reach its destination exactly when the model's `decide` allows it; the reply of
an allowed TCP or UDP connection must come back. So the model (what `ctl trace` prints) and
the datapath agree on every case of the table, not only on the real-traffic subset."""

from __future__ import annotations

from ipaddress import IPv4Address
from typing import Any

import pytest

from contivd.k8s.netpol import compile_objects
from contivd.k8s.resolve import object_key
from contivd.k8s.view import NAMESPACES as NAMESPACE_KIND
from contivd.k8s.view import NETWORK_POLICIES, PODS
from contivd.model.netpolicy import Compiled, decide
from openflow.desired import desired
from openflow.flow import ETH_IPV4
from openflow.inputs import LocalPort, NetworkRef, NodeInputs
from tests.model.test_netpolicy import CASES, IP, NAMESPACES
from tests.model.test_netpolicy import PODS as POD_OBJECTS
from tests.support.fakeswitch import FakeSwitch

NET = NetworkRef("pods.default", "vxlan", 1, 100)
POD_KEYS = sorted(k for k in IP if "/" in k)
PORT = {key: LocalPort(index + 1, key, int(IPv4Address(IP[key])), 0x020000000000 + index + 1, NET) for index, key in enumerate(POD_KEYS)}
BETWEEN_PODS = [case for case in CASES if case[2] in PORT and case[3] in PORT]


def _switch(policies: list[dict[str, Any]]) -> tuple[FakeSwitch, Compiled]:
    """The switch with the flows, and the rules as the trace route reads them (from the records)."""
    objects = {
        NETWORK_POLICIES: {object_key(p): p for p in policies},
        PODS: {object_key(p): p for p in POD_OBJECTS},
        NAMESPACE_KIND: {object_key(n): n for n in NAMESPACES},
    }
    records, _, refused = compile_objects(objects)
    assert not refused, refused
    switch = FakeSwitch.with_state(desired(NodeInputs("vxlan", tuple(PORT.values()), netpol=tuple(records.values()))))
    return switch, Compiled(tuple(r for pod in records.values() for r in pod.rules))


def _packet(src: LocalPort, dst: LocalPort, proto: int, dport: int, sport: int = 40000) -> dict[str, int]:
    packet = {"eth_src": src.mac, "eth_dst": dst.mac, "eth_type": ETH_IPV4, "ipv4_src": src.ip, "ipv4_dst": dst.ip, "ip_proto": proto}
    if proto in (6, 17):
        packet |= {"tp_src": sport, "tp_dst": dport} | ({"tcp_flags": 0x02} if proto == 6 else {})
    return packet


def test_most_cases_are_between_pods() -> None:
    assert len(BETWEEN_PODS) >= 50


@pytest.mark.parametrize(("case", "policies", "src", "dst", "proto", "dport", "allowed", "rule"), BETWEEN_PODS, ids=[c[0] for c in BETWEEN_PODS])
def test_the_flows_do_what_the_model_says(
    case: str, policies: list[dict[str, Any]], src: str, dst: str, proto: int, dport: int, allowed: bool, rule: str | None
) -> None:
    switch, compiled = _switch(policies)
    a, b = PORT[src], PORT[dst]
    result = switch.send(a.ofport, **_packet(a, b, proto, dport))
    model = decide(compiled, a.ip, b.ip, proto, dport)
    assert model.allowed is allowed
    assert (result.ports == [b.ofport]) is allowed, (result.hits, model.reasons)
    if allowed and proto in (6, 17):
        reply = switch.send(b.ofport, **(_packet(b, a, proto, 40000, sport=dport) | ({"tcp_flags": 0x12} if proto == 6 else {})))
        assert reply.ports == [a.ofport], reply.hits

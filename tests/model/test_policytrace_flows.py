"""`explain` is the twin of the flows: random Contiv rules (with NetworkPolicy isolating one pod)
programmed into the FakeSwitch as the agent builds them, random first packets between local
pods; the packet reaches its destination exactly when the model allows it. So `ctl trace`'s
model and the `policy` table agree beyond the hand-written cases."""

from __future__ import annotations

from ipaddress import IPv4Address

from hypothesis import given, settings
from hypothesis import strategies as st

from contivd.model.netpolicy import Compiled
from contivd.model.policytrace import TraceEnd, explain
from openflow.desired import desired
from openflow.flow import ETH_IPV4
from openflow.inputs import TCP_FLAGS, LocalPort, NetpolPod, NetpolRule, NetworkRef, NodeInputs, PolicyRuleSpec
from tests.support.fakeswitch import FakeSwitch

NET = NetworkRef("pods.default", "vxlan", 1, 100)
PORTS = tuple(
    LocalPort(i + 1, f"ep{i}", int(IPv4Address(f"198.18.0.{i + 1}")), 0x020000000000 + i + 1, NET, epg) for i, epg in enumerate((1, 1, 2, 3))
)
ENDS = tuple(TraceEnd(p.ip, p.endpoint_id, p.epg, NET.net_id, "n1") for p in PORTS)
# The last pod is isolated for ingress, open to TCP 443 from anyone: NetworkPolicy after Contiv.
NETPOL = Compiled(
    (
        NetpolRule("ingress", 100, PORTS[3].ip, None, 0, None, "drop", "ns/p3/ingress/isolation"),
        NetpolRule("ingress", 200, PORTS[3].ip, None, 6, (443, 443), "allow", "ns/np/ingress/0"),
    )
)


def first_packet(src: LocalPort, dst: LocalPort, proto: int, dport: int) -> dict[str, int]:
    """What the trace sends: TCP a SYN from port 40000, UDP from the same port, ICMP."""
    packet = {"eth_src": src.mac, "eth_dst": dst.mac, "eth_type": ETH_IPV4, "ipv4_src": src.ip, "ipv4_dst": dst.ip, "ip_proto": proto}
    if proto in (6, 17):
        packet |= {"tp_src": 40000, "tp_dst": dport} | ({"tcp_flags": 0x02} if proto == 6 else {})
    return packet


@st.composite
def rule(draw: st.DrawFn, priority: int) -> PolicyRuleSpec:
    proto = draw(st.sampled_from((0, 0, 1, 6, 17)))
    ported = proto in (6, 17)
    # Wildcards are drawn most often, so that rules match often enough to decide.
    prefix = st.sampled_from(
        [None, None, None, *((p.ip, 32) for p in PORTS), (int(IPv4Address("198.18.0.0")), 24), (int(IPv4Address("198.18.0.0")), 31)]
    )
    group = st.sampled_from((0, 0, 0, 1, 2, 3))
    return PolicyRuleSpec(
        f"r{priority}",
        priority,
        draw(st.sampled_from(("allow", "deny"))),
        src_epg=draw(group),
        dst_epg=draw(group),
        src_ip=draw(prefix),
        dst_ip=draw(prefix),
        proto=proto,
        src_port=draw(st.sampled_from((0, 0, 40000, 5))) if ported else 0,
        dst_port=draw(st.sampled_from((0, 0, 80, 443))) if ported else 0,
        tcp_flags=TCP_FLAGS[draw(st.sampled_from(("", "syn,!ack", "ack")))] if proto == 6 else None,
    )


@st.composite
def rules(draw: st.DrawFn) -> tuple[PolicyRuleSpec, ...]:
    priorities = draw(st.lists(st.integers(1, 100), min_size=1, max_size=8, unique=True))  # one priority each: no ties
    return tuple(draw(rule(p)) for p in priorities)


@settings(max_examples=300, deadline=None)
@given(rules(), st.integers(0, 3), st.integers(0, 3), st.sampled_from((1, 6, 17)), st.sampled_from((80, 443, 22)))
def test_the_policy_table_delivers_exactly_what_the_model_allows(contiv: tuple[PolicyRuleSpec, ...], s: int, d: int, proto: int, dport: int) -> None:
    if s == d:
        return
    switch = FakeSwitch.with_state(desired(NodeInputs("vxlan", PORTS, rules=contiv)))
    src, dst = PORTS[s], PORTS[d]
    explanation = explain(contiv, Compiled(()), ENDS[s], ENDS[d], proto, dport)
    assert (switch.send(src.ofport, **first_packet(src, dst, proto, dport)).ports == [dst.ofport]) is explanation.allowed, explanation.reasons


@settings(max_examples=60, deadline=None)
@given(rules(), st.integers(0, 2), st.sampled_from((1, 6, 17)), st.sampled_from((80, 443)))
def test_with_network_policy_both_must_allow(contiv: tuple[PolicyRuleSpec, ...], s: int, proto: int, dport: int) -> None:
    inputs = NodeInputs("vxlan", PORTS, rules=contiv, netpol=(NetpolPod("ns/p3", NETPOL.rules),))
    switch = FakeSwitch.with_state(desired(inputs))
    src, dst = PORTS[s], PORTS[3]
    explanation = explain(contiv, NETPOL, ENDS[s], ENDS[3], proto, dport)
    assert (switch.send(src.ofport, **first_packet(src, dst, proto, dport)).ports == [dst.ofport]) is explanation.allowed, explanation.reasons

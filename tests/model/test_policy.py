"""Rule compilation, golden against Contiv's behaviour (§8) and its system tests (§12.1)."""

from __future__ import annotations

from typing import Any

from contivd.model import Attachment, Remotes, compile_attachment, compile_rule, directions

from .conftest import make

SRV = Attachment(group_key="default:srv", group_id=3, policy_key="default:policy")
REMOTES = Remotes(
    group_ids={"default:srv": 3, "default:common": 7, "default:srv2": 9},
    subnets={"default:private": "198.18.0.0/16", "default:dummy": "198.19.0.0/17", "default:rng": "198.19.129.5-198.19.129.15/24"},
)


def rule(rule_id: str, **body: Any) -> dict[str, Any]:
    return make("rules", tenantName="default", policyName="policy", ruleId=rule_id, **body)


def compiled(*rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [out.to_json() for out in compile_attachment(SRV, rules, REMOTES)]


def expect(suffix: str, **fields: Any) -> dict[str, Any]:
    """An OfnetPolicyRule of attachment SRV; unspecified fields match anything."""
    return {
        "RuleId": f"default:srv:default:policy:default:policy:{suffix}",
        "Priority": 1,
        "SrcEndpointGroup": 0,
        "DstEndpointGroup": 0,
        "SrcIpAddr": "",
        "DstIpAddr": "",
        "IpProtocol": 0,
        "SrcPort": 0,
        "DstPort": 0,
        "TcpFlags": "",
        "Action": "allow",
        **fields,
    }


def test_policy_basic() -> None:
    """TestPolicyBasic: deny all tcp (prio 1), allow tcp 8000 (prio 100): 8000 opens, replies flow."""
    assert compiled(
        rule("1", direction="in", protocol="tcp", action="deny", priority=1),
        rule("2", direction="in", protocol="tcp", port=8000, action="allow", priority=100),
    ) == [
        expect("1:inRx", DstEndpointGroup=3, IpProtocol=6, TcpFlags="syn,!ack", Action="deny"),
        expect("2:inRx", Priority=100, DstEndpointGroup=3, IpProtocol=6, DstPort=8000),
        expect("2:inTx", Priority=100, SrcEndpointGroup=3, IpProtocol=6, SrcPort=8000),
    ]


def test_policy_from_group() -> None:
    """TestPolicyFromEPG: tcp 8001 allowed only from group `common`."""
    assert compiled(rule("3", direction="in", protocol="tcp", port=8001, fromEndpointGroup="common", action="allow", priority=100)) == [
        expect("3:inRx", Priority=100, SrcEndpointGroup=7, DstEndpointGroup=3, IpProtocol=6, DstPort=8001),
        expect("3:inTx", Priority=100, SrcEndpointGroup=3, DstEndpointGroup=7, IpProtocol=6, SrcPort=8001),
    ]


def test_policy_features_incoming() -> None:
    """TestPolicyFeatures, `in` half: from-network becomes the subnet, from-ip a /32, icmp."""
    assert compiled(
        rule("net-allow", direction="in", protocol="tcp", fromNetwork="private", action="allow", priority=10),
        rule("net-deny", direction="in", protocol="tcp", fromNetwork="dummy", action="deny", priority=100),
        rule("ip", direction="in", protocol="tcp", port=8001, fromIpAddress="198.18.1.5", action="allow"),
        rule("icmp-deny", direction="in", protocol="icmp", action="deny"),
        rule("icmp-ip", direction="in", protocol="icmp", fromIpAddress="198.19.0.0/17", action="allow", priority=100),
    ) == [
        expect("icmp-deny:inRx", DstEndpointGroup=3, IpProtocol=1, Action="deny"),
        expect("icmp-ip:inRx", Priority=100, DstEndpointGroup=3, SrcIpAddr="198.19.0.0/17", IpProtocol=1),
        expect("ip:inRx", DstEndpointGroup=3, SrcIpAddr="198.18.1.5/32", IpProtocol=6, DstPort=8001),
        expect("ip:inTx", SrcEndpointGroup=3, DstIpAddr="198.18.1.5/32", IpProtocol=6, SrcPort=8001),
        expect("net-allow:inRx", Priority=10, DstEndpointGroup=3, SrcIpAddr="198.18.0.0/16", IpProtocol=6, TcpFlags="syn,!ack"),
        expect("net-deny:inRx", Priority=100, DstEndpointGroup=3, SrcIpAddr="198.19.0.0/17", IpProtocol=6, TcpFlags="syn,!ack", Action="deny"),
    ]


def test_policy_features_outgoing() -> None:
    """TestPolicyFeatures, `out` half: rules act on the group's egress (to-group, to-network, to-ip)."""
    assert compiled(
        rule("grp", direction="out", protocol="tcp", port=8000, toEndpointGroup="srv2", action="allow"),
        rule("net", direction="out", protocol="tcp", toNetwork="dummy", action="deny"),
        rule("ip", direction="out", protocol="udp", port=53, toIpAddress="198.19.1.0/24", action="allow"),
    ) == [
        expect("grp:outRx", SrcEndpointGroup=9, DstEndpointGroup=3, IpProtocol=6, SrcPort=8000),
        expect("grp:outTx", SrcEndpointGroup=3, DstEndpointGroup=9, IpProtocol=6, DstPort=8000),
        expect("ip:outRx", DstEndpointGroup=3, SrcIpAddr="198.19.1.0/24", IpProtocol=17, SrcPort=53),
        expect("ip:outTx", SrcEndpointGroup=3, DstIpAddr="198.19.1.0/24", IpProtocol=17, DstPort=53),
        expect("net:outTx", SrcEndpointGroup=3, DstIpAddr="198.19.0.0/17", IpProtocol=6, TcpFlags="syn,!ack", Action="deny"),
    ]


def test_incoming_rule_to_an_address() -> None:
    """The k8s network-policy form: `in` with a to-address narrows the group side to one endpoint."""
    assert compiled(
        rule("k8s", direction="in", protocol="tcp", port=80, toIpAddress="198.18.1.5", fromIpAddress="198.19.192.0/18", action="allow")
    ) == [
        expect("k8s:inRx", DstEndpointGroup=3, SrcIpAddr="198.19.192.0/18", DstIpAddr="198.18.1.5/32", IpProtocol=6, DstPort=80),
        expect("k8s:inTx", SrcEndpointGroup=3, SrcIpAddr="198.18.1.5/32", DstIpAddr="198.19.192.0/18", IpProtocol=6, SrcPort=80),
    ]


def test_numeric_protocols_are_not_tcp_for_directions_and_flags() -> None:
    numeric = rule("6", direction="in", protocol="6", port=80, action="allow")
    assert directions(numeric) == ("inRx",)
    assert compiled(numeric) == [expect("6:inRx", DstEndpointGroup=3, IpProtocol=6, DstPort=80)]
    assert directions(rule("u", direction="out", protocol="udp", port=0, action="allow")) == ("outTx",)


def test_addresses_are_normalised() -> None:
    assert compiled(
        rule("host-bits", direction="in", fromIpAddress="198.18.1.5/24", action="allow"),
        rule("range", direction="in", fromNetwork="rng", action="allow"),
    ) == [
        expect("host-bits:inRx", DstEndpointGroup=3, SrcIpAddr="198.18.1.0/24"),
        expect("range:inRx", DstEndpointGroup=3, SrcIpAddr="198.19.129.0/24"),
    ]


def test_unresolvable_remote_side_compiles_to_nothing() -> None:
    """A deleted group must not turn into group 0, which would match every source."""
    assert compile_rule(rule("g", direction="in", fromEndpointGroup="gone", action="deny"), SRV, REMOTES) == ()
    assert compile_rule(rule("n", direction="out", toNetwork="gone", action="deny"), SRV, REMOTES) == ()


def test_attachment_takes_only_its_policy_and_is_deterministic() -> None:
    mine = [rule(str(n), direction="in", protocol="tcp", port=n, action="allow") for n in (10, 9, 1)]
    other = make("rules", tenantName="default", policyName="other", ruleId="1", direction="in", action="deny")
    result = compile_attachment(SRV, [*mine, other], REMOTES)
    assert [out.rule_id.split(":", 6)[-1] for out in result] == [
        "10:inRx",
        "10:inTx",
        "1:inRx",
        "1:inTx",
        "9:inRx",
        "9:inTx",  # plain string order of the ids
    ]
    assert result == compile_attachment(SRV, list(reversed([*mine, other])), REMOTES)
    assert SRV.key == "default:srv:default:policy"

"""Policy rule compilation, as Contiv's netmaster does it (`mastercfg/policyState.go`).

A policy attached to an endpoint group (an *attachment*, Contiv's `EpgPolicy`) turns each of its
rules into one or two directional datapath rules (ofnet's `OfnetPolicyRule`):

  * `in`:  tcp/udp with a port → `inRx` + `inTx`, anything else → `inRx` only;
  * `out`: tcp/udp with a port → `outRx` + `outTx`, anything else → `outTx` only.

`*Rx` matches traffic arriving at the group, `*Tx` traffic leaving it; the companion direction of
a rule with a port matches the replies. A port-less TCP rule matches only connection-opening SYNs
(`syn,!ack`), so replies to connections opened from the other side keep flowing. The remote side
is a group id, or an address: a network stands for its subnet. Protocol names map to numbers; a
numeric `6` is *not* treated as tcp for the direction and SYN logic, exactly as in Contiv.

Everything is recomputed from current objects, never patched: `compile_attachment` gives the whole
desired set for one attachment, sorted, for the caller to diff against what is installed.
Differences from Contiv: a rule whose remote group or network no longer exists compiles to nothing
(Contiv kept a stale id or subnet; an id of 0 would match every group), and a network given as a
range subnet `a-b/len` stands for its whole `/len` (ofnet cannot match the range form). Whether
policy is enforced at all (not in ACI mode) is the caller's decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any, Literal

from ._addresses import parse_subnet
from .lookup import Lookup

Side = Literal["from", "to"]


@dataclass(frozen=True)
class Attachment:
    """Policy `policy_key` (`tenant:policy`) attached to group `group_key` (`tenant:group`)."""

    group_key: str
    group_id: int
    policy_key: str

    @property
    def key(self) -> str:
        """Contiv's EpgPolicy key, e.g. `default:web:default:p1`."""
        return f"{self.group_key}:{self.policy_key}"


@dataclass(frozen=True)
class Remotes:
    """What a rule's remote side resolves against: group ids and network subnets, by model key."""

    group_ids: Mapping[str, int]
    subnets: Mapping[str, str]


@dataclass(frozen=True)
class PolicyRule:
    """One directional rule, ofnet's `OfnetPolicyRule`. Zero / None fields match anything.

    Groups are endpoint-group ids; `priority` is the model rule's (1-100, higher wins).
    """

    rule_id: str
    priority: int
    action: str
    src_endpoint_group: int = 0
    dst_endpoint_group: int = 0
    src_ip_addr: IPv4Network | None = None
    dst_ip_addr: IPv4Network | None = None
    ip_protocol: int = 0
    src_port: int = 0
    dst_port: int = 0
    tcp_flags: str = ""

    def to_json(self) -> dict[str, Any]:
        """The `/contiv.io/state/policyRule/<ruleId>` value (Go field names, no omitempty)."""
        return {
            "RuleId": self.rule_id,
            "Priority": self.priority,
            "SrcEndpointGroup": self.src_endpoint_group,
            "DstEndpointGroup": self.dst_endpoint_group,
            "SrcIpAddr": str(self.src_ip_addr or ""),
            "DstIpAddr": str(self.dst_ip_addr or ""),
            "IpProtocol": self.ip_protocol,
            "SrcPort": self.src_port,
            "DstPort": self.dst_port,
            "TcpFlags": self.tcp_flags,
            "Action": self.action,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PolicyRule:
        """The rule back from its stored value (`to_json`'s inverse)."""

        def prefix(text: str) -> IPv4Network | None:
            return IPv4Network(text, strict=False) if text else None

        return cls(
            rule_id=str(value["RuleId"]),
            priority=int(value["Priority"]),
            action=str(value["Action"]),
            src_endpoint_group=int(value.get("SrcEndpointGroup", 0)),
            dst_endpoint_group=int(value.get("DstEndpointGroup", 0)),
            src_ip_addr=prefix(str(value.get("SrcIpAddr", "") or "")),
            dst_ip_addr=prefix(str(value.get("DstIpAddr", "") or "")),
            ip_protocol=int(value.get("IpProtocol", 0)),
            src_port=int(value.get("SrcPort", 0)),
            dst_port=int(value.get("DstPort", 0)),
            tcp_flags=str(value.get("TcpFlags", "") or ""),
        )


@dataclass(frozen=True)
class _Direction:
    """How one direction maps a rule onto a packet: whose group is the source, which rule address
    matches the packet's source / destination, and which port the rule's port is."""

    local_is_source: bool
    source_ip: Side | None
    dest_ip: Side | None
    port: Literal["src", "dst"]
    new_connections_only: bool


_DIRECTIONS: Mapping[str, _Direction] = {
    "inRx": _Direction(False, "from", "to", "dst", True),
    "inTx": _Direction(True, "to", "from", "src", False),
    "outRx": _Direction(False, "to", None, "src", False),
    "outTx": _Direction(True, None, "to", "dst", True),
}
_PROTOCOLS: Mapping[str, int] = {"": 0, "icmp": 1, "tcp": 6, "udp": 17}
_SYN_NOT_ACK = "syn,!ack"


def directions(rule: Mapping[str, Any]) -> tuple[str, ...]:
    """The directional rules a model rule becomes (`inRx`, `inTx`, `outRx`, `outTx`)."""
    with_port = rule.get("protocol") in ("tcp", "udp") and rule.get("port", 0) != 0
    if rule["direction"] == "in":
        return ("inRx", "inTx") if with_port else ("inRx",)
    return ("outRx", "outTx") if with_port else ("outTx",)


def _address(text: str) -> IPv4Network | None:
    """A rule address or network subnet as a match: bare IPs are /32, host bits are dropped."""
    if not text:
        return None
    return parse_subnet(text).network if "-" in text else IPv4Network(text, strict=False)


def compile_rule(rule: Mapping[str, Any], attachment: Attachment, remotes: Remotes) -> tuple[PolicyRule, ...]:
    """The directional rules of one validated model `rule` for one attachment of its policy."""
    tenant = rule["tenantName"]
    local, remote = attachment.group_id, 0  # remote 0: any group
    addresses: dict[Side, str] = {"from": rule.get("fromIpAddress", ""), "to": rule.get("toIpAddress", "")}
    group = rule.get("fromEndpointGroup") or rule.get("toEndpointGroup")
    network_side: Side = "from" if rule.get("fromNetwork") else "to"
    network = rule.get(f"{network_side}Network")
    if group:
        if (remote_id := remotes.group_ids.get(f"{tenant}:{group}")) is None:
            return ()
        remote = remote_id
    elif network:
        if (subnet := remotes.subnets.get(f"{tenant}:{network}")) is None:
            return ()
        addresses[network_side] = subnet
    matches = {side: _address(text) for side, text in addresses.items()}
    protocol = rule.get("protocol", "")
    port = rule.get("port", 0)
    compiled = []
    for name in directions(rule):
        spec = _DIRECTIONS[name]
        compiled.append(
            PolicyRule(
                rule_id=f"{attachment.key}:{rule['key']}:{name}",
                priority=rule["priority"],
                action=rule["action"],
                src_endpoint_group=local if spec.local_is_source else remote,
                dst_endpoint_group=remote if spec.local_is_source else local,
                src_ip_addr=matches[spec.source_ip] if spec.source_ip else None,
                dst_ip_addr=matches[spec.dest_ip] if spec.dest_ip else None,
                ip_protocol=_PROTOCOLS[protocol] if protocol in _PROTOCOLS else int(protocol),
                src_port=port if spec.port == "src" else 0,
                dst_port=port if spec.port == "dst" else 0,
                tcp_flags=_SYN_NOT_ACK if spec.new_connections_only and protocol == "tcp" and port == 0 else "",
            )
        )
    return tuple(compiled)


def rule_key_of(rule_id: str) -> str:
    """The model rule (`tenant:policy:ruleId`) a compiled rule id (`<attachment>:<rule key>:<direction>`,
    see compile_rule) came from."""
    return ":".join(rule_id.split(":")[-4:-1])


def compile_attachment(attachment: Attachment, rules: Iterable[Mapping[str, Any]], remotes: Remotes) -> tuple[PolicyRule, ...]:
    """Every directional rule of one attachment, sorted by rule id. `rules` may hold rules of
    other policies too (e.g. all stored rules); only the attached policy's are compiled."""
    own = (rule for rule in rules if f"{rule['tenantName']}:{rule['policyName']}" == attachment.policy_key)
    compiled = (out for rule in own for out in compile_rule(rule, attachment, remotes))
    return tuple(sorted(compiled, key=lambda out: out.rule_id))


def with_network_subnets(rule: Mapping[str, Any], lookup: Lookup) -> dict[str, Any]:
    """The rule as Contiv stores it: a `fromNetwork`/`toNetwork` rule carries that network's subnet
    in `fromIpAddress`/`toIpAddress` (Contiv's createOfnetRule writes it into the rule)."""
    out = dict(rule)
    for side in ("from", "to"):
        name = rule.get(f"{side}Network")
        network = lookup.get("network", f"{rule['tenantName']}:{name}") if name else None
        if network is not None:
            out[f"{side}IpAddress"] = network["subnet"]
    return out

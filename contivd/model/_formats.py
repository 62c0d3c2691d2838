"""Contiv's string formats: the regexes of its generated validators, ported to Python.

Go's RE2 patterns are anchored `^...$`; here every pattern is matched with `re.fullmatch`, because
Python's `$` also matches before a trailing newline. Each format carries the phrase an error
message uses to say what was expected. Deliberate departures from Contiv are marked *deviation*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Format:
    """An anchored regex plus a human description of what it accepts."""

    body: str
    expected: str
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.body))

    def matches(self, value: str) -> bool:
        return self.regex.fullmatch(value) is not None

    def optional(self) -> Format:
        """The same format, or the empty string."""
        return Format(f"(?:{self.body})?", f"{self.expected}, or empty")


def _choice(*words: str) -> Format:
    return Format("|".join(re.escape(word) for word in words), " or ".join(words))


_LABEL = r"[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]*[a-zA-Z0-9]"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IP4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_PREFIX31 = r"(?:3[0-1]|2[0-9]|1[0-9]|[1-9])"
_HEX = r"[0-9a-fA-F]{1,4}"
_IP6 = rf"(?:{_HEX}(?::{_HEX}){{7}}|(?:(?:{_HEX}:){{0,6}}|:)(?:(?::{_HEX}){{0,6}}|:))"
_PATH = r"topology/pod-[0-9]{1,4}/paths-[0-9]{1,4}/pathep-\[eth[0-9]{1,2}/[0-9]{1,2}\]"
_NODE = r"topology/pod-[0-9]{1,4}/node-[0-9]{1,4}"

NAME = Format(
    rf"(?:(?:{_LABEL})\.)*(?:{_LABEL})",
    "dot-separated labels of letters, digits and inner '-'",
)
# Deviation: netprofile names have no regex in Contiv; ':' and '/' would make the key ambiguous.
PROFILE_NAME = Format(r"[^:/]+", "a non-empty name without ':' or '/'")
IPV4 = Format(_IP4, "an IPv4 address a.b.c.d")
IPV6 = Format(_IP6, "an IPv6 address")
SUBNET = Format(rf"{_IP4}(?:-{_IP4})?/{_PREFIX31}", "a.b.c.d/len or a.b.c.d-e.f.g.h/len")
# Deviation: the prefix is checked by value (16-127) instead of Contiv's regex, which also
# rejected /108, /109, /118 and /119 by accident.
SUBNET6 = Format(rf"{_IP6}/[0-9]{{1,3}}", "an IPv6 addr/len")
IP_POOL = Format(rf"{_IP4}(?:-{_IP4})?", "a.b.c.d-e.f.g.h or a single a.b.c.d")
# Deviation: Contiv's regex also admits `a.b.c.d-N`, which ofnet then fails to parse, so the rule
# never works; it is refused up front.
RULE_ADDRESS = Format(rf"{_IP4}(?:/{_PREFIX31})?", "a.b.c.d or a.b.c.d/len (len 1-31)")
ROUTER_IP = Format(rf"{_IP4}(?:-{_OCTET})?/{_PREFIX31}", "a.b.c.d/len")
AS_NUMBER = Format(r"[0-9]{1,10}", "an AS number (1-4294967295)")
PVT_SUBNET = Format(rf"{_IP4}/16", "a.b.c.d/16")
PROTOCOL = Format(r"tcp|udp|icmp|[0-9]{1,3}", "tcp, udp, icmp or an IP protocol number")
# Contiv's pattern, minus its `[kmgKMG{1}]` slip that also took '{', '1' and '}' as units.
BANDWIDTH = Format(
    r"[1-9][0-9]* ?(?:[kmgKMG](?:bps)?|[kKmMgG]b)",
    "a rate like 10Mbps, 1Gbps, 500Kbps, 10 Mb or 4g",
)
VLAN_RANGE = Format(r"[0-9]{1,4}-[0-9]{1,4}", "a range min-max like 1-4094")
VXLAN_RANGE = Format(r"[0-9]{1,8}-[0-9]{1,8}", "a range min-max like 1-10000")
PATH_BINDINGS = Format(
    rf"{_PATH}(?:,{_PATH})*",
    "comma-separated topology/pod-N/paths-N/pathep-[ethN/N]",
)
NODE_BINDINGS = Format(rf"{_NODE}(?:,{_NODE})*", "comma-separated topology/pod-N/node-N")

ENCAP = _choice("vlan", "vxlan")
NW_TYPE = _choice("infra", "data")
DIRECTION = _choice("in", "out")
ACTION = _choice("allow", "deny")
CONTRACTS_TYPE = _choice("provided", "consumed")
INFRA_TYPE = _choice("aci", "aci-opflex", "default")
FWD_MODE = _choice("bridge", "routing")
ARP_MODE = _choice("proxy", "flood")
YES_NO = _choice("yes", "no")
GLOBAL_NAME = _choice("global")
ACI_GW_NAME = _choice("aciGw")

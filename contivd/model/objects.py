"""The Contiv object types declared as data, and validation of a REST request body against them.

Each `ObjectSpec` lists a type's JSON fields (alphabetically, the order Contiv checks them in),
its key fields, its REST collection, the cross-field checks a single body can fail, and how Contiv
treats an update. `validate` is the one choke point a POST/PUT body goes through: it returns the
normalised object (Contiv's JSON with `omitempty`: zero values dropped, defaults applied, `key`
set) or raises `ValidationError`. Checks against other stored objects live in `integrity`;
`links.render` adds the `links` / `link-sets` members Contiv returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from ipaddress import IPv4Address, IPv6Address
from typing import Any

from . import _formats as formats
from ._addresses import parse_pool, parse_subnet, parse_subnet6
from ._fields import ZERO, Field, ParseError, show
from .contiv_messages import contiv_line
from .errors import NotFoundError, ValidationError
from .links import link_members
from .ranges import VLAN, VXLAN, parse_tag_ranges

VNI_MAX = 16_777_215
"""A VXLAN network identifier is 24 bits."""

ObjectCheck = Callable[[Mapping[str, Any]], None]


@dataclass(frozen=True)
class ObjectSpec:
    """One Contiv object type.

    Update semantics, as Contiv's callbacks have them: `frozen` is the refusal of any change,
    `fixed` refuses changes to single fields, `sticky` fields are silently kept at their old value.
    `once` refuses even an identical re-POST with `frozen`'s message: Contiv's TenantUpdate
    refuses every call, where contivd otherwise answers an identical body with the object
    (Decision 2; docs/control-plane.md lists this exception).
    """

    kind: str
    collection: str
    key_fields: tuple[str, ...]
    fields: tuple[Field, ...]
    checks: tuple[ObjectCheck, ...] = ()
    frozen: str | None = None
    fixed: tuple[tuple[str, str], ...] = ()
    sticky: tuple[str, ...] = ()
    once: bool = False

    def key_of(self, obj: Mapping[str, Any]) -> str:
        """The model key built from the body, e.g. `tenantName:networkName`."""
        return ":".join(str(obj.get(name, "")) for name in self.key_fields)


def _name(name: str, max_len: int = 64) -> Field:
    return Field(name, max_len=max_len, fmt=formats.NAME)


def _optional_name(name: str, max_len: int = 64) -> Field:
    return Field(name, max_len=max_len, fmt=formats.NAME.optional())


def _names(name: str) -> Field:
    return Field(name, "list", max_len=64, fmt=formats.NAME)


def _keyword(name: str, words: formats.Format, *, optional: bool = False) -> Field:
    return Field(name, max_len=64, fmt=words.optional() if optional else words)


# --- parsers for what a regex cannot say (raise ValueError with the problem) -----------------

_SERVICE_PROTOCOLS = frozenset({"TCP", "tcp", "Tcp", "UDP", "udp", "Udp"})
_PORT_FORMAT = contiv_line("service-ports")


def _service_port(text: str) -> None:
    parts = text.split(":")
    if len(parts) != 3:
        raise ParseError(f"{_PORT_FORMAT}, e.g. 80:8080:TCP", _PORT_FORMAT)
    if not all(part.isascii() and part.isdigit() and int(part) <= 65535 for part in parts[:2]):
        raise ParseError(f"{_PORT_FORMAT}; ports are numbers 0-65535", _PORT_FORMAT)
    if parts[2] not in _SERVICE_PROTOCOLS:
        raise ParseError(f"{_PORT_FORMAT}; the protocol is TCP or UDP", _PORT_FORMAT)


def _selector(text: str) -> None:
    key, equals, value = text.partition("=")
    if not key or not equals or "=" in value:
        raise ParseError("Invalid selector. selector format is key1=value1", contiv_line("service-selector", selector=text))


def _protocol_number(text: str) -> None:
    if text.isdigit() and int(text) > 255:
        raise ValueError("IP protocol numbers stop at 255")


# --- checks across the fields of one body -----------------------------------------------------


def _network_addresses(obj: Mapping[str, Any]) -> None:
    subnet = parse_subnet(obj["subnet"])
    gateway = obj["gateway"]
    if gateway and not subnet.is_host(IPv4Address(gateway)):
        raise ValidationError("gateway", f"gateway {gateway} is not a host address of subnet {obj['subnet']}")
    gateway6 = obj["ipv6Gateway"]
    if gateway6 and not obj["ipv6Subnet"]:
        raise ValidationError("ipv6Gateway", f"ipv6Gateway {gateway6} needs an ipv6Subnet")
    if gateway6 and IPv6Address(gateway6) not in parse_subnet6(obj["ipv6Subnet"]):
        raise ValidationError("ipv6Gateway", f"ipv6Gateway {gateway6} is outside ipv6Subnet {obj['ipv6Subnet']}")


def _network_tag(obj: Mapping[str, Any]) -> None:
    encap, tag = obj["encap"], obj["pktTag"]
    limit = VLAN.max_tag if encap == "vlan" else VNI_MAX
    if tag > limit:
        raise ValidationError("pktTag", f"pktTag Value Out of bound: {tag} (a {encap} network takes 1-{limit}, 0 allocates one)")


_TO_IN = contiv_line("rule-to-in-incoming")
_FROM_OUT = contiv_line("rule-from-in-outgoing")
# Per direction: fields that may not all be set together, and Contiv's refusal.
_RULE_EXCLUSIONS: Mapping[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "in": (
        (("toNetwork",), _TO_IN),
        (("toEndpointGroup",), _TO_IN),
        (("fromNetwork", "fromIpAddress"), contiv_line("rule-from-network-and-ip")),
        (("fromNetwork", "fromEndpointGroup"), contiv_line("rule-from-network-and-group")),
    ),
    "out": (
        (("fromNetwork",), _FROM_OUT),
        (("fromEndpointGroup",), _FROM_OUT),
        (("fromIpAddress",), _FROM_OUT),
        (("toNetwork", "toIpAddress"), contiv_line("rule-to-network-and-ip")),
        (("toNetwork", "toEndpointGroup"), contiv_line("rule-to-network-and-group")),
    ),
}


def _rule_directions(obj: Mapping[str, Any]) -> None:
    for names, refusal in _RULE_EXCLUSIONS[obj["direction"]]:
        if all(obj[name] for name in names):
            given = ", ".join(f"{name}={show(obj[name])}" for name in names)
            raise ValidationError(names[-1], f"{refusal}: {given}", contiv=refusal)


def _netprofile_burst(obj: Mapping[str, Any]) -> None:
    if obj["burst"] == 1:
        refusal = contiv_line("netprofile-burst")
        raise ValidationError("burst", f"burst 1: {refusal} (0 = default, else >= 2)", contiv=refusal)


def _service_selectors_and_ports(obj: Mapping[str, Any]) -> None:
    """Contiv refuses a service without selectors, then one without ports (its `validatePorts`)."""
    if not obj["selectors"]:
        refusal = contiv_line("service-selectors")
        raise ValidationError("selectors", f"{refusal}: selectors must list at least one key=value", contiv=refusal)
    if not obj["ports"]:
        raise ValidationError("ports", f"{_PORT_FORMAT}: ports must list at least one, e.g. 80:8080:TCP", contiv=_PORT_FORMAT)


# --- the object types -------------------------------------------------------------------------

_SPECS = (
    ObjectSpec(
        "tenant",
        "tenants",
        ("tenantName",),
        (_optional_name("defaultNetwork"), _name("tenantName")),
        frozen="Cant change tenant parameters after its created",
        once=True,
    ),
    ObjectSpec(
        "network",
        "networks",
        ("tenantName", "networkName"),
        (
            _optional_name("cfgdTag", 128),
            Field("encap", fmt=formats.ENCAP),
            Field("gateway", fmt=formats.IPV4.optional()),
            Field("ipv6Gateway", fmt=formats.IPV6.optional(), parse=IPv6Address),
            Field("ipv6Subnet", fmt=formats.SUBNET6.optional(), parse=parse_subnet6),
            _name("networkName"),
            Field("nwType", fmt=formats.NW_TYPE, default="data"),
            Field("pktTag", "integer", bounds=(0, VNI_MAX)),
            Field("subnet", fmt=formats.SUBNET, parse=parse_subnet),
            _name("tenantName"),
        ),
        checks=(_network_addresses, _network_tag),
        frozen="Cant change network parameters after its created",
    ),
    ObjectSpec(
        "endpointGroup",
        "endpointGroups",
        ("tenantName", "groupName"),
        (
            _optional_name("cfgdTag", 128),
            _names("extContractsGrps"),
            _name("groupName"),
            Field("ipPool", fmt=formats.IP_POOL.optional(), parse=parse_pool),
            Field("netProfile", max_len=64, fmt=formats.PROFILE_NAME.optional()),
            _name("networkName"),
            _names("policies"),
            _name("tenantName"),
        ),
        fixed=(
            ("networkName", "Cannot change network association after epg is created."),
            ("ipPool", "Cannot change IP pool after epg is created."),
        ),
        sticky=("cfgdTag",),
    ),
    ObjectSpec("policy", "policys", ("tenantName", "policyName"), (_name("policyName"), _name("tenantName"))),
    ObjectSpec(
        "rule",
        "rules",
        ("tenantName", "policyName", "ruleId"),
        (
            Field("action", fmt=formats.ACTION),
            Field("direction", fmt=formats.DIRECTION),
            _optional_name("fromEndpointGroup"),
            Field("fromIpAddress", fmt=formats.RULE_ADDRESS.optional()),
            _optional_name("fromNetwork"),
            _name("policyName"),
            Field("port", "integer", bounds=(0, 65535)),
            Field("priority", "integer", bounds=(1, 100), default=1),
            Field("protocol", fmt=formats.PROTOCOL.optional(), parse=_protocol_number),
            _name("ruleId"),
            _name("tenantName"),
            _optional_name("toEndpointGroup"),
            Field("toIpAddress", fmt=formats.RULE_ADDRESS.optional()),
            _optional_name("toNetwork"),
        ),
        checks=(_rule_directions,),
        frozen="can not update a rule after its created",
    ),
    ObjectSpec(
        "netprofile",
        "netprofiles",
        ("tenantName", "profileName"),
        (
            Field("DSCP", "integer", bounds=(0, 63)),
            Field("bandwidth", max_len=64, fmt=formats.BANDWIDTH.optional()),
            Field("burst", "integer", bounds=(0, 10486)),
            Field("profileName", max_len=64, fmt=formats.PROFILE_NAME),
            _name("tenantName"),  # deviation: unchecked in Contiv; only an existing tenant works anyway
        ),
        checks=(_netprofile_burst,),
    ),
    ObjectSpec(
        "serviceLB",
        "serviceLBs",
        ("tenantName", "serviceName"),
        (
            Field("ipAddress", max_len=15, fmt=formats.IPV4.optional()),
            _name("networkName"),
            Field("ports", "list", parse=_service_port),
            Field("selectors", "list", parse=_selector),
            _name("serviceName", 256),
            _name("tenantName"),
        ),
        checks=(_service_selectors_and_ports,),
    ),
    ObjectSpec(
        "extContractsGroup",
        "extContractsGroups",
        ("tenantName", "contractsGroupName"),
        (
            Field("contracts", "list"),
            _name("contractsGroupName"),
            Field("contractsType", fmt=formats.CONTRACTS_TYPE),
            _name("tenantName"),
        ),
        frozen="external contracts update not supported",
    ),
    ObjectSpec(
        "appProfile",
        "appProfiles",
        ("tenantName", "appProfileName"),
        (_name("appProfileName"), _names("endpointGroups"), _name("tenantName")),
    ),
    ObjectSpec(
        "Bgp",
        "Bgps",
        ("hostname",),
        (
            Field("as", max_len=64, fmt=formats.AS_NUMBER.optional()),
            _name("hostname", 256),
            Field("neighbor", max_len=15, fmt=formats.IPV4.optional()),
            Field("neighbor-as", max_len=64, fmt=formats.AS_NUMBER.optional()),
            Field("routerip", fmt=formats.ROUTER_IP),
        ),
    ),
    ObjectSpec(
        "global",
        "globals",
        ("name",),
        (
            _keyword("arpMode", formats.ARP_MODE, optional=True),
            _keyword("fwdMode", formats.FWD_MODE, optional=True),
            _keyword("name", formats.GLOBAL_NAME),
            _keyword("networkInfraType", formats.INFRA_TYPE, optional=True),
            Field("pvtSubnet", fmt=formats.PVT_SUBNET),
            Field("vlans", fmt=formats.VLAN_RANGE, parse=partial(parse_tag_ranges, space=VLAN)),
            Field("vxlans", fmt=formats.VXLAN_RANGE, parse=partial(parse_tag_ranges, space=VXLAN)),
        ),
    ),
    ObjectSpec(
        "aciGw",
        "aciGws",
        ("name",),
        (
            Field("enforcePolicies", fmt=formats.YES_NO),
            Field("includeCommonTenant", fmt=formats.YES_NO),
            Field("name", fmt=formats.ACI_GW_NAME),
            Field("nodeBindings", max_len=2048, fmt=formats.NODE_BINDINGS.optional()),
            Field("pathBindings", max_len=2048, fmt=formats.PATH_BINDINGS.optional()),
            _name("physicalDomain", 128),
        ),
    ),
)

SPECS: Mapping[str, ObjectSpec] = {spec.kind: spec for spec in _SPECS}
"""Every object type by Contiv type name (`"network"`, `"Bgp"` …)."""

COLLECTIONS: Mapping[str, str] = {spec.collection: spec.kind for spec in _SPECS}
"""REST collection name (`"policys"`, `"Bgps"` …) → type name."""

UNSUPPORTED_COLLECTIONS = frozenset({"volumes", "volumeProfiles"})
"""Routed by Contiv but never functional: contivd lists them empty and refuses writes (400)."""


def kind_for(collection: str) -> str:
    """The object type a REST collection holds; volumes are refused, unknown names not found."""
    if collection in COLLECTIONS:
        return COLLECTIONS[collection]
    if collection in UNSUPPORTED_COLLECTIONS:
        raise ValidationError("collection", f"{collection} not supported", contiv=contiv_line("unsupported-type"))
    raise NotFoundError(f"unknown collection {collection!r}")


def _go_field_names(spec: ObjectSpec, body: Mapping[str, Any]) -> dict[str, Any]:
    """The body with each member renamed to the field it sets, as Go's decoder matches them: the
    exact name first, else case-insensitively (`"As"` sets `as`); a later member setting the same
    field wins, as in Go. A member that matches no field is refused (Contiv ignored it silently)."""
    known = {field.name for field in spec.fields} | link_members(spec.kind) | {"key"}
    folded = {name.casefold(): name for name in sorted(known)}
    named: dict[str, Any] = {}
    for name, value in body.items():
        target = name if name in known else folded.get(name.casefold())
        if target is None:
            raise ValidationError(name, f"unknown field {name!r} for {spec.kind}; known: {', '.join(sorted(known))}")
        named[target] = value
    return named


def validate(collection: str, body: object, key: str) -> dict[str, Any]:
    """Validate a POST/PUT `body` for `/api/v1/<collection>/<key>/` and return the stored object.

    Order as in Contiv: JSON types, then the key built from the body must equal the URL key
    ("Invalid Key"), then each field alphabetically, then cross-field checks; the first failure
    raises `ValidationError`. Field names match as Go's decoder matches them (case-insensitively);
    fields the type does not have are refused (Contiv ignored them); `key`, `links` and
    `link-sets` are accepted and the latter two ignored (server-owned).
    """
    spec = SPECS[kind_for(collection)]
    if not isinstance(body, dict):
        raise ValidationError("body", f"a {spec.kind} must be a JSON object, got {show(body)}")
    body = _go_field_names(spec, body)
    obj = {field.name: field.decode(body.get(field.name)) for field in spec.fields}
    built, sent = spec.key_of(obj), body.get("key") or key
    if built != key:
        message = f"Invalid Key: URL key {key!r}, but {':'.join(spec.key_fields)} make {built!r}"
        raise ValidationError("key", message, contiv=contiv_line("invalid-key"))
    if sent != key:
        raise ValidationError("key", f"Invalid Key: URL key {key!r}, but the body has key {show(sent)}", contiv=contiv_line("invalid-key"))
    for field in spec.fields:
        obj[field.name] = field.check(obj[field.name])
    for check in spec.checks:
        check(obj)
    return {"key": key} | {field.name: obj[field.name] for field in spec.fields if obj[field.name] != ZERO[field.type]}

"""Checks that need other stored objects, as pure functions over a `Lookup`.

The REST layer calls, under its write lock and after `objects.validate`:
  * `check_create(kind, obj, lookup)` when no object has that key yet;
  * `check_update(kind, old, new, lookup)` when one has: returns what to store (`old` itself when
    nothing changes, so an identical re-POST is a no-op, Decisions §2, except for a tenant, which
    Contiv refuses to re-create);
  * `check_delete(kind, key, lookup)`: returns the dependents to delete first (a policy's rules).
They raise `NotFoundError` for a missing object or reference, `ConflictError` for a clash with
stored state, `ValidationError` when a field is wrong relative to what it references (an ip-pool
outside its network). Order: references (`links.REFS`) first, then the type's own rules, which
follow §1 and §16 of the API notes. Address *collisions* with endpoints stay with IPAM: only its
allocation bitmap knows every taken address.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from ipaddress import IPv4Address
from typing import Any

from ._addresses import parse_pool, parse_subnet, parse_subnet6
from .contiv_messages import contiv_line
from .errors import ConflictError, NotFoundError, ValidationError
from .links import referrers, refs_from, refs_to
from .lookup import Lookup
from .objects import SPECS
from .ranges import VLAN, VXLAN, format_tag_ranges, format_tags, in_ranges, parse_tag_ranges

Obj = Mapping[str, Any]
Check = Callable[[Obj, Lookup], None]


def _global(lookup: Lookup) -> Obj | None:
    return lookup.get("global", "global")


def _aci_mode(lookup: Lookup) -> bool:
    glob = _global(lookup)
    return glob is not None and glob.get("networkInfraType") == "aci"


def _sorted(lookup: Lookup, kind: str) -> list[Obj]:
    """Objects in key order, so the error reported for several clashes is deterministic."""
    return sorted(lookup.items(kind), key=lambda obj: str(obj["key"]))


def _check_refs(kind: str, obj: Obj, lookup: Lookup) -> None:
    for ref in refs_from(kind):
        for name in ref.names(obj):
            target = ref.target_key(obj, name)
            if lookup.get(ref.target, target) is None:
                raise NotFoundError(ref.missing.format(name=name, key=target), contiv=contiv_line(ref.contiv_missing, name=name, key=target))
            # A single link on the target (an EPG's AppProfile) can hold one referrer only.
            if ref.backlink is not None and ref.backlink.member == "links":
                others = [key for key in referrers(ref, target, lookup) if key != obj["key"]]
                if others:
                    raise ConflictError(f"{ref.target} {target} already belongs to {ref.source} {others[0]}")


# --- network ----------------------------------------------------------------------------------


def _global_ready(obj: Obj, lookup: Lookup) -> None:
    glob = _global(lookup)
    if glob is None:
        raise ConflictError(
            "Global configuration is not ready: no global object", contiv=contiv_line("global-not-ready", reason="global configuration is not ready")
        )
    if not glob.get("fwdMode"):
        raise ConflictError(
            "Global configuration is not ready: global fwdMode is not set",
            contiv=contiv_line("global-not-ready", reason="global forwarding mode is not set"),
        )


def _no_subnet_overlap(obj: Obj, lookup: Lookup) -> None:
    """Only networks of the same tenant may not overlap; across tenants it is allowed."""
    mine = parse_subnet(obj["subnet"])
    mine6 = parse_subnet6(obj["ipv6Subnet"]) if obj.get("ipv6Subnet") else None
    for other in _sorted(lookup, "network"):
        if other["tenantName"] != obj["tenantName"] or other["key"] == obj["key"]:
            continue
        # Contiv checks IPv6 first, and names the other network but the new subnet.
        if mine6 and other.get("ipv6Subnet") and mine6.overlaps(parse_subnet6(other["ipv6Subnet"])):
            conflict, contiv = f"subnetv6 {other['ipv6Subnet']}", contiv_line("subnet6-overlap", other=other["networkName"], subnet=obj["ipv6Subnet"])
        elif mine.overlaps(parse_subnet(other["subnet"])):
            conflict, contiv = f"subnet {other['subnet']}", contiv_line("subnet-overlap", other=other["networkName"], subnet=obj["subnet"])
        else:
            continue
        raise ConflictError(f"network {obj['networkName']} conflicts with {conflict} of network {other['key']}", contiv=contiv)


def _no_name_clash(other_kind: str, message: str, case: str) -> Check:
    """A network and an endpoint group may not share a key (their names share a namespace)."""

    def check(obj: Obj, lookup: Lookup) -> None:
        if lookup.get(other_kind, obj["key"]) is not None:
            raise ConflictError(message.format(key=obj["key"]), contiv=contiv_line(case, name=obj["key"].partition(":")[2]))

    return check


def _requested_tag(obj: Obj, lookup: Lookup) -> None:
    tag, encap = obj.get("pktTag", 0), obj["encap"]
    glob = _global(lookup)
    if not tag or glob is None:
        return
    allowed = parse_tag_ranges(glob[f"{encap}s"], VLAN if encap == "vlan" else VXLAN)
    if not in_ranges(tag, allowed):
        raise ConflictError(f"requested {encap} is out of range - {encap}:{tag} (global {encap}s {format_tag_ranges(allowed)})")
    if tag in lookup.tags_in_use(encap):
        raise ConflictError(f"requested {encap} not available - {encap}:{tag}", contiv=_tag_unavailable(encap, tag))


def _tag_unavailable(encap: str, tag: int) -> str:
    """Contiv's VLAN resource names the tag, its VXLAN resource does not."""
    return contiv_line("tag-unavailable", encap=encap, tag=tag) if encap == "vlan" else contiv_line("vxlan-unavailable")


# --- endpointGroup ----------------------------------------------------------------------------


def _network_key(obj: Obj) -> str:
    return f"{obj['tenantName']}:{obj['networkName']}"


def _network_of(obj: Obj, lookup: Lookup) -> tuple[str, Obj]:
    """The network an EPG or service names; it exists, `_check_refs` ran first."""
    key = _network_key(obj)
    network = lookup.get("network", key)
    assert network is not None, "references are checked before type rules"
    return key, network


def _aci_vlan_network(obj: Obj, lookup: Lookup) -> None:
    """In ACI mode every EPG gets its own VLAN, so its network must be a VLAN network."""
    key, network = _network_of(obj, lookup)
    if _aci_mode(lookup) and network["encap"] != "vlan":
        raise ConflictError(f"network type must be VLAN for ACI mode: network {key} is {network['encap']}", contiv=contiv_line("aci-needs-vlan"))


def _ip_pool(obj: Obj, lookup: Lookup) -> None:
    pool = obj.get("ipPool")
    if not pool:
        return
    key, network = _network_of(obj, lookup)
    start, end = parse_pool(pool)
    low, high = parse_subnet(network["subnet"]).hosts
    if start < low or end > high:
        raise ValidationError(
            "ipPool",
            f"bad ip-pool {pool}, EPG ip-pool must be a subset of network {network['subnet']} hosts {low}-{high}",
            contiv=contiv_line("bad-ip-pool", pool=pool, subnet=network["subnet"]),
        )
    gateway = network.get("gateway")
    if gateway and start <= IPv4Address(gateway) <= end:
        raise ConflictError(
            f"ip address {gateway} is not available: ipPool {pool} holds the gateway of network {key}",
            contiv=contiv_line("address-unavailable", address=gateway),
        )
    for other in _sorted(lookup, "endpointGroup"):
        if other["key"] == obj["key"] or not other.get("ipPool") or _network_key(other) != key:
            continue
        other_start, other_end = parse_pool(other["ipPool"])
        if start <= other_end and other_start <= end:
            raise ConflictError(
                f"ip address {max(start, other_start)} is not available: "
                f"ipPool {pool} overlaps the ip-pool {other['ipPool']} of endpointGroup {other['key']}",
                contiv=contiv_line("address-unavailable", address=max(start, other_start)),
            )


# --- rule, serviceLB, Bgp ---------------------------------------------------------------------

_EPG_POLICIES = next(ref for ref in refs_from("endpointGroup") if ref.field == "policies")


def _to_ip_in_group(obj: Obj, lookup: Lookup) -> None:
    """An incoming rule with a to-address (from k8s network policy) must target an endpoint of the
    one group the policy is attached to."""
    address = obj.get("toIpAddress")
    if obj["direction"] != "in" or not address:
        return
    groups = referrers(_EPG_POLICIES, f"{obj['tenantName']}:{obj['policyName']}", lookup)
    if len(groups) != 1:
        contiv = contiv_line("rule-to-ip-groups", address=address, count=len(groups), policy=obj["policyName"])
        raise ConflictError(f"failed to configure {address}, {len(groups)} endpoint groups linked to policy {obj['policyName']}", contiv=contiv)
    if address not in lookup.endpoint_ips("endpointGroup", groups[0]):
        contiv = contiv_line("rule-to-ip-not-in-group", address=address, group=groups[0].partition(":")[2])
        raise ConflictError(f"failed to configure {address}, ip address is not in epg {groups[0]}", contiv=contiv)


def _vip_in_network(obj: Obj, lookup: Lookup) -> None:
    vip = obj.get("ipAddress")
    if not vip:
        return
    key, network = _network_of(obj, lookup)
    low, high = parse_subnet(network["subnet"]).hosts
    if not low <= IPv4Address(vip) <= high:
        raise ValidationError("ipAddress", f"ipAddress {vip} is not a host address of network {key} ({low}-{high})")


def _not_aci(obj: Obj, lookup: Lookup) -> None:
    if _aci_mode(lookup):
        raise ConflictError(f"not supported in ACI fabric mode: Bgp {obj['key']}", contiv=contiv_line("bgp-aci"))


_CREATE_RULES: Mapping[str, tuple[Check, ...]] = {
    "network": (
        _global_ready,
        _no_subnet_overlap,
        _no_name_clash("endpointGroup", "EndpointGroup {key} conflicts with the network name", "network-name-clash"),
        _requested_tag,
    ),
    "endpointGroup": (
        _no_name_clash("network", "Network {key} conflicts with the endpointGroup name", "group-name-clash"),
        _aci_vlan_network,
        _ip_pool,
    ),
    "rule": (_to_ip_in_group,),
    "serviceLB": (_vip_in_network,),
    "Bgp": (_not_aci,),
}


def check_create(kind: str, obj: Obj, lookup: Lookup) -> None:
    """Refuse creating `obj` (validated, of type `kind`) if the stored world does not allow it."""
    _check_refs(kind, obj, lookup)
    for rule in _CREATE_RULES.get(kind, ()):
        rule(obj, lookup)


# --- update -----------------------------------------------------------------------------------


def _refuse_while_networks(option: str, vlans: int, vxlans: int) -> None:
    if vlans or vxlans:
        counts = [f"{count} {noun}" for count, noun in ((vlans, "vlans"), (vxlans, "vxlans")) if count]
        message = f"Unable to update {option} due to existing {' and '.join(counts)}"
        raise ConflictError(message, contiv=contiv_line("global-networks-exist", option=option, counts=" and ".join(counts)))


def _global_update(old: Obj, new: Obj, lookup: Lookup) -> None:
    """Forwarding mode and private subnet change only without networks; ranges must keep the tags
    in use; leaving routing needs the Bgp configs gone first (§10)."""
    in_use = {space: sorted(lookup.tags_in_use(space.name)) for space in (VLAN, VXLAN)}
    networks = (len(in_use[VLAN]), len(in_use[VXLAN]))
    if old.get("fwdMode") != new.get("fwdMode"):
        _refuse_while_networks("forwarding mode", *networks)
        if old.get("fwdMode") == "routing" and any(True for _ in lookup.items("Bgp")):
            raise ConflictError("please delete existing Bgp configs before leaving routing mode", contiv=contiv_line("global-bgp-exists"))
    if old["pvtSubnet"] != new["pvtSubnet"]:
        _refuse_while_networks("private subnet", *networks)
    for space, tags in in_use.items():
        field = f"{space.name}s"
        if old[field] != new[field]:
            allowed = parse_tag_ranges(new[field], space)
            outside = [tag for tag in tags if not in_ranges(tag, allowed)]
            if outside:
                message = f"cannot update the {space.name} range due to existing {space.name}s {format_tags(outside)}"
                raise ConflictError(message, contiv=contiv_line("global-range-in-use", space=space.name, tags=format_tags(outside)))


_UPDATE_RULES: Mapping[str, Callable[[Obj, Obj, Lookup], None]] = {"global": _global_update}


def check_update(kind: str, old: Obj, new: Obj, lookup: Lookup) -> Obj:
    """Refuse or accept replacing `old` by `new` (same key); returns the object to store."""
    spec = SPECS[kind]
    if new == old and spec.once and spec.frozen is not None:
        raise ConflictError(f"{spec.frozen}: {kind} {old['key']} already exists", contiv=spec.frozen)
    if new == old:
        return old
    changed = sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))
    if spec.frozen is not None:
        raise ConflictError(f"{spec.frozen}: {kind} {old['key']} would change {', '.join(changed)}", contiv=spec.frozen)
    for field, refusal in spec.fixed:
        if field in changed:
            raise ConflictError(f"{refusal} ({field} {old.get(field, '')!r} -> {new.get(field, '')!r})", contiv=refusal)
    stored = {name: value for name, value in new.items() if name not in spec.sticky}
    stored |= {name: old[name] for name in spec.sticky if name in old}
    if stored == old:
        return old
    if kind in _UPDATE_RULES:
        _UPDATE_RULES[kind](old, stored, lookup)
    check_create(kind, stored, lookup)
    return stored


# --- delete -----------------------------------------------------------------------------------


def _no_endpoints(kind: str, label: str, case: str) -> Check:
    def check(obj: Obj, lookup: Lookup) -> None:
        # Only networks have nwType: on an infra network every host has an endpoint, and the
        # agents remove those themselves when the network goes.
        if obj.get("nwType") == "infra":
            return
        count = len(lookup.endpoint_ips(kind, obj["key"]))
        if count:
            contiv = contiv_line(case, name=obj["key"].partition(":")[2])
            raise ConflictError(f"Error: {label} {obj['key']} has active endpoints ({count})", contiv=contiv)

    return check


def _count_blocks(kind: str, message: str, case: str | None) -> Check:
    def check(obj: Obj, lookup: Lookup) -> None:
        count = sum(1 for _ in lookup.items(kind))
        if count:
            raise ConflictError(message.format(count=count, key=obj["key"]), contiv=contiv_line(case, count=count) if case else None)

    return check


_DELETE_RULES: Mapping[str, tuple[Check, ...]] = {
    "network": (_no_endpoints("network", "Network", "network-has-endpoints"),),
    "endpointGroup": (_no_endpoints("endpointGroup", "EPG", "group-has-endpoints"),),
    "aciGw": (_count_blocks("appProfile", "{count} App-Profiles found. Delete them first", "aci-gw-has-app-profiles"),),
    # Contiv lets global go while networks hold tags from its ranges; contivd refuses (§3).
    "global": (_count_blocks("network", "cannot delete {key}, has {count} networks", None),),
}


def check_delete(kind: str, key: str, lookup: Lookup) -> tuple[tuple[str, str], ...]:
    """Refuse deleting `kind` `key` while something needs it; returns `(kind, key)` pairs of the
    dependents to delete with it, first (a policy takes its rules along)."""
    obj = lookup.get(kind, key)
    if obj is None:
        raise NotFoundError(f"{kind} not found: {key}", contiv=contiv_line("object-not-found", kind=kind))
    cascade: list[tuple[str, str]] = []
    for ref in refs_to(kind):
        if ref.in_use is None and not ref.cascade:
            continue
        sources = referrers(ref, key, lookup)
        if sources and ref.in_use is not None:
            values = {"key": key, "name": key.rpartition(":")[2], "count": len(sources), "sources": ", ".join(sources)}
            contiv = contiv_line(ref.contiv_in_use, **values) if ref.contiv_in_use else None
            raise ConflictError(ref.in_use.format(**values), contiv=contiv)
        if ref.cascade:
            cascade.extend((ref.source, source) for source in sources)
    for rule in _DELETE_RULES.get(kind, ()):
        rule(obj, lookup)
    return tuple(sorted(cascade))

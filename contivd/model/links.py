"""References between Contiv objects, declared once, and everything Contiv derives from them.

A `Ref` says "field F of a SOURCE object names a TARGET object". From that one declaration come:
the existence check on create (`missing`), the refusal to delete a target still referenced
(`in_use`) or the cascade that deletes the sources with it, and the `links` / `link-sets` members
Contiv shows on both ends. Links are therefore never stored: `render` derives them from the
objects, so they cannot drift. The order of `REFS` is the order Contiv checks them in, on create
(per source) and on delete (per target, e.g. a tenant: app profiles, groups, policies, netprofiles,
services, networks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from .lookup import Lookup


@dataclass(frozen=True)
class Slot:
    """Where a link shows up: a single link (`links.Tenant`) or a member of a link-set."""

    member: Literal["links", "link-sets"]
    name: str


def _link(name: str) -> Slot:
    return Slot("links", name)


def _link_set(name: str) -> Slot:
    return Slot("link-sets", name)


@dataclass(frozen=True)
class Ref:
    """Field `field` of a `source` object names `target` objects (a string or a list of names).

    Templates: `missing` gets `{name}` (the value) and `{key}` (the target key); `in_use` gets
    `{key}` (the target), `{count}` and `{sources}` (the referring keys). The `contiv_*` cases
    name Contiv's text for the same refusal (`contiv_messages`), filled with the same values plus
    `{name}`, the target's own name, on delete.
    """

    source: str
    field: str
    target: str
    missing: str
    link: Slot | None = None
    backlink: Slot | None = None
    in_use: str | None = None
    cascade: bool = False
    contiv_missing: str = ""  # contiv_messages case of `missing`
    contiv_in_use: str = ""  # contiv_messages case of `in_use`

    def names(self, obj: Mapping[str, Any]) -> tuple[str, ...]:
        value = obj.get(self.field) or ()
        return (value,) if isinstance(value, str) else tuple(value)

    def target_key(self, obj: Mapping[str, Any], name: str) -> str:
        """Tenants are keyed by name; everything else a reference names lives in the same tenant."""
        return name if self.target == "tenant" else f"{obj['tenantName']}:{name}"

    def targets(self, obj: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(self.target_key(obj, name) for name in self.names(obj))


# Ref(source, field, target, missing, link on the source, backlink on the target, in_use refusal)
REFS: tuple[Ref, ...] = (
    Ref(
        "appProfile",
        "tenantName",
        "tenant",
        "Tenant {name} not found",
        _link("Tenant"),
        _link_set("AppProfiles"),
        "cannot delete {key}, has {count} app profiles",
        contiv_missing="tenant-missing-named",
        contiv_in_use="tenant-has-app-profiles",
    ),
    Ref(
        "appProfile",
        "endpointGroups",
        "endpointGroup",
        "EndpointGroup {key} not found",
        _link_set("EndpointGroups"),
        _link("AppProfile"),
        "Cannot delete {key}, associated to appProfile {sources}",
        contiv_missing="group-missing-key",
        contiv_in_use="group-in-app-profile",
    ),
    Ref(
        "endpointGroup",
        "tenantName",
        "tenant",
        "Tenant not found: {name}",
        _link("Tenant"),
        _link_set("EndpointGroups"),
        "cannot delete {key} has {count} endpoint groups",
        contiv_missing="tenant-missing",
        contiv_in_use="tenant-has-groups",
    ),
    Ref(
        "endpointGroup",
        "networkName",
        "network",
        "Network {name} not found",
        _link("Network"),
        _link_set("EndpointGroups"),
        "cannot delete {key} has {count} endpoint groups",
        contiv_missing="network-missing-named",
        contiv_in_use="network-has-groups",
    ),
    Ref(
        "endpointGroup",
        "policies",
        "policy",
        "Policy not found: {key}",
        _link_set("Policies"),
        _link_set("EndpointGroups"),
        "Policy is being used by endpoint groups {sources}",
        contiv_missing="policy-missing",
        contiv_in_use="policy-in-use",
    ),
    Ref(
        "endpointGroup",
        "netProfile",
        "netprofile",
        "netprofile not found: {key}",
        _link("NetProfile"),
        _link_set("EndpointGroups"),
        "NetProfile is being used by endpoint groups {sources}",
        contiv_missing="netprofile-missing",
        contiv_in_use="netprofile-in-use",
    ),
    Ref(
        "endpointGroup",
        "extContractsGrps",
        "extContractsGroup",
        "External contracts group {key} not found",
        _link_set("ExtContractsGrps"),
        _link_set("EndpointGroups"),
        "External contracts group is in-use by endpoint groups {sources}",
        contiv_missing="contracts-missing",
        contiv_in_use="contracts-in-use",
    ),
    Ref(
        "policy",
        "tenantName",
        "tenant",
        "Tenant not found: {name}",
        _link("Tenant"),
        _link_set("Policies"),
        "cannot delete {key} has {count} policies",
        contiv_missing="tenant-missing",
        contiv_in_use="tenant-has-policies",
    ),
    Ref(
        "rule",
        "fromEndpointGroup",
        "endpointGroup",
        "endpoint group not found: {key}",
        _link("MatchEndpointGroup"),
        _link_set("MatchRules"),
        contiv_missing="rule-group-missing",
    ),
    Ref(
        "rule",
        "toEndpointGroup",
        "endpointGroup",
        "endpoint group not found: {key}",
        _link("MatchEndpointGroup"),
        _link_set("MatchRules"),
        contiv_missing="rule-group-missing",
    ),
    Ref("rule", "fromNetwork", "network", "from Network not found: {key}", contiv_missing="rule-from-network-missing"),
    Ref("rule", "toNetwork", "network", "to Network not found: {key}", contiv_missing="rule-to-network-missing"),
    Ref(
        "rule",
        "policyName",
        "policy",
        "Policy not found: {key}",
        _link_set("Policies"),
        _link_set("Rules"),
        cascade=True,
        contiv_missing="policy-missing",
    ),
    Ref(
        "netprofile",
        "tenantName",
        "tenant",
        "Tenant not found: {name}",
        _link("Tenant"),
        _link_set("NetProfiles"),
        "Cannot delete {key} has {count} netprofiles",
        contiv_missing="tenant-missing",
        contiv_in_use="tenant-has-netprofiles",
    ),
    # Contiv forgets this one on tenant delete; contivd checks it (Decisions §3).
    Ref(
        "serviceLB",
        "tenantName",
        "tenant",
        "Tenant {name} not found",
        _link("Tenant"),
        _link_set("Servicelbs"),
        "cannot delete {key} has {count} services",
        contiv_missing="tenant-missing-named",
    ),
    Ref(
        "serviceLB",
        "networkName",
        "network",
        "Network {name} not found",
        _link("Network"),
        _link_set("Servicelbs"),
        "cannot delete {key} has {count} services",
        contiv_missing="network-missing-named",
        contiv_in_use="network-has-services",
    ),
    Ref(
        "network",
        "tenantName",
        "tenant",
        "Tenant not found: {name}",
        _link("Tenant"),
        _link_set("Networks"),
        "cannot delete {key} has {count} networks",
        contiv_missing="tenant-missing",
        contiv_in_use="tenant-has-networks",
    ),
    Ref("extContractsGroup", "tenantName", "tenant", "Tenant not found: {name}", contiv_missing="tenant-missing"),
)


@cache
def refs_from(kind: str) -> tuple[Ref, ...]:
    """References held by objects of `kind`, in check order."""
    return tuple(ref for ref in REFS if ref.source == kind)


@cache
def refs_to(kind: str) -> tuple[Ref, ...]:
    """References pointing at objects of `kind`, in check order."""
    return tuple(ref for ref in REFS if ref.target == kind)


def referrers(ref: Ref, key: str, lookup: Lookup) -> tuple[str, ...]:
    """Keys of the `ref.source` objects whose `ref.field` names `key`, sorted."""
    return tuple(sorted(obj["key"] for obj in lookup.items(ref.source) if key in ref.targets(obj)))


@cache
def _slots(kind: str) -> tuple[tuple[str, ...], bool]:
    """The single-link names a `kind` object shows (always, empty ones as `{}`) and whether it has
    link-sets at all (empty link-sets are omitted, but `"link-sets": {}` itself is always there)."""
    slots = [ref.link for ref in refs_from(kind)] + [ref.backlink for ref in refs_to(kind)]
    links = tuple(sorted({slot.name for slot in slots if slot is not None and slot.member == "links"}))
    return links, any(slot is not None and slot.member == "link-sets" for slot in slots)


def link_members(kind: str) -> frozenset[str]:
    """The server-owned members (`"links"`, `"link-sets"`) of a `kind` object's JSON."""
    links, has_link_sets = _slots(kind)
    members = {"links"} if links else set()
    if has_link_sets:
        members.add("link-sets")
    return frozenset(members)


def render(kind: str, obj: Mapping[str, Any], lookup: Lookup) -> dict[str, Any]:
    """`obj` as Contiv returns it: its fields plus `link-sets` and `links` derived from `REFS`."""
    link_names, has_link_sets = _slots(kind)
    links: dict[str, dict[str, str]] = {name: {} for name in link_names}
    link_sets: dict[str, dict[str, dict[str, str]]] = {}

    def put(slot: Slot, other_kind: str, other_key: str) -> None:
        link = {"type": other_kind, "key": other_key}
        if slot.member == "links":
            links[slot.name] = link
        else:
            link_sets.setdefault(slot.name, {})[other_key] = link

    for ref in refs_from(kind):
        if ref.link is not None:
            for target in ref.targets(obj):
                put(ref.link, ref.target, target)
    for ref in refs_to(kind):
        if ref.backlink is not None:
            for source in referrers(ref, obj["key"], lookup):
                put(ref.backlink, ref.source, source)

    out = dict(obj)
    if has_link_sets:
        out["link-sets"] = {name: dict(sorted(members.items())) for name, members in sorted(link_sets.items())}
    if link_names:
        out["links"] = links
    return out

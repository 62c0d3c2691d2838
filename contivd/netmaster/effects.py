"""What a configuration change does to state: Contiv's create/update/delete callbacks.

Each handler gets the View (already holding the new object), the Writes to fill, and the
old and new objects (None for create / delete). Handlers are deterministic given the View;
the service commits model object, state and CONFIG_VERSION bump in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from ..model import VLAN, VXLAN, Attachment, ConflictError, NotFoundError, PolicyRule, Remotes, compile_attachment, parse_tag_ranges
from ..state import EndpointGroupState, EpgPolicyState, GlobalConfigState, GlobalState, RuleMap, TagsState, tables
from ..state.stored import Family
from ..state.tables import ConfigObject as Obj
from . import ipam, resources, services
from .view import View, Writes

R = TypeVar("R")
Handler = Callable[[View, Writes, Obj | None, Obj | None], None]


def _tags(view: View) -> TagsState:
    tags = view.read(tables.TAGS)
    if tags is None:
        raise ConflictError("Global configuration is not ready: tag state missing")
    return tags


def _global(view: View) -> Obj:
    glob = view.get("global", "global")
    if glob is None:
        raise ConflictError("Global configuration is not ready: global object missing")
    return glob


# ---- global ---------------------------------------------------------------------------------


def on_global(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    if new is None:
        writes.delete(tables.GLOBAL_CONFIG)
        writes.delete(tables.GLOBAL_STATE)
        return
    writes.put(
        tables.GLOBAL_CONFIG,
        "",
        GlobalConfigState(
            nw_infra_type=new.get("networkInfraType", "default"),
            fwd_mode=new.get("fwdMode", "bridge"),
            arp_mode=new.get("arpMode", "proxy"),
            pvt_subnet=new.get("pvtSubnet", "172.19.0.0/16"),
        ),
    )
    writes.put(tables.GLOBAL_STATE, "", GlobalState(vlans=new.get("vlans", ""), vxlans=new.get("vxlans", "")))
    if view.read(tables.TAGS) is None:
        writes.put(tables.TAGS, "", resources.new_tags_state())


# ---- network --------------------------------------------------------------------------------


def on_network(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    if new is not None and old is None:
        glob, tags = _global(view), _tags(view)
        requested = int(new.get("pktTag", 0))
        if new["encap"] == "vlan":
            tags, pkt_tag = resources.allocate(tags, "vlan", parse_tag_ranges(glob.get("vlans", ""), VLAN), requested)
            ext_tag = 0
        else:
            tags, ext_tag = resources.allocate(tags, "vxlan", parse_tag_ranges(glob.get("vxlans", ""), VXLAN), requested)
            tags, pkt_tag = resources.allocate(tags, "localVlan")
        writes.put(tables.TAGS, "", tags)
        writes.put(tables.NETWORKS, tables.network_id(new["tenantName"], new["networkName"]), ipam.new_network_state(new, pkt_tag, ext_tag))
    elif new is None and old is not None:
        network_id = tables.network_id(old["tenantName"], old["networkName"])
        state = view.read(tables.NETWORKS, network_id)
        if state is not None:
            tags = _tags(view)
            if state.pkt_tag_type == "vlan":
                tags = resources.release(tags, "vlan", state.pkt_tag)
            else:
                tags = resources.release(resources.release(tags, "vxlan", state.ext_pkt_tag), "localVlan", state.pkt_tag)
            writes.put(tables.TAGS, "", tags)
            writes.delete(tables.NETWORKS, network_id)
        for ep in view.endpoints("network", f"{old['tenantName']}:{old['networkName']}"):
            writes.delete(tables.ENDPOINTS, ep.id)  # infra networks: agents' own endpoints
    refresh_policies(view, writes, (new or old or {})["tenantName"])


# ---- endpoint groups ------------------------------------------------------------------------


def _with_profile(view: View, group: Obj, state: EndpointGroupState) -> EndpointGroupState:
    """The group state carrying its netprofile's DSCP, bandwidth and burst (zero without one)."""
    profile = view.get("netprofile", f"{group['tenantName']}:{group['netProfile']}") if group.get("netProfile") else None
    if profile is None:
        return replace(state, dscp=0, bandwidth="", burst=0)
    return replace(state, dscp=profile.get("DSCP", 0), bandwidth=profile.get("bandwidth", ""), burst=profile.get("burst", 0))


def on_endpoint_group(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    group = new or old
    assert group is not None
    tenant = group["tenantName"]
    group_id = tables.group_id(tenant, group["groupName"])
    network_id = tables.network_id(tenant, group["networkName"])
    if new is not None and old is None:
        network = view.read(tables.NETWORKS, network_id)
        if network is None:
            raise NotFoundError(f"Network {group['networkName']} not found")
        tags, epg_id = resources.allocate(_tags(view), "epgId")
        writes.put(tables.TAGS, "", tags)
        state, network = ipam.new_epg_state(new, network, epg_id)
        writes.put(tables.NETWORKS, network_id, network)
        writes.put(tables.GROUPS, group_id, _with_profile(view, new, state))
    elif new is not None:
        current = view.read(tables.GROUPS, group_id)
        if current is not None:
            writes.put(tables.GROUPS, group_id, _with_profile(view, new, current))
    else:
        current = view.read(tables.GROUPS, group_id)
        if current is not None:
            writes.put(tables.TAGS, "", resources.release(_tags(view), "epgId", current.endpoint_group_id))
            network = view.read(tables.NETWORKS, network_id)
            if network is not None:
                writes.put(tables.NETWORKS, network_id, ipam.release_epg_pool(current, network))
            writes.delete(tables.GROUPS, group_id)
    refresh_policies(view, writes, tenant)


def on_netprofile(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    profile = new or old
    assert profile is not None
    for group in view.items("endpointGroup"):
        if group["tenantName"] == profile["tenantName"] and group.get("netProfile") == profile["profileName"]:
            group_id = tables.group_id(group["tenantName"], group["groupName"])
            state = view.read(tables.GROUPS, group_id)
            if state is not None:
                writes.put(tables.GROUPS, group_id, _with_profile(view, group, state))


def on_policy_or_rule(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    refresh_policies(view, writes, (new or old or {})["tenantName"])


# ---- policy state ---------------------------------------------------------------------------


def refresh_policies(view: View, writes: Writes, tenant: str) -> None:
    """Recompute every EpgPolicy and policyRule state of a tenant and write the difference.

    Recomputing the tenant (not patching) keeps remote group ids and subnets right when groups,
    networks, rules or attachments change; configuration writes are rare, tenants small.
    """
    glob = view.get("global", "global")
    enforce = not (glob and glob.get("networkInfraType") == "aci")
    groups = [g for g in view.items("endpointGroup") if g["tenantName"] == tenant]
    group_ids: dict[str, int] = {}
    for group in groups:
        state = view.read(tables.GROUPS, tables.group_id(tenant, group["groupName"]))
        if state is not None:
            group_ids[f"{tenant}:{group['groupName']}"] = state.endpoint_group_id
    subnets = {f"{n['tenantName']}:{n['networkName']}": n["subnet"] for n in view.items("network") if n["tenantName"] == tenant}
    remotes = Remotes(group_ids=group_ids, subnets=subnets)
    rules = [r for r in view.items("rule") if r["tenantName"] == tenant]
    desired: list[tuple[EpgPolicyState, tuple[PolicyRule, ...]]] = []  # each attached policy and its ofnet rules
    for group in groups if enforce else []:
        group_key = f"{tenant}:{group['groupName']}"
        if group_key not in group_ids:
            continue
        for policy in group.get("policies", []):
            attachment = Attachment(group_key, group_ids[group_key], f"{tenant}:{policy}")
            compiled = compile_attachment(attachment, rules, remotes)
            rule_maps = {
                rule["key"]: RuleMap(dict(rule), tuple(c for c in compiled if c.rule_id.startswith(f"{attachment.key}:{rule['key']}:")))
                for rule in rules
                if rule["policyName"] == policy
            }
            desired.append((EpgPolicyState(attachment.key, attachment.group_id, tuple(rule_maps.items())), compiled))
    existing_policies, existing_rules = view.owned_policy_states(tenant)
    wanted_policies = {policy.id for policy, _ in desired}
    wanted_rules = {rule.rule_id for _, compiled in desired for rule in compiled}
    for id in existing_policies:
        if id not in wanted_policies:
            writes.delete(tables.POLICIES, id)
    for id in existing_rules:
        if id not in wanted_rules:
            writes.delete(tables.POLICY_RULES, id)
    for policy, compiled in desired:
        _put_changed(writes, tables.POLICIES, policy.id, existing_policies.get(policy.id), policy)
        for rule in compiled:
            _put_changed(writes, tables.POLICY_RULES, rule.rule_id, existing_rules.get(rule.rule_id), rule)


def _put_changed(writes: Writes, table: Family[R], id: str, existing: R | None, wanted: R) -> None:
    """Write `wanted` unless the stored record says the same (compared as stored)."""
    if existing is None or table.render(existing) != table.render(wanted):
        writes.put(table, id, wanted)


def on_service_lb(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    service = new or old
    assert service is not None
    tenant, name = service["tenantName"], service["serviceName"]
    vip = services.vip(view, tenant, name)
    if new is None:
        services.release_vip(view, writes, service, vip)
        services.remove(writes, tenant, name)
        return
    if old is None:
        vip = services.allocate_vip(view, writes, new)
    endpoints = [ep for n in view.items("network") if n["tenantName"] == tenant for ep in view.endpoints("network", n["key"])]
    services.refresh(view, writes, tenant, [new], endpoints)
    services.set_vip(view, writes, tenant, name, vip)


HANDLERS: dict[str, Handler] = {
    "global": on_global,
    "network": on_network,
    "endpointGroup": on_endpoint_group,
    "netprofile": on_netprofile,
    "policy": on_policy_or_rule,
    "rule": on_policy_or_rule,
    "serviceLB": on_service_lb,
}


def _no_effect(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    """Types that are stored and validated only (Bgp, appProfile, aciGw, …)."""


def handler(kind: str) -> Handler:
    return HANDLERS.get(kind, _no_effect)

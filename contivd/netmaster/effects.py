"""What a configuration change does to state: Contiv's create/update/delete callbacks.

Each handler gets the View (already holding the new object), the Writes to fill, and the
old and new objects (None for create / delete). Handlers are deterministic given the View;
the service commits model object, state and CONFIG_VERSION bump in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..model import VLAN, VXLAN, Attachment, ConflictError, NotFoundError, Remotes, compile_attachment, parse_tag_ranges
from ..state import keys as layout
from ..state.records import policy_rule_to_json
from . import ipam, resources, services
from .view import View, Writes

Obj = Mapping[str, Any]
Handler = Callable[[View, Writes, Obj | None, Obj | None], None]


def _tags(view: View) -> dict[str, Any]:
    tags: dict[str, Any] | None = view.state(layout.TAGS_STATE)
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
        writes.delete(layout.GLOBAL_CONFIG)
        writes.delete(layout.GLOBAL_STATE)
        return
    writes.put(
        layout.GLOBAL_CONFIG,
        {
            "id": "",
            "nw-infra-type": new.get("networkInfraType", "default"),
            "fwd-mode": new.get("fwdMode", "bridge"),
            "arp-mode": new.get("arpMode", "proxy"),
            "pvt-subnet": new.get("pvtSubnet", "172.19.0.0/16"),
        },
    )
    writes.put(layout.GLOBAL_STATE, {"id": "", "auto": {"VLANs": new.get("vlans", ""), "VXLANs": new.get("vxlans", "")}})
    if view.state(layout.TAGS_STATE) is None:
        writes.put(layout.TAGS_STATE, resources.new_tags_state())


# ---- network --------------------------------------------------------------------------------


def on_network(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    if new is not None and old is None:
        glob, tags = _global(view), _tags(view)
        requested = int(new.get("pktTag", 0))
        if new["encap"] == "vlan":
            pkt_tag = resources.allocate(tags, "vlan", parse_tag_ranges(glob.get("vlans", ""), VLAN), requested)
            ext_tag = 0
        else:
            ext_tag = resources.allocate(tags, "vxlan", parse_tag_ranges(glob.get("vxlans", ""), VXLAN), requested)
            pkt_tag = resources.allocate(tags, "localVlan")
        writes.put(layout.TAGS_STATE, tags)
        state = ipam.new_network_state(dict(new), pkt_tag, ext_tag)
        writes.put(layout.net_state(new["tenantName"], new["networkName"]), state)
    elif new is None and old is not None:
        key = layout.net_state(old["tenantName"], old["networkName"])
        state = view.state(key)
        if state is not None:
            tags = _tags(view)
            if state["pktTagType"] == "vlan":
                resources.release(tags, "vlan", state["pktTag"])
            else:
                resources.release(tags, "vxlan", state["extPktTag"])
                resources.release(tags, "localVlan", state["pktTag"])
            writes.put(layout.TAGS_STATE, tags)
            writes.delete(key)
        for ep in view.endpoints("network", f"{old['tenantName']}:{old['networkName']}"):
            writes.delete(layout.ep_state(ep["id"]))  # infra networks: agents' own endpoints
    refresh_policies(view, writes, (new or old or {})["tenantName"])


# ---- endpoint groups ------------------------------------------------------------------------


def _profile_fields(view: View, group: Obj) -> dict[str, Any]:
    profile = view.get("netprofile", f"{group['tenantName']}:{group['netProfile']}") if group.get("netProfile") else None
    if profile is None:
        return {"DSCP": 0, "Bandwidth": "", "Burst": 0}
    return {"DSCP": profile.get("DSCP", 0), "Bandwidth": profile.get("bandwidth", ""), "Burst": profile.get("burst", 0)}


def on_endpoint_group(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    group = new or old
    assert group is not None
    tenant = group["tenantName"]
    epg_key = layout.epg_state(tenant, group["groupName"])
    net_key = layout.net_state(tenant, group["networkName"])
    if new is not None and old is None:
        network = view.state(net_key)
        if network is None:
            raise NotFoundError(f"Network {group['networkName']} not found")
        tags = _tags(view)
        epg_id = resources.allocate(tags, "epgId")
        writes.put(layout.TAGS_STATE, tags)
        state, network = ipam.new_epg_state(dict(new), network, epg_id)
        state.update(_profile_fields(view, new))
        writes.put(net_key, network)
        writes.put(epg_key, state)
    elif new is not None:
        state = view.state(epg_key)
        if state is not None:
            state.update(_profile_fields(view, new))
            writes.put(epg_key, state)
    else:
        state = view.state(epg_key)
        if state is not None:
            tags = _tags(view)
            resources.release(tags, "epgId", state["endpointGroupId"])
            writes.put(layout.TAGS_STATE, tags)
            network = view.state(net_key)
            if network is not None:
                writes.put(net_key, ipam.release_epg_pool(state, network))
            writes.delete(epg_key)
    refresh_policies(view, writes, tenant)


def on_netprofile(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    profile = new or old
    assert profile is not None
    for group in view.items("endpointGroup"):
        if group["tenantName"] == profile["tenantName"] and group.get("netProfile") == profile["profileName"]:
            key = layout.epg_state(group["tenantName"], group["groupName"])
            state = view.state(key)
            if state is not None:
                state.update(_profile_fields(view, group))
                writes.put(key, state)


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
        state = view.state(layout.epg_state(tenant, group["groupName"]))
        if state is not None:
            group_ids[f"{tenant}:{group['groupName']}"] = state["endpointGroupId"]
    subnets = {f"{n['tenantName']}:{n['networkName']}": n["subnet"] for n in view.items("network") if n["tenantName"] == tenant}
    remotes = Remotes(group_ids=group_ids, subnets=subnets)
    rules = [r for r in view.items("rule") if r["tenantName"] == tenant]
    desired: dict[str, Any] = {}
    for group in groups if enforce else []:
        group_key = f"{tenant}:{group['groupName']}"
        if group_key not in group_ids:
            continue
        for policy in group.get("policies", []):
            attachment = Attachment(group_key, group_ids[group_key], f"{tenant}:{policy}")
            compiled = compile_attachment(attachment, rules, remotes)
            rule_maps: dict[str, Any] = {}
            for rule in rules:
                if rule["policyName"] != policy:
                    continue
                own = {c.rule_id: c.to_json() for c in compiled if c.rule_id.startswith(f"{attachment.key}:{rule['key']}:")}
                rule_maps[rule["key"]] = {"Rule": dict(rule), "OfnetRules": own}
            desired[f"{layout.POLICY_PREFIX}{attachment.key}"] = {
                "id": attachment.key,
                "EpgPolicyKey": attachment.key,
                "EndpointGroupID": attachment.group_id,
                "RuleMaps": rule_maps,
            }
            for c in compiled:
                desired[f"{layout.POLICY_RULE_PREFIX}{c.rule_id}"] = policy_rule_to_json(c)
    existing = view.owned_policy_states(tenant)
    for key in existing:
        if key not in desired:
            writes.delete(key)
    for key, value in desired.items():
        if existing.get(key) != value:
            writes.put(key, value)


def on_service_lb(view: View, writes: Writes, old: Obj | None, new: Obj | None) -> None:
    service = new or old
    assert service is not None
    tenant, name = service["tenantName"], service["serviceName"]
    vip = (view.state(f"{layout.SERVICE_LB_PREFIX}{name}:{tenant}") or {}).get("ipaddress", "")
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

"""netctl's JSON field order: the Go structs netctl decodes an answer into and prints again.

netctl prints `inspect`, `ls --json` and `info --json` with Go's `json.MarshalIndent` of
contivmodel's client structs (contivmodel/client/contivModelClient.go in contiv/netplugin), so
the keys come out in each struct's declaration order (`key` first, then the fields sorted as
contivmodel generates them, then `link-sets` and `links`), and a `map[string]Link` with its keys
sorted. STRUCTS copies those declarations as data; `ordered` puts a decoded answer in that
order. Fields the struct does not declare (contivd's own additions) follow the declared ones in
the server's order, where netctl would have dropped them: ctl shows everything it was sent.

A type is written as in Go: `Name` a struct, `[]Name` a list of them, `{}Name` a map with
string keys; a bare field name is a scalar, a string list or anything else printed as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Field = str | tuple[str, str]
"""A JSON member: its name alone (printed as it is), or (name, type) for a nested struct."""

STRUCTS: Mapping[str, tuple[Field, ...]] = {
    "Link": ("type", "key"),
    "AciGw": ("key", "enforcePolicies", "includeCommonTenant", "name", "nodeBindings", "pathBindings", "physicalDomain"),
    "AciGwOper": ("numAppProfiles",),
    "AciGwInspect": (("Config", "AciGw"), ("Oper", "AciGwOper")),
    "AppProfile": (
        "key", "appProfileName", "endpointGroups", "tenantName", ("link-sets", "AppProfileLinkSets"), ("links", "AppProfileLinks"),
    ),
    "AppProfileLinkSets": (("EndpointGroups", "{}Link"),),
    "AppProfileLinks": (("Tenant", "Link"),),
    "AppProfileInspect": (("Config", "AppProfile"),),
    "Bgp": ("key", "as", "hostname", "neighbor", "neighbor-as", "routerip"),
    "BgpOper": ("adminStatus", "neighborStatus", "numRoutes", "routes"),
    "BgpInspect": (("Config", "Bgp"), ("Oper", "BgpOper")),
    "EndpointOper": (
        "containerID", "containerName", "endpointGroupId", "endpointGroupKey", "endpointID", "homingHost", "intfName", "ipAddress",
        "labels", "macAddress", "network", "serviceName", "virtualPort", "vtepIP",
    ),
    "EndpointInspect": (("Oper", "EndpointOper"),),
    "EndpointGroup": (
        "key", "cfgdTag", "extContractsGrps", "groupName", "ipPool", "netProfile", "networkName", "policies", "tenantName",
        ("link-sets", "EndpointGroupLinkSets"), ("links", "EndpointGroupLinks"),
    ),
    "EndpointGroupLinkSets": (("ExtContractsGrps", "{}Link"), ("MatchRules", "{}Link"), ("Policies", "{}Link"), ("Services", "{}Link")),
    "EndpointGroupLinks": (("AppProfile", "Link"), ("NetProfile", "Link"), ("Network", "Link"), ("Tenant", "Link")),
    "EndpointGroupOper": (
        "allocatedIPAddresses", "availableIPAddresses", ("endpoints", "[]EndpointOper"), "externalPktTag", "groupTag", "numEndpoints",
        "pktTag",
    ),
    "EndpointGroupInspect": (("Config", "EndpointGroup"), ("Oper", "EndpointGroupOper")),
    "ExtContractsGroup": (
        "key", "contracts", "contractsGroupName", "contractsType", "tenantName", ("link-sets", "ExtContractsGroupLinkSets"),
    ),
    "ExtContractsGroupLinkSets": (("EndpointGroups", "{}Link"),),
    "ExtContractsGroupInspect": (("Config", "ExtContractsGroup"),),
    "Global": ("key", "arpMode", "fwdMode", "name", "networkInfraType", "pvtSubnet", "vlans", "vxlans"),
    "GlobalOper": ("clusterMode", "defaultNetwork", "freeVXLANsStart", "numNetworks", "vlansInUse", "vxlansInUse"),
    "GlobalInspect": (("Config", "Global"), ("Oper", "GlobalOper")),
    "Netprofile": (
        "key", "DSCP", "bandwidth", "burst", "profileName", "tenantName", ("link-sets", "NetprofileLinkSets"),
        ("links", "NetprofileLinks"),
    ),
    "NetprofileLinkSets": (("EndpointGroups", "{}Link"),),
    "NetprofileLinks": (("Tenant", "Link"),),
    "NetprofileInspect": (("Config", "Netprofile"),),
    "Network": (
        "key", "cfgdTag", "encap", "gateway", "ipv6Gateway", "ipv6Subnet", "networkName", "nwType", "pktTag", "subnet", "tenantName",
        ("link-sets", "NetworkLinkSets"), ("links", "NetworkLinks"),
    ),
    "NetworkLinkSets": (("EndpointGroups", "{}Link"), ("Servicelbs", "{}Link"), ("Services", "{}Link")),
    "NetworkLinks": (("Tenant", "Link"),),
    "NetworkOper": (
        "allocatedAddressesCount", "allocatedIPAddresses", "availableIPAddresses", ("endpoints", "[]EndpointOper"), "externalPktTag",
        "networkTag", "numEndpoints", "pktTag",
    ),
    "NetworkInspect": (("Config", "Network"), ("Oper", "NetworkOper")),
    "Policy": ("key", "policyName", "tenantName", ("link-sets", "PolicyLinkSets"), ("links", "PolicyLinks")),
    "PolicyLinkSets": (("EndpointGroups", "{}Link"), ("Rules", "{}Link")),
    "PolicyLinks": (("Tenant", "Link"),),
    "PolicyOper": (("endpoints", "[]EndpointOper"), "numEndpoints", "policyViolations"),
    "PolicyInspect": (("Config", "Policy"), ("Oper", "PolicyOper")),
    "Rule": (
        "key", "action", "direction", "fromEndpointGroup", "fromIpAddress", "fromNetwork", "policyName", "port", "priority", "protocol",
        "ruleId", "tenantName", "toEndpointGroup", "toIpAddress", "toNetwork", ("link-sets", "RuleLinkSets"), ("links", "RuleLinks"),
    ),
    "RuleLinkSets": (("Policies", "{}Link"),),
    "RuleLinks": (("MatchEndpointGroup", "Link"),),
    "RuleInspect": (("Config", "Rule"),),
    "ServiceLB": ("key", "ipAddress", "networkName", "ports", "selectors", "serviceName", "tenantName", ("links", "ServiceLBLinks")),
    "ServiceLBLinks": (("Network", "Link"), ("Tenant", "Link")),
    "ServiceLBOper": ("numProviders", ("providers", "[]EndpointOper"), "serviceVip"),
    "ServiceLBInspect": (("Config", "ServiceLB"), ("Oper", "ServiceLBOper")),
    "Tenant": ("key", "defaultNetwork", "tenantName", ("link-sets", "TenantLinkSets")),
    "TenantLinkSets": (
        ("AppProfiles", "{}Link"), ("EndpointGroups", "{}Link"), ("NetProfiles", "{}Link"), ("Networks", "{}Link"), ("Policies", "{}Link"),
        ("Servicelbs", "{}Link"), ("VolumeProfiles", "{}Link"), ("Volumes", "{}Link"),
    ),
    "TenantOper": (
        ("endpointGroups", "[]EndpointGroupOper"), ("endpoints", "[]EndpointOper"), ("networks", "[]NetworkOper"),
        ("policies", "[]PolicyOper"), ("servicelbs", "[]ServiceLBOper"), "totalAppProfiles", "totalEPGs", "totalEndpoints",
        "totalNetprofiles", "totalNetworks", "totalPolicies", "totalServicelbs",
    ),
    "TenantInspect": (("Config", "Tenant"), ("Oper", "TenantOper")),
}  # fmt: skip
"""contivModelClient.go's structs, by Go name, each as its JSON members in declaration order."""


def ordered(value: Any, kind: str | None) -> Any:
    """`value` with every object's members in netctl's order for Go type `kind` (None: as is).

    A value that is not what the type expects (a list where a struct belongs) is left as it is,
    since netctl never prints it anyway: ctl's answer is then the server's.
    """
    if kind is None:
        return value
    if kind.startswith("[]"):
        return [ordered(item, kind[2:]) for item in value] if isinstance(value, list) else value
    if not isinstance(value, Mapping):
        return value
    if kind.startswith("{}"):
        return {name: ordered(value[name], kind[2:]) for name in sorted(value)}
    declared = [(field, None) if isinstance(field, str) else field for field in STRUCTS[kind]]
    known = {name: ordered(value[name], nested) for name, nested in declared if name in value}
    return {**known, **{name: member for name, member in value.items() if name not in known}}

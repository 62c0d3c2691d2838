"""Contiv's error texts, one table: case → the exact first line Contiv's netmaster answered.

Clients on Contiv's contract (no `Accept: application/json`: the original netctl, curl scripts;
contiv-api.md Decision 1) get this line first, then contivd's own detail. Read from Contiv's
`netmaster/objApi/apiController.go`, `netmaster/master/*.go`, `utils/netutils` and the generated
`ValidateX`/`GetX` code of `contivmodel/contivModel.go`; Go's `%s`/`%d` are `{named}` fields here,
and odd spacing and spelling ("Cant", "maping", a trailing blank) are Contiv's, kept on purpose.
Each entry is exercised against a real node by tests/control/test_contiv_errors.py.
"""

from __future__ import annotations

from collections.abc import Mapping

CONTIV_MESSAGES: Mapping[str, str] = {
    # generated code (contivModel.go): lookups, key check, field checks, unregistered types
    "object-not-found": "{kind} not found",
    "invalid-key": "Invalid Key",
    "string-too-long": "{field} string too long",
    "string-invalid-format": "{field} string invalid format",
    "value-out-of-bound": "{field} Value Out of bound",
    "unsupported-type": "Invalid object type",
    "endpoint-not-found": "endpoint not found",
    # references named on create (apiController.go, per object type)
    "tenant-missing": "Tenant not found",
    "tenant-missing-named": "Tenant {name} not found",
    "network-missing-named": "Network {name} not found",
    "group-missing-key": "EndpointGroup {key} not found",
    "policy-missing": "Policy not found",
    "netprofile-missing": "netprofile not found",
    "contracts-missing": "External contracts group {name} not found",
    "rule-group-missing": "endpoint group not found",
    "rule-from-network-missing": "from Network not found",
    "rule-to-network-missing": "to Network not found",
    # network and group create
    "global-not-ready": "Global configuration is not ready: {reason}",
    "subnet-overlap": "network {other} conflicts with subnet {subnet}",
    "subnet6-overlap": "network {other} conflicts with subnetv6  {subnet}",
    "network-name-clash": "EndpointGroup {name} conflicts with the network name",
    "group-name-clash": "Network {name} conflicts with the endpointGroup name",
    "tag-unavailable": "requested {encap} not available - {encap}:{tag}",
    "vxlan-unavailable": "requested vxlan not available",
    "aci-needs-vlan": "network type must be VLAN for ACI mode",
    "bad-ip-pool": "bad ip-pool {pool}, EPG ip-pool must be a subset of network {subnet}",
    "address-unavailable": "ip address {address} is not available",
    # updates Contiv refuses
    "tenant-frozen": "Cant change tenant parameters after its created",
    "network-frozen": "Cant change network parameters after its created",
    "rule-frozen": "can not update a rule after its created",
    "contracts-frozen": "external contracts update not supported",
    "group-network-fixed": "Cannot change network association after epg is created.",
    "group-pool-fixed": "Cannot change IP pool after epg is created.",
    "global-networks-exist": "Unable to update {option} due to existing {counts}",
    "global-bgp-exists": "please delete existing Bgp configs",
    "global-range-in-use": "cannot update the {space} range due to existing {space}s {tags}",
    # deletes refused while in use
    "tenant-has-app-profiles": "cannot delete {name}, has {count} app profiles",
    "tenant-has-groups": "cannot delete {name} has {count} endpoint groups",
    "tenant-has-policies": "cannot delete {name} has {count} policies",
    "tenant-has-netprofiles": "Cannot delete {name} has {count} netprofiles",
    "tenant-has-networks": "cannot delete {name} has {count} networks",
    "network-has-groups": "cannot delete {name} has {count} endpoint groups",
    "network-has-services": "cannot delete {name} has {count} services ",
    "network-has-endpoints": "Error: Network has active endpoints",
    "group-has-endpoints": "Error: EPG {name} has active endpoints",
    "group-in-app-profile": "Cannot delete {name}, associated to appProfile {sources}",
    "policy-in-use": "Policy is being used",
    "netprofile-in-use": "NetProfile is being used",
    "contracts-in-use": "External contracts group is in-use",
    "aci-gw-has-app-profiles": "{count} App-Profiles found. Delete them first",
    # body checks done by the callbacks
    "service-ports": "Invalid Port maping . Port format is - Port:TargetPort:Protocol",
    "service-selectors": "Invalid selector options",
    "service-selector": "Invalid selector {selector}. selector format is key1=value1",
    "netprofile-burst": "Invalid Burst size. burst size > 1500 bytes",
    "rule-to-in-incoming": "can not specify 'to' parameters in incoming rule",
    "rule-from-network-and-ip": "can not specify both from network and from ip address",
    "rule-from-network-and-group": "can not specify both from network and from EndpointGroup",
    "rule-from-in-outgoing": "can not specify 'from' parameters in outgoing rule",
    "rule-to-network-and-ip": "can not specify both to-network and to-ip address",
    "rule-to-network-and-group": "can not specify both to-network and to-EndpointGroup",
    "rule-to-ip-groups": "failed to configure {address}, {count} endpoint groups linked to policy {policy} ",
    "rule-to-ip-not-in-group": "failed to configure {address}, ip address is not in epg {group}",
    "bgp-aci": "not supported in ACI fabric mode",
    # address allocation (netutils, master/network.go)
    "address-exhaustion-subnet": "auto allocation failed - address exhaustion in subnet {subnet}",
    "address-exhaustion-pool": "auto allocation failed - address exhaustion in pool {pool}",
    "ipv6-exhaustion": "Reached MaxHosts ({count}). Cannot allocate more hosts",
}


def contiv_line(case: str, **values: object) -> str:
    """Contiv's text for `case` with its fields filled in (KeyError: a case not in the table)."""
    return CONTIV_MESSAGES[case].format(**values)

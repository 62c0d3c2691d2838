"""check_create / check_update / check_delete against a fake stored world (§1, §10, §16)."""

from __future__ import annotations

from typing import Any

import pytest

from contivd.model import (
    ConflictError,
    NotFoundError,
    ValidationError,
    check_create,
    check_delete,
    check_update,
    kind_for,
)

from .conftest import FakeLookup, make


def create(world: FakeLookup, collection: str, **body: Any) -> None:
    obj = make(collection, **body)
    check_create(kind_for(collection), obj, world)


NET2 = {"tenantName": "default", "networkName": "net2", "encap": "vlan", "subnet": "198.18.201.0/24"}

# --- network ----------------------------------------------------------------------------------


def test_network_needs_a_ready_global(world: FakeLookup) -> None:
    del world.objects["global"]
    with pytest.raises(ConflictError, match=r"^Global configuration is not ready"):
        create(world, "networks", **NET2)
    world.add("globals", name="global", vlans="1-4094", vxlans="1-10000", pvtSubnet="198.19.0.0/16")
    with pytest.raises(ConflictError, match="fwdMode is not set"):
        create(world, "networks", **NET2)


def test_network_needs_its_tenant(world: FakeLookup) -> None:
    with pytest.raises(NotFoundError, match=r"^Tenant not found: blue"):
        create(world, "networks", **{**NET2, "tenantName": "blue"})


@pytest.mark.parametrize("subnet", ["198.18.1.128/25", "198.18.0.0/17", "198.18.1.5-198.18.1.15/24"])
def test_network_subnets_may_not_overlap_within_a_tenant(world: FakeLookup, subnet: str) -> None:
    with pytest.raises(ConflictError, match=r"^network net2 conflicts with subnet 198.18.1.0/24 of network default:net1"):
        create(world, "networks", **{**NET2, "subnet": subnet})


def test_network_overlap_rules(world: FakeLookup) -> None:
    world.add("tenants", tenantName="blue")
    create(world, "networks", **{**NET2, "tenantName": "blue", "subnet": "198.18.1.0/24"})  # other tenant: fine
    world.add("networks", tenantName="blue", networkName="r1", encap="vlan", subnet="198.18.209.1-198.18.209.100/24", ipv6Subnet="2001::/100")
    create(world, "networks", **{**NET2, "tenantName": "blue", "subnet": "198.18.209.101-198.18.209.200/24"})
    with pytest.raises(ConflictError, match="conflicts with subnetv6 2001::/100"):
        create(world, "networks", **{**NET2, "tenantName": "blue", "ipv6Subnet": "2001::80/121"})


def test_network_and_group_names_clash(world: FakeLookup) -> None:
    with pytest.raises(ConflictError, match=r"^EndpointGroup default:web conflicts with the network name"):
        create(world, "networks", **{**NET2, "networkName": "web"})
    with pytest.raises(ConflictError, match=r"^Network default:net1 conflicts with the endpointGroup name"):
        create(world, "endpointGroups", tenantName="default", groupName="net1", networkName="net1")


def test_requested_tags_follow_the_global_ranges(world: FakeLookup) -> None:
    """TestNetworkPktRanges: with vlans 100-1000 and vxlans 1001-2000."""
    world.add("globals", name="global", fwdMode="bridge", vlans="100-1000", vxlans="1001-2000", pvtSubnet="198.19.0.0/16")
    world.tags["vlan"].add(200)
    world.tags["vxlan"].add(1500)
    create(world, "networks", **{**NET2, "pktTag": 100})
    create(world, "networks", **{**NET2, "encap": "vxlan", "pktTag": 2000})
    create(world, "networks", **NET2)  # 0 = allocate
    for encap, tag, problem in [
        ("vlan", 1001, "requested vlan is out of range - vlan:1001"),
        ("vlan", 99, "requested vlan is out of range - vlan:99"),
        ("vlan", 200, "requested vlan not available - vlan:200"),
        ("vxlan", 2001, "requested vxlan is out of range - vxlan:2001"),
        ("vxlan", 1000, "requested vxlan is out of range - vxlan:1000"),
        ("vxlan", 1500, "requested vxlan not available - vxlan:1500"),
    ]:
        with pytest.raises(ConflictError, match=rf"^{problem}"):
            create(world, "networks", **{**NET2, "encap": encap, "pktTag": tag})


# --- endpointGroup ----------------------------------------------------------------------------

EPG = {"tenantName": "default", "groupName": "app", "networkName": "net1"}


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"networkName": "nope"}, "^Network nope not found"),
        ({"policies": ["p9"]}, "^Policy not found: default:p9"),
        ({"netProfile": "gold"}, "^netprofile not found: default:gold"),
        ({"extContractsGrps": ["ext"]}, "^External contracts group default:ext not found"),
        ({"tenantName": "blue"}, "^Tenant not found: blue"),
    ],
)
def test_group_references_must_exist(world: FakeLookup, overrides: dict[str, Any], problem: str) -> None:
    with pytest.raises(NotFoundError, match=problem):
        create(world, "endpointGroups", **{**EPG, **overrides})


def test_group_with_existing_references(world: FakeLookup) -> None:
    world.add("policys", tenantName="default", policyName="p1")
    world.add("netprofiles", tenantName="default", profileName="gold", bandwidth="10Mbps")
    world.add("extContractsGroups", tenantName="default", contractsGroupName="ext", contractsType="provided")
    create(world, "endpointGroups", **EPG, policies=["p1"], netProfile="gold", extContractsGrps=["ext"])


@pytest.mark.parametrize(
    ("pool", "error", "problem"),
    [
        ("198.18.1.0-198.18.1.20", ValidationError, "^bad ip-pool 198.18.1.0-198.18.1.20, EPG ip-pool must be a subset"),
        ("198.18.1.200-198.18.1.255", ValidationError, "subset of network 198.18.1.0/24 hosts 198.18.1.1-198.18.1.254"),
        ("198.18.2.0-198.18.2.20", ValidationError, "^bad ip-pool"),
        ("198.18.1.250-198.18.1.254", ConflictError, "^ip address 198.18.1.254 is not available: .* gateway"),
        ("198.18.1.15-198.18.1.30", ConflictError, "^ip address 198.18.1.15 is not available: .* default:pool1"),
        ("198.18.1.20", ConflictError, "^ip address 198.18.1.20 is not available"),
    ],
)
def test_group_ip_pools(world: FakeLookup, pool: str, error: type[Exception], problem: str) -> None:
    """TestEndpointGroupIPPoolCreateDelete: pools inside the hosts, clear of gateway and other pools."""
    world.add("endpointGroups", tenantName="default", groupName="pool1", networkName="net1", ipPool="198.18.1.10-198.18.1.20")
    with pytest.raises(error, match=problem) as caught:
        create(world, "endpointGroups", **EPG, ipPool=pool)
    if isinstance(caught.value, ValidationError):
        assert caught.value.field == "ipPool"


def test_group_pools_are_per_network(world: FakeLookup) -> None:
    world.add("endpointGroups", tenantName="default", groupName="pool1", networkName="net1", ipPool="198.18.1.10-198.18.1.20")
    world.add("networks", **NET2)
    create(world, "endpointGroups", **EPG, ipPool="198.18.1.21-198.18.1.40")
    create(world, "endpointGroups", **{**EPG, "networkName": "net2"}, ipPool="198.18.201.10-198.18.201.20")


def test_aci_mode_groups_need_vlan_networks(world: FakeLookup) -> None:
    world.add("globals", name="global", fwdMode="bridge", networkInfraType="aci", vlans="1-4094", vxlans="1-10000", pvtSubnet="198.19.0.0/16")
    with pytest.raises(ConflictError, match=r"^network type must be VLAN for ACI mode"):
        create(world, "endpointGroups", **EPG)
    with pytest.raises(ConflictError, match=r"^not supported in ACI fabric mode"):
        create(world, "Bgps", hostname="node1", routerip="198.19.50.1/24")


# --- rule, serviceLB, appProfile ----------------------------------------------------------------

RULE = {"tenantName": "default", "policyName": "p1", "ruleId": "1", "direction": "in", "action": "allow"}


def test_rule_references(world: FakeLookup) -> None:
    with pytest.raises(NotFoundError, match=r"^Policy not found: default:p1"):
        create(world, "rules", **RULE)
    world.add("policys", tenantName="default", policyName="p1")
    with pytest.raises(NotFoundError, match=r"^endpoint group not found: default:db"):
        create(world, "rules", **RULE, fromEndpointGroup="db")
    with pytest.raises(NotFoundError, match=r"^from Network not found: default:dummy"):
        create(world, "rules", **RULE, fromNetwork="dummy")
    with pytest.raises(NotFoundError, match=r"^to Network not found: default:dummy"):
        create(world, "rules", **{**RULE, "direction": "out"}, toNetwork="dummy")
    create(world, "rules", **RULE, fromEndpointGroup="web", protocol="tcp", port=80)


def test_incoming_rule_with_a_to_address_targets_an_endpoint_of_the_one_group(world: FakeLookup) -> None:
    world.add("policys", tenantName="default", policyName="p1")
    with pytest.raises(ConflictError, match=r"^failed to configure 198.18.1.5, 0 endpoint groups linked to policy p1"):
        create(world, "rules", **RULE, toIpAddress="198.18.1.5")
    world.add("endpointGroups", tenantName="default", groupName="web", networkName="net1", policies=["p1"])
    with pytest.raises(ConflictError, match=r"^failed to configure 198.18.1.5, ip address is not in epg default:web"):
        create(world, "rules", **RULE, toIpAddress="198.18.1.5")
    world.endpoints["endpointGroup", "default:web"] = ["198.18.1.5"]
    create(world, "rules", **RULE, toIpAddress="198.18.1.5")


def test_service_references_and_vip(world: FakeLookup) -> None:
    service = {"tenantName": "default", "serviceName": "svc", "networkName": "net1", "selectors": ["app=web"], "ports": ["80:8080:TCP"]}
    with pytest.raises(NotFoundError, match=r"^Network svcnet not found"):
        create(world, "serviceLBs", **{**service, "networkName": "svcnet"})
    with pytest.raises(ValidationError, match=r"^ipAddress 198.18.2.3 is not a host address of network default:net1"):
        create(world, "serviceLBs", **service, ipAddress="198.18.2.3")
    create(world, "serviceLBs", **service, ipAddress="198.18.1.3")
    create(world, "serviceLBs", **service)  # the VIP is allocated later


def test_app_profile_groups(world: FakeLookup) -> None:
    profile = {"tenantName": "default", "appProfileName": "app1", "endpointGroups": ["web"]}
    with pytest.raises(NotFoundError, match=r"^EndpointGroup default:db not found"):
        create(world, "appProfiles", **{**profile, "endpointGroups": ["web", "db"]})
    world.add("appProfiles", **profile)
    with pytest.raises(ConflictError, match=r"^endpointGroup default:web already belongs to appProfile default:app1"):
        create(world, "appProfiles", **{**profile, "appProfileName": "app2"})
    # the profile itself may be re-posted with the same groups
    check_update("appProfile", make("appProfiles", **profile), make("appProfiles", **profile), world)


# --- update -----------------------------------------------------------------------------------


def test_identical_repost_is_a_no_op(world: FakeLookup) -> None:
    network = world.get("network", "default:net1")
    assert network is not None
    assert check_update("network", network, dict(network), world) is network


@pytest.mark.parametrize(
    ("collection", "old", "changes", "problem"),
    [
        (
            "tenants",
            {"tenantName": "blue"},
            {"defaultNetwork": "net1"},
            "^Cant change tenant parameters after its created: tenant blue would change defaultNetwork",
        ),
        ("networks", {**NET2}, {"gateway": "198.18.201.1"}, "^Cant change network parameters after its created: .* gateway"),
        ("rules", {**RULE}, {"action": "deny"}, "^can not update a rule after its created: .* action"),
        (
            "extContractsGroups",
            {"tenantName": "default", "contractsGroupName": "e", "contractsType": "provided"},
            {"contractsType": "consumed"},
            "^external contracts update not supported",
        ),
        ("endpointGroups", {**EPG}, {"networkName": "net2"}, r"^Cannot change network association after epg is created\."),
        ("endpointGroups", {**EPG}, {"ipPool": "198.18.1.10-198.18.1.20"}, r"^Cannot change IP pool after epg is created\."),
    ],
)
def test_refused_updates(world: FakeLookup, collection: str, old: dict[str, Any], changes: dict[str, Any], problem: str) -> None:
    before, after = make(collection, **old), make(collection, **{**old, **changes})
    with pytest.raises(ConflictError, match=problem):
        check_update(kind_for(collection), before, after, world)


def test_group_updates(world: FakeLookup) -> None:
    web = world.get("endpointGroup", "default:web")
    assert web is not None
    tagged = make("endpointGroups", **EPG | {"groupName": "web", "cfgdTag": "new.tag"})
    assert check_update("endpointGroup", web, tagged, world) is web  # cfgdTag changes are ignored
    with pytest.raises(NotFoundError, match=r"^Policy not found: default:p1"):
        check_update("endpointGroup", web, {**web, "policies": ["p1"]}, world)
    world.add("policys", tenantName="default", policyName="p1")
    assert check_update("endpointGroup", web, {**web, "policies": ["p1"]}, world)["policies"] == ["p1"]


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"fwdMode": "routing"}, "^Unable to update forwarding mode due to existing 1 vlans and 2 vxlans"),
        ({"pvtSubnet": "198.18.0.0/16"}, "^Unable to update private subnet due to existing 1 vlans and 2 vxlans"),
        ({"vlans": "100-4094"}, "^cannot update the vlan range due to existing vlans 10"),
        ({"vxlans": "2-10000"}, "^cannot update the vxlan range due to existing vxlans 1"),
    ],
)
def test_global_updates_with_networks(world: FakeLookup, changes: dict[str, str], problem: str) -> None:
    """TestGlobalSettingFwdMode / TestDynamicGlobalVlanRange / TestDynamicGlobalVxlanRange."""
    world.tags["vlan"] |= {10}
    world.tags["vxlan"] |= {1, 2}
    old = world.get("global", "global")
    assert old is not None
    with pytest.raises(ConflictError, match=problem):
        check_update("global", old, {**old, **changes}, world)


def test_global_updates_allowed(world: FakeLookup) -> None:
    world.tags["vlan"] |= {10, 11, 12}
    old = world.get("global", "global")
    assert old is not None
    for changes in ({"arpMode": "flood"}, {"networkInfraType": "aci"}, {"vlans": "10-12"}):
        assert check_update("global", old, {**old, **changes}, world) == {**old, **changes}
    world.tags["vlan"].clear()
    routing = {**old, "fwdMode": "routing"}
    assert check_update("global", old, routing, world) == routing
    world.add("Bgps", hostname="node1", routerip="198.19.50.1/24")
    with pytest.raises(ConflictError, match=r"^please delete existing Bgp configs"):
        check_update("global", routing, old, world)


# --- delete -----------------------------------------------------------------------------------


def test_delete_missing(world: FakeLookup) -> None:
    with pytest.raises(NotFoundError, match=r"^network not found: default:nope"):
        check_delete("network", "default:nope", world)


def test_tenant_delete_order(world: FakeLookup) -> None:
    """TestTenantDelete: app profiles, then groups, then policies, netprofiles, services, networks."""
    world.add("appProfiles", tenantName="default", appProfileName="app", endpointGroups=["web"])
    world.add("policys", tenantName="default", policyName="p1")
    world.add("netprofiles", tenantName="default", profileName="gold")
    world.add("serviceLBs", tenantName="default", serviceName="svc", networkName="net1", selectors=["a=b"], ports=["80:8080:TCP"])
    steps = [
        ("appProfile", "default:app", "cannot delete default, has 1 app profiles"),
        ("endpointGroup", "default:web", "cannot delete default has 1 endpoint groups"),
        ("policy", "default:p1", "cannot delete default has 1 policies"),
        ("netprofile", "default:gold", "Cannot delete default has 1 netprofiles"),
        ("serviceLB", "default:svc", "cannot delete default has 1 services"),
        ("network", "default:net1", "cannot delete default has 1 networks"),
    ]
    for kind, key, problem in steps:
        with pytest.raises(ConflictError, match=rf"^{problem}$"):
            check_delete("tenant", "default", world)
        del world.objects[kind][key]
    assert check_delete("tenant", "default", world) == ()


def test_unused_objects_delete(world: FakeLookup) -> None:
    assert check_delete("endpointGroup", "default:web", world) == ()
    del world.objects["endpointGroup"]["default:web"]
    assert check_delete("network", "default:net1", world) == ()
    create(world, "Bgps", hostname="node1", routerip="198.19.50.1/24")


def test_network_delete(world: FakeLookup) -> None:
    with pytest.raises(ConflictError, match=r"^cannot delete default:net1 has 1 endpoint groups"):
        check_delete("network", "default:net1", world)
    del world.objects["endpointGroup"]["default:web"]
    world.endpoints["network", "default:net1"] = ["198.18.1.1"]
    with pytest.raises(ConflictError, match=r"^Error: Network default:net1 has active endpoints"):
        check_delete("network", "default:net1", world)
    world.add("networks", tenantName="default", networkName="infra1", nwType="infra", encap="vlan", subnet="198.18.99.0/24")
    world.endpoints["network", "default:infra1"] = ["198.18.99.1"]
    assert check_delete("network", "default:infra1", world) == ()


def test_group_delete(world: FakeLookup) -> None:
    world.add("appProfiles", tenantName="default", appProfileName="app", endpointGroups=["web"])
    with pytest.raises(ConflictError, match=r"^Cannot delete default:web, associated to appProfile default:app"):
        check_delete("endpointGroup", "default:web", world)
    del world.objects["appProfile"]["default:app"]
    world.endpoints["endpointGroup", "default:web"] = ["198.18.1.1", "198.18.1.2"]
    with pytest.raises(ConflictError, match=r"^Error: EPG default:web has active endpoints \(2\)"):
        check_delete("endpointGroup", "default:web", world)


def test_policy_delete_takes_its_rules(world: FakeLookup) -> None:
    world.add("policys", tenantName="default", policyName="p1")
    world.add("policys", tenantName="default", policyName="p2")
    for rule_id in ("2", "1"):
        world.add("rules", **{**RULE, "ruleId": rule_id})
    world.add("rules", **{**RULE, "policyName": "p2"})
    assert check_delete("policy", "default:p1", world) == (("rule", "default:p1:1"), ("rule", "default:p1:2"))
    world.add("endpointGroups", tenantName="default", groupName="web", networkName="net1", policies=["p1"])
    with pytest.raises(ConflictError, match=r"^Policy is being used by endpoint groups default:web"):
        check_delete("policy", "default:p1", world)


@pytest.mark.parametrize(
    ("collection", "body", "group_fields", "problem"),
    [
        (
            "netprofiles",
            {"tenantName": "default", "profileName": "gold"},
            {"netProfile": "gold"},
            r"^NetProfile is being used by endpoint groups default:app",
        ),
        (
            "extContractsGroups",
            {"tenantName": "default", "contractsGroupName": "ext", "contractsType": "provided"},
            {"extContractsGrps": ["ext"]},
            r"^External contracts group is in-use by endpoint groups default:app",
        ),
    ],
)
def test_in_use_by_groups(world: FakeLookup, collection: str, body: dict[str, Any], group_fields: dict[str, Any], problem: str) -> None:
    target = world.add(collection, **body)
    world.add("endpointGroups", **EPG, **group_fields)
    with pytest.raises(ConflictError, match=problem):
        check_delete(kind_for(collection), target["key"], world)


def test_singletons_delete(world: FakeLookup) -> None:
    with pytest.raises(ConflictError, match=r"^cannot delete global, has 1 networks"):
        check_delete("global", "global", world)
    world.add("aciGws", name="aciGw", enforcePolicies="yes", includeCommonTenant="no", physicalDomain="dom")
    assert check_delete("aciGw", "aciGw", world) == ()
    world.add("appProfiles", tenantName="default", appProfileName="app", endpointGroups=["web"])
    with pytest.raises(ConflictError, match=r"^1 App-Profiles found. Delete them first"):
        check_delete("aciGw", "aciGw", world)


def test_rules_and_services_block_nothing_services_block_their_network(world: FakeLookup) -> None:
    world.add("policys", tenantName="default", policyName="p1")
    world.add("rules", **RULE, fromEndpointGroup="web")
    world.add("serviceLBs", tenantName="default", serviceName="svc", networkName="net1", selectors=["a=b"], ports=["80:8080:TCP"])
    assert check_delete("rule", "default:p1:1", world) == ()
    assert check_delete("serviceLB", "default:svc", world) == ()
    del world.objects["endpointGroup"]["default:web"]
    with pytest.raises(ConflictError, match=r"^cannot delete default:net1 has 1 services"):
        check_delete("network", "default:net1", world)

"""`validate`: one test per invalid case (type and field named), valid bodies as Contiv returns them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contivd.model import SPECS, NotFoundError, ValidationError, kind_for, render, validate

from .conftest import GLOBAL, FakeLookup, make

DROP = object()
"""Override value that removes the field from the body."""

VALID: dict[str, dict[str, Any]] = {
    "tenants": {"tenantName": "blue"},
    "networks": {
        "tenantName": "default",
        "networkName": "net1",
        "encap": "vxlan",
        "subnet": "198.18.1.0/24",
        "gateway": "198.18.1.254",
    },
    "endpointGroups": {"tenantName": "default", "groupName": "web", "networkName": "net1"},
    "policys": {"tenantName": "default", "policyName": "p1"},
    "rules": {"tenantName": "default", "policyName": "p1", "ruleId": "1", "direction": "in", "action": "allow"},
    "netprofiles": {"tenantName": "default", "profileName": "gold", "bandwidth": "10Mbps"},
    "serviceLBs": {
        "tenantName": "default",
        "serviceName": "svc",
        "networkName": "svcnet",
        "selectors": ["app=web"],
        "ports": ["80:8080:TCP"],
    },
    "extContractsGroups": {
        "tenantName": "default",
        "contractsGroupName": "ext",
        "contractsType": "consumed",
        "contracts": ["uni/tn-common/brc-default"],
    },
    "appProfiles": {"tenantName": "default", "appProfileName": "app", "endpointGroups": ["web"]},
    "Bgps": {
        "hostname": "node1",
        "routerip": "198.19.50.1/24",
        "as": "65002",
        "neighbor-as": "500",
        "neighbor": "198.19.50.2",
    },
    "globals": GLOBAL,
    "aciGws": {
        "name": "aciGw",
        "enforcePolicies": "yes",
        "includeCommonTenant": "no",
        "physicalDomain": "allocVlanDom",
        "pathBindings": "topology/pod-1/paths-101/pathep-[eth1/14],topology/pod-1/paths-102/pathep-[eth1/14]",
        "nodeBindings": "topology/pod-1/node-101",
    },
}


def case_id(value: object) -> str:
    return json.dumps(value, default=lambda _: "DROP")[:48]


def body_of(collection: str, **overrides: Any) -> dict[str, Any]:
    body = dict(VALID[collection])
    for name, value in overrides.items():
        if value is DROP:
            body.pop(name, None)
        else:
            body[name] = value
    return body


def submit(collection: str, **overrides: Any) -> dict[str, Any]:
    body = body_of(collection, **overrides)
    return validate(collection, body, SPECS[kind_for(collection)].key_of(body))


def test_every_collection_has_a_valid_example() -> None:
    assert set(VALID) == {spec.collection for spec in SPECS.values()}
    for collection in VALID:
        submit(collection)


def test_fields_are_declared_in_contivs_check_order() -> None:
    for spec in SPECS.values():
        names = [field.name for field in spec.fields]
        assert names == sorted(names), spec.kind
        assert all(field.bounds for field in spec.fields if field.type == "integer"), spec.kind


# --- invalid input: (collection, field expected in the error, body overrides) -----------------

LONG = "a" * 65
INVALID: list[tuple[str, str, dict[str, Any]]] = [
    # tenant names (TestTenantAddDelete)
    *[
        ("tenants", "tenantName", {"tenantName": name})
        for name in [
            "tenant:invalid",
            "ten|ant",
            "ten\\ant",
            "ten#ant",
            "-tenant",
            "ten@ant",
            "ten!ant",
            "ten~ant",
            "ten*ant",
            "ten^ant",
            "tenant-",
            "",
            LONG,
            "tenant\n",
        ]
    ],
    ("tenants", "defaultNetwork", {"defaultNetwork": "bad_name"}),
    # network (TestNetworkAddDelete)
    ("networks", "subnet", {"subnet": "198.18.1.0/32"}),
    ("networks", "subnet", {"subnet": "198.18.1.0/33"}),
    ("networks", "subnet", {"subnet": "198.18.1.0"}),
    ("networks", "subnet", {"subnet": "198.18.1.256/24"}),
    ("networks", "subnet", {"subnet": "198.18.0.0/4"}),
    ("networks", "subnet", {"subnet": "198.18.1.20-198.18.1.10/24"}),
    ("networks", "subnet", {"subnet": "198.18.1.5-198.18.2.5/24"}),
    ("networks", "subnet", {"subnet": DROP}),
    ("networks", "gateway", {"gateway": "198.18.2.1"}),
    ("networks", "gateway", {"gateway": "198.18.1.0"}),
    ("networks", "gateway", {"gateway": "198.18.1.255"}),
    ("networks", "gateway", {"gateway": "198.18.1"}),
    ("networks", "encap", {"encap": "vvvv"}),
    ("networks", "encap", {"encap": DROP}),
    ("networks", "nwType", {"nwType": "foo"}),
    ("networks", "pktTag", {"pktTag": 5000, "encap": "vlan"}),
    ("networks", "pktTag", {"pktTag": 20000000}),
    ("networks", "pktTag", {"pktTag": -1}),
    ("networks", "pktTag", {"pktTag": "5"}),
    ("networks", "pktTag", {"pktTag": True}),
    ("networks", "pktTag", {"pktTag": 5.0}),
    ("networks", "ipv6Subnet", {"ipv6Subnet": "2001::/128"}),
    ("networks", "ipv6Subnet", {"ipv6Subnet": "2001::/8"}),
    ("networks", "ipv6Subnet", {"ipv6Subnet": "zz::/64"}),
    ("networks", "ipv6Subnet", {"ipv6Subnet": "2001::"}),
    ("networks", "ipv6Gateway", {"ipv6Gateway": "2001::1"}),
    ("networks", "ipv6Gateway", {"ipv6Subnet": "2001::/100", "ipv6Gateway": "2002::1"}),
    ("networks", "ipv6Gateway", {"ipv6Subnet": "2001::/100", "ipv6Gateway": "2001:::1"}),
    ("networks", "networkName", {"networkName": LONG}),
    ("networks", "cfgdTag", {"cfgdTag": "bad_tag"}),
    # endpointGroup
    ("endpointGroups", "ipPool", {"ipPool": "198.18.1.20-198.18.1.10"}),
    ("endpointGroups", "ipPool", {"ipPool": "198.18.1.300"}),
    ("endpointGroups", "ipPool", {"ipPool": "2001::1-2001::5"}),
    ("endpointGroups", "ipPool", {"ipPool": "198.18.32.0/24"}),
    ("endpointGroups", "policies", {"policies": ["bad name"]}),
    ("endpointGroups", "policies", {"policies": "p1"}),
    ("endpointGroups", "policies", {"policies": [1]}),
    ("endpointGroups", "netProfile", {"netProfile": "a:b"}),
    ("endpointGroups", "extContractsGrps", {"extContractsGrps": ["a_b"]}),
    ("endpointGroups", "networkName", {"networkName": DROP}),
    # rule (TestPolicyRules)
    ("rules", "direction", {"direction": "both"}),
    ("rules", "direction", {"direction": "xyz"}),
    ("rules", "direction", {"direction": DROP}),
    ("rules", "action", {"action": "accept"}),
    ("rules", "action", {"action": DROP}),
    ("rules", "priority", {"priority": 101}),
    ("rules", "priority", {"priority": -1}),
    ("rules", "port", {"port": 65536}),
    ("rules", "protocol", {"protocol": "igmp"}),
    ("rules", "protocol", {"protocol": "256"}),
    ("rules", "protocol", {"protocol": "1234"}),
    ("rules", "fromIpAddress", {"fromIpAddress": "198.18.1.1-20"}),
    ("rules", "fromIpAddress", {"fromIpAddress": "198.18.1.0/32"}),
    ("rules", "fromIpAddress", {"fromIpAddress": "1.2.3"}),
    ("rules", "fromEndpointGroup", {"fromEndpointGroup": "a_b"}),
    ("rules", "toNetwork", {"toNetwork": "net1"}),
    ("rules", "toEndpointGroup", {"toEndpointGroup": "web"}),
    ("rules", "fromIpAddress", {"fromNetwork": "net1", "fromIpAddress": "198.18.1.1"}),
    ("rules", "fromEndpointGroup", {"fromNetwork": "net1", "fromEndpointGroup": "web"}),
    ("rules", "fromNetwork", {"direction": "out", "fromNetwork": "net1"}),
    ("rules", "fromEndpointGroup", {"direction": "out", "fromEndpointGroup": "web"}),
    ("rules", "fromIpAddress", {"direction": "out", "fromIpAddress": "198.18.1.1"}),
    ("rules", "toIpAddress", {"direction": "out", "toNetwork": "net1", "toIpAddress": "198.18.1.1"}),
    ("rules", "toEndpointGroup", {"direction": "out", "toNetwork": "net1", "toEndpointGroup": "web"}),
    # netprofile (TestNetprofile)
    *[
        ("netprofiles", "bandwidth", {"bandwidth": rate})
        for rate in ["invalid", "10 Gkms", "10 ms", "Gbps", "0 Gbps", " 10 Gbps", "10 1", "10  Gbps", "10GB"]
    ],
    ("netprofiles", "DSCP", {"DSCP": 64}),
    ("netprofiles", "DSCP", {"DSCP": -1}),
    ("netprofiles", "burst", {"burst": 10487}),
    ("netprofiles", "burst", {"burst": 1}),
    ("netprofiles", "profileName", {"profileName": ""}),
    ("netprofiles", "profileName", {"profileName": "a:b"}),
    ("netprofiles", "tenantName", {"tenantName": "bad_tenant"}),
    # serviceLB
    ("serviceLBs", "selectors", {"selectors": []}),
    ("serviceLBs", "selectors", {"selectors": DROP}),
    ("serviceLBs", "selectors", {"selectors": ["novalue"]}),
    ("serviceLBs", "selectors", {"selectors": ["a=b=c"]}),
    ("serviceLBs", "selectors", {"selectors": ["=v"]}),
    ("serviceLBs", "ports", {"ports": ["80:8080"]}),
    ("serviceLBs", "ports", {"ports": ["80:8080:TCP", "80"]}),
    ("serviceLBs", "ports", {"ports": ["80:8080:SCTP"]}),
    ("serviceLBs", "ports", {"ports": ["x:8080:TCP"]}),
    ("serviceLBs", "ports", {"ports": ["70000:80:TCP"]}),
    ("serviceLBs", "ipAddress", {"ipAddress": "198.18.100.1000"}),
    ("serviceLBs", "ipAddress", {"ipAddress": "1.2.3"}),
    ("serviceLBs", "serviceName", {"serviceName": "svc_1"}),
    ("serviceLBs", "networkName", {"networkName": DROP}),
    # extContractsGroup
    ("extContractsGroups", "contractsType", {"contractsType": "foo"}),
    ("extContractsGroups", "contractsType", {"contractsType": DROP}),
    ("extContractsGroups", "contracts", {"contracts": "x"}),
    # appProfile
    ("appProfiles", "endpointGroups", {"endpointGroups": ["bad name"]}),
    # Bgp (TestBgp)
    ("Bgps", "routerip", {"routerip": DROP}),
    ("Bgps", "routerip", {"routerip": "198.19.50.1"}),
    ("Bgps", "routerip", {"routerip": "198.19.50.1/32"}),
    ("Bgps", "neighbor", {"neighbor": "1.2.3"}),
    ("Bgps", "hostname", {"hostname": "bad_host"}),
    # global (TestGlobalSetting)
    ("globals", "name", {"name": "foo"}),
    ("globals", "networkInfraType", {"networkInfraType": "xyz"}),
    *[("globals", "vlans", {"vlans": vlans}) for vlans in ["1-5000", "0-4094", "1", "1?2", "abcd", "10-5", "", "1-4095"]],
    *[("globals", "vxlans", {"vxlans": vxlans}) for vxlans in ["1-100000", "1-20000", "", "5"]],
    ("globals", "pvtSubnet", {"pvtSubnet": "198.19.0.0/24"}),
    ("globals", "pvtSubnet", {"pvtSubnet": DROP}),
    ("globals", "fwdMode", {"fwdMode": "xyz"}),
    ("globals", "arpMode", {"arpMode": "xyz"}),
    # aciGw (TestAciGwSetting)
    ("aciGws", "enforcePolicies", {"enforcePolicies": "maybe"}),
    ("aciGws", "includeCommonTenant", {"includeCommonTenant": DROP}),
    ("aciGws", "pathBindings", {"pathBindings": "topology/pod-1/paths-101/pathep-eth1/14"}),
    ("aciGws", "nodeBindings", {"nodeBindings": "topology/pod-1/node-101,"}),
    ("aciGws", "physicalDomain", {"physicalDomain": ""}),
    ("aciGws", "name", {"name": "aci"}),
    # any type
    ("networks", "foo", {"foo": 1}),
    ("Bgps", "links", {"links": {}}),
    ("networks", "key", {"key": "default:other"}),
    ("networks", "key", {"key": 5}),
]


@pytest.mark.parametrize(("collection", "field", "overrides"), INVALID, ids=case_id)
def test_invalid(collection: str, field: str, overrides: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as caught:
        submit(collection, **overrides)
    assert caught.value.field == field
    assert field in str(caught.value)


def test_url_key_must_match_the_body() -> None:
    expected = r"^Invalid Key: URL key 'default:net2', but tenantName:networkName make 'default:net1'"
    with pytest.raises(ValidationError, match=expected) as caught:
        validate("networks", VALID["networks"], "default:net2")
    assert caught.value.field == "key"


def test_body_must_be_an_object() -> None:
    with pytest.raises(ValidationError) as caught:
        validate("networks", ["x"], "default:net1")
    assert caught.value.field == "body"


def test_messages_keep_contivs_first_words_and_show_the_value() -> None:
    with pytest.raises(ValidationError, match=r'^subnet string invalid format: "198.18.1.0/33" \(expected'):
        submit("networks", subnet="198.18.1.0/33")
    with pytest.raises(ValidationError, match=r"^pktTag Value Out of bound: 20000000"):
        submit("networks", pktTag=20000000)
    with pytest.raises(ValidationError, match=r"^networkName string too long: 65 bytes \(max 64\)"):
        submit("networks", networkName=LONG)
    with pytest.raises(ValidationError, match=r"^can not specify 'to' parameters in incoming rule: toNetwork"):
        submit("rules", toNetwork="net1")


def test_collections() -> None:
    with pytest.raises(ValidationError, match="volumes not supported"):
        validate("volumes", {}, "default:v1")
    with pytest.raises(NotFoundError):
        validate("nets", {}, "default:n1")


# --- valid input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("collection", "overrides"),
    [
        *[
            ("netprofiles", {"bandwidth": rate})
            for rate in ["2gbps", "10 Gbps", "10 Gb", "10 gb", "5Gb", "3Gbps", "4g", "4G", "20mbps", "6Mbps", "18Mb", "6 Mbps", "", "500Kbps"]
        ],
        ("netprofiles", {"DSCP": 63, "burst": 10486}),
        ("netprofiles", {"burst": 2}),
        ("networks", {"subnet": "198.18.1.5-198.18.1.15/27", "gateway": "198.18.1.30"}),
        ("networks", {"subnet": "198.18.1.7/24"}),
        ("networks", {"encap": "vlan", "pktTag": 4094}),
        ("networks", {"pktTag": 16777215}),
        ("networks", {"ipv6Subnet": "2016:0617::/100", "ipv6Gateway": "2016:0617::254"}),
        ("networks", {"ipv6Subnet": "1001:1::/108"}),
        ("networks", {"gateway": DROP}),
        ("endpointGroups", {"ipPool": "198.18.1.10"}),
        ("endpointGroups", {"ipPool": "198.18.1.10-198.18.1.20", "policies": ["p1", "p2"], "cfgdTag": "web.tag"}),
        ("rules", {"toIpAddress": "198.18.1.5"}),
        ("rules", {"fromEndpointGroup": "web", "fromIpAddress": "198.18.0.0/17", "protocol": "17", "port": 53}),
        ("rules", {"direction": "out", "toEndpointGroup": "db", "protocol": "tcp", "port": 5432}),
        ("globals", {"vlans": "100-1000", "vxlans": "1001-2000", "fwdMode": "", "arpMode": "flood"}),
        ("aciGws", {"pathBindings": "", "nodeBindings": ""}),
        ("serviceLBs", {"ports": ["80:8080:TCP", "643:7070:udp"], "ipAddress": "198.18.1.3"}),
    ],
    ids=case_id,
)
def test_valid(collection: str, overrides: dict[str, Any]) -> None:
    submit(collection, **overrides)


def test_defaults_and_omitempty() -> None:
    network = submit("networks", pktTag=0, nwType=None)
    assert network["nwType"] == "data"
    assert "pktTag" not in network
    rule = submit("rules", priority=0)
    assert rule["priority"] == 1
    assert "port" not in rule and "protocol" not in rule


def test_server_owned_members_are_accepted_and_ignored() -> None:
    body = {**VALID["networks"], "key": "default:net1", "link-sets": {}, "links": {"Tenant": {}}}
    assert validate("networks", body, "default:net1") == submit("networks")


# --- round trips to the JSON Contiv returns ---------------------------------------------------


def test_network_create_response_matches_contiv(world: FakeLookup) -> None:
    """The exchange of §1.1: POST networks/default:net1 → the object with its Tenant link."""
    body = {"tenantName": "default", "networkName": "net1", "encap": "vxlan", "subnet": "198.18.1.0/24", "gateway": "198.18.1.254"}
    expected = json.loads(
        '{"key":"default:net1","encap":"vxlan","gateway":"198.18.1.254","networkName":"net1","nwType":"data",'
        '"subnet":"198.18.1.0/24","tenantName":"default","link-sets":{},'
        '"links":{"Tenant":{"type":"tenant","key":"default"}}}'
    )
    fresh = FakeLookup()
    fresh.add("tenants", tenantName="default")
    assert render("network", validate("networks", body, "default:net1"), fresh) == expected


def test_links_are_derived_from_every_reference(world: FakeLookup) -> None:
    world.add("policys", tenantName="default", policyName="p1")
    world.add("netprofiles", tenantName="default", profileName="gold", bandwidth="10Mbps", DSCP=6)
    web = world.add("endpointGroups", tenantName="default", groupName="web", networkName="net1", policies=["p1"], netProfile="gold")
    world.add("endpointGroups", tenantName="default", groupName="db", networkName="net1")
    world.add(
        "rules", tenantName="default", policyName="p1", ruleId="1", direction="in", action="allow", fromEndpointGroup="db", protocol="tcp", port=5432
    )
    world.add("appProfiles", tenantName="default", appProfileName="app", endpointGroups=["web"])

    def link(kind: str, key: str) -> dict[str, str]:
        return {"type": kind, "key": key}

    assert render("endpointGroup", web, world) == {
        **web,
        "link-sets": {"Policies": {"default:p1": link("policy", "default:p1")}},
        "links": {
            "AppProfile": link("appProfile", "default:app"),
            "NetProfile": link("netprofile", "default:gold"),
            "Network": link("network", "default:net1"),
            "Tenant": link("tenant", "default"),
        },
    }
    db = world.get("endpointGroup", "default:db")
    assert db is not None
    assert render("endpointGroup", db, world)["link-sets"] == {"MatchRules": {"default:p1:1": link("rule", "default:p1:1")}}
    rule = world.get("rule", "default:p1:1")
    assert rule is not None
    assert render("rule", rule, world) == {
        **rule,
        "link-sets": {"Policies": {"default:p1": link("policy", "default:p1")}},
        "links": {"MatchEndpointGroup": link("endpointGroup", "default:db")},
    }
    tenant = world.get("tenant", "default")
    assert tenant is not None
    assert render("tenant", tenant, world) == {
        "key": "default",
        "tenantName": "default",
        "link-sets": {
            "AppProfiles": {"default:app": link("appProfile", "default:app")},
            "EndpointGroups": {"default:db": link("endpointGroup", "default:db"), "default:web": link("endpointGroup", "default:web")},
            "NetProfiles": {"default:gold": link("netprofile", "default:gold")},
            "Networks": {"default:net1": link("network", "default:net1")},
            "Policies": {"default:p1": link("policy", "default:p1")},
        },
    }


@pytest.mark.parametrize(
    ("collection", "has_link_sets", "links"),
    [
        ("tenants", True, []),
        ("networks", True, ["Tenant"]),
        ("policys", True, ["Tenant"]),
        ("appProfiles", True, ["Tenant"]),
        ("netprofiles", True, ["Tenant"]),
        ("endpointGroups", True, ["AppProfile", "NetProfile", "Network", "Tenant"]),
        ("rules", True, ["MatchEndpointGroup"]),
        ("serviceLBs", False, ["Network", "Tenant"]),
        ("extContractsGroups", True, []),
        ("Bgps", False, []),
        ("globals", False, []),
        ("aciGws", False, []),
    ],
)
def test_link_members_per_type(collection: str, has_link_sets: bool, links: list[str]) -> None:
    """The members Contiv's structs give each type: `link-sets` always (if any), every link
    always, an unset one as `{}`."""
    rendered = render(kind_for(collection), submit(collection), FakeLookup())
    assert ("link-sets" in rendered) == has_link_sets
    assert list(rendered.get("links", {})) == links
    if collection in ("endpointGroups", "rules"):
        assert rendered["links"][links[0]] == {}


def test_make_helper_round_trips() -> None:
    assert make("tenants", tenantName="blue") == {"key": "blue", "tenantName": "blue"}

"""What configuration writes do to state on the leader: tags, group ids, policy rules, service LBs."""

from __future__ import annotations

from typing import Any

import pytest

from contivd.model import ConflictError
from contivd.netmaster import ipam, resources
from contivd.netmaster.service import Netmaster
from contivd.state import keys as layout
from raftstore import MemoryStore
from tests.netmaster.helpers import TENANT, create, delete_request, net_state, network, state, under

RULE_PREFIX = "default:web:default:web-in:default:web-in:"  # <group>:<policy>:<rule key>:<direction>


def group(name: str, network_name: str, **extra: Any) -> dict[str, Any]:
    return {"tenantName": TENANT, "groupName": name, "networkName": network_name, **extra}


def rule(rule_id: str, **fields: Any) -> dict[str, Any]:
    return {"tenantName": TENANT, "policyName": "web-in", "ruleId": rule_id, "direction": "in", **fields}


def tags_in_use(store: MemoryStore, space: resources.TagKind) -> list[int]:
    return sorted(resources.in_use(state(store, layout.TAGS_STATE), space))


async def test_defaults_write_the_global_state_once(netmaster: Netmaster, store: MemoryStore) -> None:
    assert state(store, layout.GLOBAL_CONFIG)["fwd-mode"] == "bridge"
    assert state(store, layout.GLOBAL_STATE)["auto"] == {"VLANs": "1-4094", "VXLANs": "1-10000"}
    assert state(store, layout.CONFIG_VERSION) == 2, "global and the default tenant"
    txns = store.proposals["txn"]
    await netmaster.ensure_defaults()
    assert store.proposals["txn"] == txns and state(store, layout.CONFIG_VERSION) == 2


async def test_networks_take_tags_and_give_them_back(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:x1", network("x1", "198.18.20.0/24"))
    await netmaster.put_object("networks", "default:x2", network("x2", "198.18.21.0/24", pktTag=700))
    await netmaster.put_object("networks", "default:v", network("v", "198.18.22.0/24", encap="vlan", pktTag=3000))
    x1, x2, v = (net_state(store, n) for n in ("x1", "x2", "v"))
    assert [(n["pktTagType"], n["extPktTag"], n["pktTag"]) for n in (x1, x2, v)] == [("vxlan", 1, 1), ("vxlan", 700, 2), ("vlan", 0, 3000)]
    assert (tags_in_use(store, "vxlan"), tags_in_use(store, "vlan"), tags_in_use(store, "localVlan")) == ([1, 700], [3000], [1, 2])
    with pytest.raises(ConflictError, match="3000"):
        await netmaster.put_object("networks", "default:v2", network("v2", "198.18.23.0/24", encap="vlan", pktTag=3000))
    await netmaster.delete_object("networks", "default:x2")
    assert (tags_in_use(store, "vxlan"), tags_in_use(store, "localVlan")) == ([1], [1])
    assert net_state(store, "x2") is None


async def test_creating_a_group_allocates_its_id_and_deleting_frees_it(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.24.0/24"))
    await netmaster.put_object("endpointGroups", "default:g1", group("g1", "n"))
    await netmaster.put_object("endpointGroups", "default:g2", group("g2", "n", ipPool="198.18.24.100-198.18.24.109"))
    g1, g2 = state(store, layout.epg_state(TENANT, "g1")), state(store, layout.epg_state(TENANT, "g2"))
    assert (g1["endpointGroupId"], g2["endpointGroupId"]) == (1, 2) and tags_in_use(store, "epgId") == [1, 2]
    assert g1["pktTag"] == net_state(store, "n")["pktTag"] and g2["IPPool"] == "198.18.24.100-198.18.24.109"
    assert ipam.address_oper(net_state(store, "n"))["allocatedIPAddresses"] == "198.18.24.100-198.18.24.109"
    await create(netmaster, "e", "n", group="g2")
    with pytest.raises(ConflictError, match=r"EPG default:g2 has active endpoints \(1\)"):
        await netmaster.delete_object("endpointGroups", "default:g2")
    await netmaster.delete_endpoint(delete_request("e", "n"))
    await netmaster.delete_object("endpointGroups", "default:g2")
    assert tags_in_use(store, "epgId") == [1] and state(store, layout.epg_state(TENANT, "g2")) is None
    assert ipam.address_oper(net_state(store, "n"))["allocatedIPAddresses"] == "", "the pool went back to the network"
    await netmaster.put_object("endpointGroups", "default:g3", group("g3", "n"))
    assert state(store, layout.epg_state(TENANT, "g3"))["endpointGroupId"] == 2, "a freed id is reused"


async def test_an_identical_repost_commits_nothing(netmaster: Netmaster, store: MemoryStore) -> None:
    body = network("n", "198.18.25.0/24")
    first = await netmaster.put_object("networks", "default:n", body)
    txns = store.proposals["txn"]
    assert await netmaster.put_object("networks", "default:n", body) == first
    assert store.proposals["txn"] == txns
    with pytest.raises(ConflictError, match="Cant change network parameters"):
        await netmaster.put_object("networks", "default:n", {**body, "subnet": "198.18.26.0/24"})


async def test_rules_compile_into_policy_rule_state(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.27.0/24"))
    await netmaster.put_object("networks", "default:clients", network("clients", "198.18.28.0/24"))
    await netmaster.put_object("policys", "default:web-in", {"tenantName": TENANT, "policyName": "web-in"})
    await netmaster.put_object("rules", "default:web-in:1", rule("1", protocol="tcp", port=80, action="allow", priority=10))
    await netmaster.put_object("rules", "default:web-in:2", rule("2", fromNetwork="clients", action="deny", priority=5))
    await netmaster.put_object(
        "rules", "default:web-in:3", rule("3", fromIpAddress="198.18.29.0/24", protocol="udp", port=53, action="allow", priority=7)
    )
    assert under(store, layout.POLICY_RULE_PREFIX) == {}, "no group uses the policy yet"
    await netmaster.put_object("endpointGroups", "default:web", group("web", "n", policies=["web-in"]))
    compiled = {key.removeprefix(RULE_PREFIX): value for key, value in under(store, layout.POLICY_RULE_PREFIX).items()}
    assert sorted(compiled) == ["1:inRx", "1:inTx", "2:inRx", "3:inRx", "3:inTx"]
    fields = ("Action", "Priority", "IpProtocol", "SrcIpAddr", "DstIpAddr", "SrcPort", "DstPort", "SrcEndpointGroup", "DstEndpointGroup")
    view = {name: tuple(value[f] for f in fields) for name, value in compiled.items()}
    assert view == {
        "1:inRx": ("allow", 10, 6, "", "", 0, 80, 0, 1),
        "1:inTx": ("allow", 10, 6, "", "", 80, 0, 1, 0),
        "2:inRx": ("deny", 5, 0, "198.18.28.0/24", "", 0, 0, 0, 1),
        "3:inRx": ("allow", 7, 17, "198.18.29.0/24", "", 0, 53, 0, 1),
        "3:inTx": ("allow", 7, 17, "", "198.18.29.0/24", 53, 0, 1, 0),
    }
    assert all(value["id"] == value["RuleId"] == RULE_PREFIX + name for name, value in compiled.items())
    policy = state(store, f"{layout.POLICY_PREFIX}default:web:default:web-in")
    assert policy["EndpointGroupID"] == 1 and sorted(policy["RuleMaps"]) == ["default:web-in:1", "default:web-in:2", "default:web-in:3"]

    await netmaster.delete_object("rules", "default:web-in:2")
    assert sorted(k.removeprefix(RULE_PREFIX) for k in under(store, layout.POLICY_RULE_PREFIX)) == ["1:inRx", "1:inTx", "3:inRx", "3:inTx"]
    with pytest.raises(ConflictError):
        await netmaster.delete_object("policys", "default:web-in")
    await netmaster.put_object("endpointGroups", "default:web", group("web", "n", policies=[]))
    assert under(store, layout.POLICY_RULE_PREFIX) == {} and under(store, layout.POLICY_PREFIX) == {}, "detaching removes the compiled rules"


async def test_a_group_rule_names_the_remote_group_id(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:n", network("n", "198.18.30.0/24"))
    await netmaster.put_object("endpointGroups", "default:db", group("db", "n"))
    await netmaster.put_object("policys", "default:web-in", {"tenantName": TENANT, "policyName": "web-in"})
    await netmaster.put_object("rules", "default:web-in:1", rule("1", fromEndpointGroup="db", protocol="tcp", port=5432, action="allow", priority=3))
    await netmaster.put_object("endpointGroups", "default:web", group("web", "n", policies=["web-in"]))
    compiled = under(store, layout.POLICY_RULE_PREFIX)
    rx = compiled[f"{RULE_PREFIX}1:inRx"]
    assert (rx["SrcEndpointGroup"], rx["DstEndpointGroup"], rx["DstPort"]) == (1, 2, 5432), "db got id 1, web id 2"


async def test_service_providers_follow_endpoint_labels(netmaster: Netmaster, store: MemoryStore) -> None:
    await netmaster.put_object("networks", "default:svc", network("svc", "198.18.31.0/24", "198.18.31.254"))
    await netmaster.put_object("networks", "default:apps", network("apps", "198.18.32.0/24", "198.18.32.254"))
    service = {"tenantName": TENANT, "serviceName": "web", "networkName": "svc", "selectors": ["app=web"], "ports": ["80:8080:TCP"]}
    await netmaster.put_object("serviceLBs", "default:web", service)
    lb_key, provider_key = f"{layout.SERVICE_LB_PREFIX}web:default", f"{layout.PROVIDER_PREFIX}web:default"
    assert state(store, lb_key)["ipaddress"] == "198.18.31.1" and state(store, lb_key)["providers"] == {}
    for name, app in (("w1", "web"), ("w2", "web"), ("db", "db")):
        await create(netmaster, name, "apps")
        await netmaster.update_endpoint(
            {"Tenant": TENANT, "Network": "apps", "EndpointID": name, "Event": "start", "Labels": {"app": app, "tier": "x"}}
        )
    lb = state(store, lb_key)
    assert sorted(lb["providers"]) == ["198.18.32.1:default", "198.18.32.2:default"]
    assert lb["providers"]["198.18.32.1:default"]["EpIDKey"] == "apps.default-w1" and lb["selectors"] == {"app": "web"}
    assert state(store, provider_key)["Providers"] == ["198.18.32.1", "198.18.32.2"]
    await netmaster.delete_endpoint(delete_request("w1", "apps"))
    assert list(state(store, lb_key)["providers"]) == ["198.18.32.2:default"]
    await netmaster.put_object("serviceLBs", "default:web", {**service, "selectors": ["app=db"]})
    assert state(store, provider_key)["Providers"] == ["198.18.32.3"] and state(store, lb_key)["ipaddress"] == "198.18.31.1"
    await netmaster.delete_object("serviceLBs", "default:web")
    assert state(store, lb_key) is None and state(store, provider_key) is None
    assert ipam.address_oper(net_state(store, "svc"))["allocatedIPAddresses"] == "198.18.31.254", "the VIP was released"

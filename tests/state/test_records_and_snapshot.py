"""contivd.state against what the real netmaster writes (on a MemoryStore): every stored value
parses into its record and renders back to the same JSON, and the snapshot follows the store
incrementally, with a journal of what changed."""

from __future__ import annotations

from typing import Any

from contivd.netmaster.service import Netmaster
from contivd.state import Change, GlobalState, KubeBackend, KubeServicePort, KubeServiceState, NodeRecord, StateCache, StateSnapshot, keys, tables
from contivd.state.records import RecordError, netpol_pod_from_json, netpol_pod_to_json, policy_rule_to_json
from contivd.state.snapshot import classify
from contivd.state.stored import Family
from openflow.inputs import NetpolPod, NetpolRule
from raftstore import KeyValue, MemoryStore

TENANT = "default"


async def populated() -> tuple[MemoryStore, Netmaster]:
    store = MemoryStore()
    netmaster = Netmaster(store, "node1")
    await netmaster.ensure_defaults()
    put = netmaster.put_object
    await put(
        "networks",
        "default:pods",
        {"tenantName": TENANT, "networkName": "pods", "encap": "vxlan", "subnet": "198.18.0.0/24", "gateway": "198.18.0.254"},
    )
    await put(
        "networks",
        "default:dual",
        {"tenantName": TENANT, "networkName": "dual", "encap": "vlan", "subnet": "198.18.1.0/24", "ipv6Subnet": "2001:db8::/64"},
    )
    await put("netprofiles", "default:gold", {"tenantName": TENANT, "profileName": "gold", "DSCP": 46, "bandwidth": "10Mbps", "burst": 3000})
    await put("policys", "default:web", {"tenantName": TENANT, "policyName": "web"})
    rule = {"tenantName": TENANT, "policyName": "web", "ruleId": "1", "direction": "in", "protocol": "tcp", "port": 80, "action": "allow"}
    await put("rules", "default:web:1", {**rule, "priority": 3})
    await put(
        "endpointGroups",
        "default:web",
        {
            "tenantName": TENANT,
            "groupName": "web",
            "networkName": "pods",
            "policies": ["web"],
            "netProfile": "gold",
            "ipPool": "198.18.0.10-198.18.0.20",
        },
    )
    await put("networks", "default:svc", {"tenantName": TENANT, "networkName": "svc", "encap": "vxlan", "subnet": "198.18.2.0/24"})
    await put(
        "serviceLBs",
        "default:api",
        {"tenantName": TENANT, "serviceName": "api", "networkName": "svc", "selectors": ["app=api"], "ports": ["80:8080:TCP"]},
    )
    for name, group, network in (("a1", "web", "pods"), ("a2", "", "pods"), ("d1", "", "dual")):
        config = {"Container": name, "Host": "node1"}
        await netmaster.create_endpoint({"TenantName": TENANT, "NetworkName": network, "ServiceName": group, "EndpointID": name, "ConfigEP": config})
    await netmaster.update_endpoint(
        {"Tenant": TENANT, "Network": "pods", "EndpointID": "a1", "Event": "start", "Labels": {"app": "api", "tier": "1"}}
    )
    await netmaster.update_endpoint({"Tenant": TENANT, "Network": "pods", "EndpointID": "a2", "Event": "start", "Labels": {}})
    return store, netmaster


async def test_every_stored_value_renders_back_to_the_same_json() -> None:
    store, _ = await populated()
    snapshot = StateSnapshot()
    kvs = store.list_nowait(f"{keys.ROOT}/")
    snapshot.reset(kvs, store.revision)
    assert not snapshot.problems
    tables: dict[str, Any] = {
        "endpoint": snapshot.endpoints,
        "network": snapshot.networks,
        "group": snapshot.groups,
        "service": snapshot.services,
    }
    checked = 0
    for kv in kvs:
        change = classify(kv.key)
        if change.kind in tables:
            assert tables[change.kind][change.id].to_json() == kv.value, kv.key
            checked += 1
        elif change.kind == "rule":
            assert policy_rule_to_json(snapshot.rules[change.id]) == kv.value
            checked += 1
    assert checked >= 10
    assert snapshot.endpoints["pods.default-a1"].labels == (("app", "api"), ("tier", "1"))
    assert snapshot.endpoints["pods.default-a2"].labels == (), "stored {} stays an empty object"
    assert snapshot.endpoints["dual.default-d1"].labels is None, "never labelled: null"
    assert snapshot.groups["web:default"].dscp == 46 and snapshot.groups["web:default"].bandwidth == "10Mbps"
    assert snapshot.networks["dual.default"].ipv6_subnet_len == 64


async def test_every_table_round_trips_what_the_netmaster_wrote() -> None:
    """record → JSON → record and JSON → record → JSON, for each record the netmaster writes
    (the stored format stays byte-compatible with Contiv's layout and import-contiv)."""
    store, _ = await populated()
    names = ("NETWORKS", "ENDPOINTS", "GROUPS", "SERVICES", "PROVIDERS", "POLICIES", "POLICY_RULES", "TAGS")
    names += ("GLOBAL_CONFIG", "GLOBAL_STATE", "CONFIG_VERSION", "CONFIG")
    checked: set[str] = set()
    for name in names:
        table: Family[Any] = getattr(tables, name)
        for id, record in tables.scan(store, table).items():
            stored = store.get_nowait(table.key(id))
            assert stored is not None and table.render(record) == stored.value, f"{name} {id}"
            assert table.parse(table.render(record)) == record, f"{name} {id}"
            checked.add(name)
    assert checked == set(names), "the populated store holds every kind of record"
    dual = tables.read(store, tables.NETWORKS, "dual.default")[0]
    assert dual is not None and dual.ipv6_alloc_map == {1} and dual.to_json()["ipv6AllocMap"] == {"1": True}
    plain = tables.read(store, tables.NETWORKS, "pods.default")[0]
    assert plain is not None and not any(field.startswith("ipv6") for field in plain.to_json()), "IPv6 fields only for dual-stack networks"
    policy = tables.read(store, tables.POLICIES, "default:web:default:web")[0]
    assert policy is not None and [key for key, _ in policy.rule_maps] == ["default:web:1"] and policy.rule_maps[0][1].ofnet_rules
    assert GlobalState.from_json({"id": "", "auto": {"VLANs": "1-10", "VXLANs": "5"}}).to_json() == {
        "id": "",
        "auto": {"VLANs": "1-10", "VXLANs": "5"},
    }


async def test_the_cache_follows_the_store_and_journals_changes() -> None:
    store, netmaster = await populated()
    cache = StateCache(store)
    snapshot = cache.catch_up()
    assert snapshot.revision == store.revision and "pods.default-a1" in snapshot.endpoints
    before = snapshot.revision
    kept = snapshot.endpoints["pods.default-a2"]
    answer = await netmaster.create_endpoint(
        {"TenantName": TENANT, "NetworkName": "pods", "EndpointID": "a3", "ConfigEP": {"Container": "a3", "Host": "node2"}}
    )
    await netmaster.delete_endpoint({"TenantName": TENANT, "NetworkName": "pods", "EndpointID": "a1"})
    snapshot = cache.catch_up()
    assert snapshot.endpoints["pods.default-a3"].ip_address == answer["EndpointConfig"]["ipAddress"]
    assert "pods.default-a1" not in snapshot.endpoints
    assert snapshot.endpoints["pods.default-a2"] is kept, "an unchanged record stays the same object (readers rely on identity)"
    changes = snapshot.changes_since(before)
    assert changes is not None
    assert {Change("endpoint", "pods.default-a3"), Change("endpoint", "pods.default-a1"), Change("network", "pods.default")} <= changes
    assert snapshot.changes_since(-5) is None, "older than the journal reaches: rebuild"


def test_an_unusable_value_is_reported_and_absent() -> None:
    snapshot = StateSnapshot()
    good = NodeRecord("n1", "127.0.0.1:1", "http://127.0.0.1:2", "198.18.0.1", "198.18.0.1", False, "t")
    snapshot.reset(
        [
            KeyValue(keys.node("n1"), good.to_json(), 1, 1, 1),
            KeyValue(keys.ep_state("x"), {"id": "x"}, 2, 2, 1),  # no netID
            KeyValue(keys.net_state(TENANT, "bad"), ["not", "an", "object"], 3, 3, 1),
        ],
        3,
    )
    assert snapshot.nodes == {"n1": good}
    assert not snapshot.endpoints and not snapshot.networks
    assert set(snapshot.problems) == {keys.ep_state("x"), keys.net_state(TENANT, "bad")}
    assert "endpoint x" in snapshot.problems[keys.ep_state("x")]
    try:
        NodeRecord.from_json({"raft_address": None})
    except RecordError as exc:
        assert "node" in str(exc)
    else:
        raise AssertionError("a node without a name must be refused")


def test_a_kubernetes_service_round_trips_and_is_filed_by_namespace_and_name() -> None:
    service = KubeServiceState(
        "shop",
        "web",
        "198.19.128.10",
        (
            KubeServicePort("http", "TCP", 80, 30080, (KubeBackend("198.18.1.2", 8080), KubeBackend("198.18.1.3", 8081))),
            KubeServicePort("dns", "UDP", 53, 0, ()),
        ),
        10800,
        "42",
    )
    stored = service.to_json()
    assert stored["clusterIP"] == "198.19.128.10" and stored["ports"][0]["backends"][1] == {"ip": "198.18.1.3", "port": 8081}
    assert KubeServiceState.from_json(stored) == service
    snapshot = StateSnapshot()
    snapshot.reset(
        [KeyValue(keys.k8s_service("shop", "web"), stored, 1, 1, 1), KeyValue(keys.k8s_service("shop", "bad"), {"namespace": "shop"}, 2, 2, 1)], 2
    )
    assert snapshot.k8s_services == {"shop/web": service} and service.key == "shop/web"
    assert "kubernetes service" in snapshot.problems[keys.k8s_service("shop", "bad")]


def test_netpol_records_round_trip_and_a_bad_one_names_the_pod() -> None:
    pod = NetpolPod(
        "prod/db",
        (
            NetpolRule("ingress", 100, 0xC6120002, None, 0, None, "drop", "prod/db/ingress/isolation"),
            NetpolRule("egress", 200, 0xC6120002, (0xC6130000, 16), 17, (53, 54), "allow", "prod/dns/egress/0"),
        ),
    )
    stored = netpol_pod_to_json(pod)
    assert stored["rules"][1] == ["egress", 200, "198.18.0.2", "198.19.0.0/16", 17, [53, 54], "allow", "prod/dns/egress/0"]
    assert netpol_pod_from_json(stored) == pod
    try:
        netpol_pod_from_json({"pod": "prod/db", "rules": [["sideways", 1, "198.18.0.2", None, 0, None, "allow", "x"]]})
    except RecordError as exc:
        assert "prod/db" in str(exc)
    else:
        raise AssertionError("a bad rule was read")

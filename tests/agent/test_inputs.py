"""Agent inputs from the state the real netmaster writes (in-process store), through the typed
state snapshot and the flow builders: the netmaster's JSON, the state records and the agent's
conversions must agree."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest

from contivd.agent.inputs import Built, InputsBuilder
from contivd.api import tracing
from contivd.netmaster.service import Netmaster
from contivd.state import KubeBackend, KubeServicePort, KubeServiceState, NodeRecord, StateSnapshot, keys
from openflow import desired, flow_text, group_text
from openflow.inputs import Encap
from raftstore import KeyValue, StoreConfig, open_store
from tests.support.waiting import free_ports

NODES = [
    NodeRecord("node-a", "127.0.0.1:1", "http://127.0.0.1:2", "198.19.0.1", "198.19.0.1", False, "t"),
    NodeRecord("node-b", "127.0.0.1:3", "http://127.0.0.1:4", "198.19.0.2", "198.19.0.2", False, "t"),
]


def node_inputs(*, node: str, encap: Encap, states: dict[str, Any], ports: dict[str, int], tunnels: dict[str, int], round: int = 0) -> Built:
    snapshot = StateSnapshot()
    snapshot.reset([KeyValue(key, value, 1, 1, 1) for key, value in states.items()], 1)
    snapshot.nodes.update({n.name: n for n in NODES})
    return InputsBuilder(node, encap).build(snapshot, ports, tunnels, round=round)


async def cluster_state(tmp_path: Path) -> dict[str, Any]:
    (port,) = free_ports(1)
    async with open_store(StoreConfig(listen=f"127.0.0.1:{port}", data_dir=tmp_path / "s")) as store:
        await store.wait_leader(timeout=10)
        nm = Netmaster(store, "node-a")
        await nm.ensure_defaults()
        await nm.put_object(
            "networks",
            "default:pods",
            {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": "198.18.0.0/24", "gateway": "198.18.0.254"},
        )
        await nm.put_object(
            "netprofiles", "default:gold", {"tenantName": "default", "profileName": "gold", "DSCP": 46, "bandwidth": "10Mbps", "burst": 3000}
        )
        await nm.put_object("policys", "default:web", {"tenantName": "default", "policyName": "web"})
        await nm.put_object(
            "rules",
            "default:web:1",
            {
                "tenantName": "default",
                "policyName": "web",
                "ruleId": "1",
                "direction": "in",
                "protocol": "tcp",
                "port": 8080,
                "action": "deny",
                "priority": 5,
            },
        )
        await nm.put_object(
            "endpointGroups",
            "default:web",
            {"tenantName": "default", "groupName": "web", "networkName": "pods", "policies": ["web"], "netProfile": "gold"},
        )
        await nm.put_object(
            "networks",
            "default:svc",
            {"tenantName": "default", "networkName": "svc", "encap": "vxlan", "subnet": "198.18.1.0/24", "gateway": "198.18.1.254"},
        )
        for ep, host in (("a1", "node-a"), ("a2", "node-a"), ("b1", "node-b"), ("z1", "node-z")):
            await nm.create_endpoint(
                {"TenantName": "default", "NetworkName": "pods", "ServiceName": "web", "EndpointID": ep, "ConfigEP": {"Container": ep, "Host": host}}
            )
        await nm.put_object(
            "serviceLBs",
            "default:api",
            {"tenantName": "default", "serviceName": "api", "networkName": "svc", "selectors": ["app=api"], "ports": ["80:8080:TCP"]},
        )
        await nm.update_endpoint({"Tenant": "default", "Network": "pods", "EndpointID": "b1", "Event": "start", "Labels": {"app": "api"}})
        return {kv.key: kv.value for kv in await store.list("/contiv.io/state/")}


@pytest.fixture
async def state(tmp_path: Path) -> dict[str, Any]:
    return await cluster_state(tmp_path)


async def test_local_and_remote_endpoints_follow_homing_host_and_attached_ports(state: dict[str, Any]) -> None:
    built = node_inputs(node="node-a", encap="vxlan", states=state, ports={"pods.default-a1": 5}, tunnels={"198.19.0.2": 9}, round=1)
    local = built.inputs.local_ports
    assert [(p.endpoint_id, p.ofport, p.dscp, p.bandwidth_kbps) for p in local] == [("pods.default-a1", 5, 46, 10_000)]
    remote = {r.endpoint_id: r for r in built.inputs.remote_endpoints}
    assert set(remote) == {"pods.default-b1"}, "a2 is local but not attached yet; z1's node is unknown"
    assert built.problems == ("endpoint pods.default-z1: node 'node-z' is not registered; no VTEP",)
    assert [s.service_id for s in built.inputs.services] == ["api:default"]
    assert built.inputs.rules and all(r.action == "deny" for r in built.inputs.rules)


async def test_the_netmaster_state_compiles_into_flows(state: dict[str, Any]) -> None:
    built = node_inputs(
        node="node-a",
        encap="vxlan",
        states=state,
        ports={"pods.default-a1": 5, "pods.default-a2": 6},
        tunnels={"198.19.0.2": 9},
        round=1,
    )
    flows = desired(built.inputs)
    text = "\n".join(flow_text(f) for f in flows.flows)
    a1, b1 = (state[f"/contiv.io/state/eps/pods.default-{e}"] for e in ("a1", "b1"))
    vni = state["/contiv.io/state/nets/pods.default"]["extPktTag"]
    assert f"nw_dst={b1['ipAddress']} actions=set_field:{b1['macAddress']}->eth_dst" in text, "the remote endpoint is known"
    assert f"dl_dst={b1['macAddress']} actions=set_field:{vni:#x}->tun_id,output:9" in text, "…and reached through the peer's tunnel"
    assert f"arp_tpa={a1['ipAddress']},arp_op=1" in text, "proxy ARP answers for the local endpoint"
    assert "tcp,metadata=0x1/0xffff,tp_dst=8080 actions=drop" in text.replace(
        f"metadata={state['/contiv.io/state/endpointGroups/web:default']['endpointGroupId']:#x}/0xffff", "metadata=0x1/0xffff"
    ), "the deny rule is installed"
    buckets = " ".join(group_text(g) for g in flows.groups)
    assert f"type=select,bucket=weight:100,actions=ct(commit,table=5,zone=65520,nat(dst={b1['ipAddress']}:8080))" in buckets, (
        "the service spreads to its provider"
    )


async def test_vlan_bridge_ignores_vxlan_networks(state: dict[str, Any]) -> None:
    built = node_inputs(node="node-a", encap="vlan", states=state, ports={"pods.default-a1": 5}, tunnels={})
    assert built.inputs.local_ports == () and built.inputs.remote_endpoints == ()


def kube_service(name: str, cluster_ip: str, protocol: str = "TCP", affinity: int = 0) -> tuple[str, dict[str, Any]]:
    record = KubeServiceState(
        "shop", name, cluster_ip,
        (
            KubeServicePort("http", protocol, 80, 0, (KubeBackend("198.18.0.7", 8080), KubeBackend("198.18.0.8", 8081))),
            KubeServicePort("dns", "UDP", 53, 0, (KubeBackend("198.18.0.7", 5353),)),
        ),
        affinity, "12",
    )  # fmt: skip
    return keys.k8s_service("shop", name), record.to_json()


async def test_kubernetes_services_become_services_and_bad_ones_are_skipped_by_name(state: dict[str, Any]) -> None:
    contiv_vip = state[keys.SERVICE_LB_PREFIX + "api:default"]["ipaddress"]
    kube = dict(
        (kube_service("web", "198.19.112.10", affinity=10800), kube_service("sctp", "198.19.112.11", "SCTP"), kube_service("clash", contiv_vip))
    )
    built = node_inputs(node="node-a", encap="vxlan", states={**state, **kube}, ports={}, tunnels={"198.19.0.2": 9}, round=1)
    by_id = {s.service_id: s for s in built.inputs.services}
    assert sorted(by_id) == ["api:default", "k8s:shop/web"], "the Contiv serviceLB keeps working beside the Kubernetes Service"
    web = by_id["k8s:shop/web"]
    assert (web.vip, web.affinity_timeout) == (int(ipaddress.IPv4Address("198.19.112.10")), 10800)
    assert [(p.proto, p.port, [(b.ip & 0xFF, b.port) for b in p.backends]) for p in web.ports] == [
        (6, 80, [(7, 8080), (8, 8081)]),
        (17, 53, [(7, 5353)]),
    ]
    assert "kubernetes service shop/sctp: port http protocol 'SCTP' is not TCP/UDP" in built.problems
    assert f"service k8s:shop/clash: VIP {contiv_vip} is already service api:default's" in built.problems
    desired(built.inputs)  # the rest compiles: nothing collides
    snapshot = StateSnapshot()
    snapshot.reset([KeyValue(key, value, 1, 1, 1) for key, value in {**state, **kube}.items()], 1)
    assert [s.service_id for s in tracing.services(snapshot)] == sorted(by_id), "ctl trace judges exactly the services the agent programs"


async def test_every_kubernetes_service_enters_the_network_of_its_backends(state: dict[str, Any]) -> None:
    plain = node_inputs(node="node-a", encap="vxlan", states=state, ports={"pods.default-a1": 5}, tunnels={"198.19.0.2": 9})
    b1 = next(r for r in plain.inputs.remote_endpoints if r.endpoint_id == "pods.default-b1")
    known, unknown = str(ipaddress.IPv4Address(b1.ip)), "198.18.250.1"

    def record(name: str, vip: str, node_port: int, backend: str) -> tuple[str, dict[str, Any]]:
        port = KubeServicePort("http", "TCP", 80, node_port, (KubeBackend(backend, 8080),))
        return keys.k8s_service("shop", name), KubeServiceState("shop", name, vip, (port,), 0, "1").to_json()

    kube = dict(
        (record("np", "198.19.112.20", 30080, known), record("plain", "198.19.112.21", 0, known), record("away", "198.19.112.22", 30081, unknown))
    )
    built = node_inputs(node="node-a", encap="vxlan", states={**state, **kube}, ports={"pods.default-a1": 5}, tunnels={"198.19.0.2": 9})
    entries = {s.service_id: s.entry_network for s in built.inputs.services if s.service_id.startswith("k8s:")}
    assert entries == {"k8s:shop/np": b1.network, "k8s:shop/plain": b1.network, "k8s:shop/away": None}, (
        "with or without a nodePort (the node's own connections to the ClusterIP), not where no backend's network is known"
    )

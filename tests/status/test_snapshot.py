"""The page model: store contents and node reports → what the status page renders."""

from __future__ import annotations

import json
from dataclasses import replace
from ipaddress import IPv4Address, IPv4Interface
from typing import Any

from contivd.agent.service import AgentStatistics
from contivd.bgp.peering import Peering, inspect_answer
from contivd.netmaster import ipam
from contivd.state import NetworkState, NodeRecord, StateSnapshot
from contivd.state import keys as layout
from contivd.state.usage import address_usage
from contivd.status.snapshot import ENDPOINT_COLUMNS, bgp_model, cluster_model, node_health, node_report, store_model
from raftstore import KeyValue, StoreStatistics

MARKUP = "<img src=x onerror=alert(1)>"


def network(name: str, subnet: str, gateway: str, tag: int, encap: str = "vxlan") -> dict[str, Any]:
    return ipam.new_network_state({"networkName": name, "tenantName": "default", "encap": encap, "subnet": subnet, "gateway": gateway}, tag, 0)


def endpoint(net: dict[str, Any], epg: dict[str, Any] | None, name: str, node: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    address = ipam.allocate_ipv4(net, epg)
    return {
        "id": layout.ep_id("default", net["networkName"], name),
        "netID": net["id"],
        "endpointID": name,
        "serviceName": epg["groupName"] if epg else "",
        "ipAddress": address,
        "macAddress": ipam.mac_for(address),
        "homingHost": node,
        "labels": labels,
        "containerId": f"c-{name}",
        "epCommonName": "",
    }


def snapshot_of(entries: dict[str, Any]) -> StateSnapshot:
    """A StateSnapshot holding `entries` (store key → value) at revision 1."""
    snapshot = StateSnapshot()
    snapshot.reset([KeyValue(key, value, 1, 1, 1) for key, value in entries.items()], 1)
    return snapshot


def entries() -> StateSnapshot:
    pods = network("pods", "198.18.0.0/24", "198.18.0.254", 7)
    group = {"groupName": "db", "tenantName": "default", "networkName": "pods", "ipPool": "198.18.0.100-198.18.0.109"}
    db, pods = ipam.new_epg_state(group, pods, 5)
    storage = network("storage", "198.18.8.0/29", "", 100, encap="vlan")
    eps = [
        endpoint(pods, None, "a", "node1", {"app": MARKUP}),
        endpoint(pods, db, "b", "node2"),
        endpoint(storage, None, MARKUP, "node1"),
    ]
    out: dict[str, Any] = {layout.net_state("default", n["networkName"]): n for n in (pods, storage)}
    out[layout.epg_state("default", "db")] = db
    out[layout.model("endpointGroup", "default:db")] = {**group, "policies": ["p"]}
    out.update({layout.ep_state(ep["id"]): ep for ep in eps})
    out[f"{layout.POLICY_RULE_PREFIX}default:db:default:p:default:p:1:inRx"] = {
        "id": "default:db:default:p:default:p:1:inRx", "RuleId": "default:db:default:p:default:p:1:inRx", "Priority": 1, "SrcEndpointGroup": 0,
        "DstEndpointGroup": 5, "SrcIpAddr": "", "DstIpAddr": "", "IpProtocol": 6, "SrcPort": 0, "DstPort": 22, "TcpFlags": "", "Action": "deny",
    }  # fmt: skip
    return snapshot_of(out)


def test_networks_with_usage_tags_and_groups() -> None:
    model = store_model(entries())
    nets = {n["name"]: n for n in model["networks"]}
    # pods: endpoint a and one address of db's 10-address pool are allocated; the gateway counts as neither
    assert (nets["pods"]["allocated"], nets["pods"]["total"]) == (2, 253)
    assert nets["pods"]["groups"] == ["db"] and nets["pods"]["tag"] == 7 and nets["pods"]["encap"] == "vxlan"
    assert (nets["storage"]["allocated"], nets["storage"]["total"]) == (1, 6)
    assert model["vlanUplinks"] is True
    assert model["groups"] == [{"name": "db", "network": "pods", "id": 5, "pool": "198.18.0.100-198.18.0.109", "policies": ["p"], "endpoints": 0}]


def test_endpoint_rows_keep_user_strings_verbatim() -> None:
    model = store_model(entries())
    assert model["endpoints"]["columns"] == ["name", "container", "ip", "mac", "node", "network", "group", "labels", "id"]
    rows = {row[0]: row for row in model["endpoints"]["rows"]}
    assert rows["a"][:8] == ["a", "c-a", "198.18.0.1", "02:02:c6:12:00:01", "node1", "pods", "", f"app={MARKUP}"]
    assert rows["b"][2] == "198.18.0.100" and rows["b"][6] == "db"
    assert rows[MARKUP][5] == "storage", "escaping is the browser's job: the model carries the text as it is"
    assert json.loads(json.dumps(model)) == model


def test_policy_matrix_for_groups_with_policies() -> None:
    (matrix,) = store_model(entries())["policy"]
    assert matrix["group"] == "db" and matrix["services"] == ["tcp/22", "tcp/other", "other"]
    assert matrix["rows"][0] == {
        "source": "db",
        "kind": "group",
        "cells": [["deny", "default:db:default:p:default:p:1:inRx"], ["allow", ""], ["allow", ""]],
    }


def stats(**changes: Any) -> StoreStatistics:
    base = StoreStatistics(
        self_address="127.0.0.1:1", role="leader", leader="127.0.0.1:1", term=4, commit_index=90, last_applied=90, log_length=90, revision=50,
        keys=10, leases=3, voters=("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"), connected_voters=("127.0.0.1:2",),
        readonly_members=0, has_quorum=True, fsync=True,
    )  # fmt: skip
    return replace(base, **changes)


def agent(**changes: Any) -> AgentStatistics:
    base = AgentStatistics(
        bridges=("contivVxlanBridge",), round=2, flows=120, groups=1, syncs=9, problems=(), last_error="", switch_connected=True, first_sync_done=True,
        last_sync_unix=1000.0, last_sync_seconds=0.01, sync_failures=0,
    )  # fmt: skip
    return replace(base, **changes)


def node(name: str, port: int, vtep: str) -> NodeRecord:
    return NodeRecord(name, f"127.0.0.1:{port}", f"http://127.0.0.1:{9000 + port}", "127.0.0.1", vtep, False, "0.1.0")


def test_node_health() -> None:
    assert node_health(None, False)[0] == "down"
    assert node_health(None, None)[0] == "unknown"
    assert node_health(node_report("n", stats(), agent(), 1.0), True) == ("ok", [])
    health, reasons = node_health(node_report("n", stats(), agent(switch_connected=False, last_error="boom", problems=("x",)), 1.0), True)
    assert health == "degraded" and reasons == ["OVS not connected", "last sync failed: boom", "1 object(s) skipped"]
    assert node_health(node_report("n", stats(leader=None), None, 1.0), True) == ("degraded", ["knows no leader"])


def test_cluster_members_leader_health_and_tunnels() -> None:
    nodes = [node("node1", 1, "198.18.0.1"), node("node2", 2, "198.18.0.2"), node("node3", 3, "198.18.0.3")]
    reports = {
        "node1": node_report("node1", stats(), agent(), 1.0),
        "node2": node_report("node2", stats(role="follower"), agent(problems=("p",)), 1.0),
    }
    model = cluster_model(stats(), "node1", nodes, reports)
    members = {m["name"]: m for m in model["members"]}
    assert model["leader"] == "node1" and members["node1"]["leader"] and members["node1"]["self"]
    assert (members["node1"]["term"], members["node1"]["commitIndex"]) == (4, 90)
    assert members["node2"]["health"] == "degraded" and members["node2"]["role"] == "follower"
    assert members["node3"]["health"] == "down" and members["node3"]["term"] is None, "not Raft-connected and no report"
    assert members["node3"]["role"] == "voter", "its own view is unknown"
    assert members["127.0.0.1:4"]["reasons"] == ["not registered (no node record)"]
    assert model["tunnels"] == [
        {"a": "node1", "b": "node2", "health": "degraded"},
        {"a": "node1", "b": "node3", "health": "down"},
        {"a": "node2", "b": "node3", "health": "down"},
    ]


def test_each_nodes_endpoint_datapath_states_are_merged_into_the_cluster_part() -> None:
    nodes = [node("node1", 1, "198.18.0.1"), node("node2", 2, "198.18.0.2")]
    reports = {
        "node1": node_report("node1", stats(), agent(), 1.0, {"pods.default-a": ["port, link up", True]}),
        "node2": node_report(
            "node2", stats(role="follower"), agent(), 1.0, {"pods.default-b": ["no port, veth gone; orphan, deleted in 9 s", False]}
        ),
        "node3": None,
    }
    assert reports["node1"] is not None and reports["node1"]["datapath"] == {"pods.default-a": ["port, link up", True]}
    assert node_report("n", stats(), None, 1.0)["datapath"] == {}, "a node without a CNI server reports none"
    assert cluster_model(stats(), "node1", nodes, reports)["datapath"] == {
        "pods.default-a": ["port, link up", True],
        "pods.default-b": ["no port, veth gone; orphan, deleted in 9 s", False],
    }
    row = next(r for r in store_model(entries())["endpoints"]["rows"] if r[0] == "a")
    assert row[ENDPOINT_COLUMNS.index("id")] == "pods.default-a", "rows carry the id the datapath states are keyed by"


PEERING = Peering("node1", IPv4Interface("198.19.250.2/24"), 65001, IPv4Address("198.19.250.1"), 65000)


def test_bgp_model_from_the_speakers_inspect_answer() -> None:
    established = inspect_answer(PEERING, "up", {"198.19.251.0/24": "198.19.250.1", "198.19.252.0/24": "198.19.250.1"})
    assert bgp_model(established) == {
        "neighbor": "198.19.250.1",
        "neighborAs": 65000,
        "localAs": 65001,
        "neighborStatus": "established",
        "adminStatus": "up",
        "numRoutes": 2,
        "routes": ["198.19.251.0/24", "198.19.252.0/24"],
        "error": "",
    }
    assert bgp_model(inspect_answer(None, "idle", {})) is None, "no Bgp object names the node"
    starting = bgp_model(inspect_answer(PEERING, "idle", {}))
    assert starting is not None and (starting["neighborStatus"], starting["numRoutes"], starting["routes"]) == ("idle", 0, [])
    unusable = bgp_model(inspect_answer(None, "idle", {}, "Bgp node1: neighbor-as '4294967296' is not an AS number (1-4294967295)"))
    assert unusable is not None and unusable["neighbor"] == "" and "neighbor-as" in unusable["error"]
    kept = bgp_model(inspect_answer(PEERING, "up", {}, "Bgp node1: no neighbor address"))
    assert kept is not None and (kept["neighborStatus"], kept["error"]) == ("established", "Bgp node1: no neighbor address"), "the old session stays"


def test_each_nodes_bgp_peering_reaches_its_member_row() -> None:
    nodes = [node("node1", 1, "198.18.0.1"), node("node2", 2, "198.18.0.2")]
    reports = {
        "node1": node_report("node1", stats(), agent(), 1.0, bgp=inspect_answer(PEERING, "up", {})),
        "node2": node_report("node2", stats(role="follower"), None, 1.0),
    }
    members = {m["name"]: m for m in cluster_model(stats(), "node1", nodes, reports)["members"]}
    assert members["node1"]["bgp"]["neighborStatus"] == "established"
    assert members["node2"]["bgp"] is None, "no speaker: no datapath on that node"
    assert node_health(reports["node1"], True) == ("ok", []), "BGP does not change a node's health"


def test_address_usage_of_a_range_subnet_and_an_empty_store() -> None:
    ranged = network("r", "198.18.1.5-198.18.1.15/27", "198.18.1.15", 3)
    ipam.allocate_ipv4(ranged, None)
    assert address_usage(NetworkState.from_json(ranged), []) == (1, 10), "only the range counts: one endpoint of 11 less the gateway"
    assert store_model(StateSnapshot()) == {
        "networks": [],
        "groups": [],
        "endpoints": {"columns": list(ENDPOINT_COLUMNS), "rows": []},
        "policy": [],
        "services": [],
        "vlanUplinks": False,
    }

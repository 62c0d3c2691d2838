"""`global` inspect's Oper, as Contiv's GlobalGetOper fills it: the cluster mode, the networks
and the VLANs and VNIs in use as ranges (contivd/netmaster/oper.py), against a real node."""

from __future__ import annotations

from typing import Any

import pytest

from contivd.netmaster.oper import cluster_mode
from contivd.state import NodeRecord
from tests.support.contivd_nodes import ContivdProcess

GLOBAL_INSPECT = "/api/v1/inspect/globals/global/"


def network(name: str, encap: str, tag: int, third: int) -> dict[str, Any]:
    return {"tenantName": "default", "networkName": name, "encap": encap, "pktTag": tag, "subnet": f"198.18.{third}.0/24"}


def record(name: str, kubernetes: bool) -> NodeRecord:
    return NodeRecord(name, "127.0.0.1:9001", "http://127.0.0.1:1", "127.0.0.1", "127.0.0.1", False, "0", kubernetes=kubernetes)


def test_the_cluster_is_in_kubernetes_mode_while_a_live_node_has_a_kubeconfig() -> None:
    assert cluster_mode([record("a", False), record("b", True)]) == "kubernetes"
    assert cluster_mode([record("a", False)]) == "docker"
    assert cluster_mode([]) == "docker"


@pytest.fixture
def networks(node: ContivdProcess) -> Any:
    made = [
        network("gvlan1", "vlan", 1, 110),
        network("gvlan2", "vlan", 2, 111),
        network("gvlan5", "vlan", 5, 112),
        network("gvx", "vxlan", 7000, 113),
    ]
    for body in made:
        answer = node.post(f"/api/v1/networks/default:{body['networkName']}/", body)
        assert answer.status_code == 200, answer.text
    yield
    for body in made:
        node.delete(f"/api/v1/networks/default:{body['networkName']}/")


def test_an_empty_cluster_reports_only_its_mode(node: ContivdProcess) -> None:
    answer = node.get(GLOBAL_INSPECT).json()
    assert answer["Oper"] == {"clusterMode": "docker"}, "no --kubeconfig: Contiv's docker mode; nothing in use is left out (omitempty)"


def test_tags_in_use_are_contivs_ranges_and_count_the_networks(node: ContivdProcess, networks: None) -> None:
    assert node.get(GLOBAL_INSPECT).json()["Oper"] == {
        "clusterMode": "docker",
        "numNetworks": 4,
        "vlansInUse": "1-2, 5",
        "vxlansInUse": "7000",
    }
    contiv = node.get(GLOBAL_INSPECT, headers={"Accept": "*/*"}).json()
    assert contiv["Oper"]["vlansInUse"] == "1-2, 5", "the same answer for the original clients"


def test_a_vxlan_range_not_starting_at_1_reports_where_free_vnis_start(node: ContivdProcess) -> None:
    current = node.get("/api/v1/globals/global/").json()
    changed = node.post("/api/v1/globals/global/", {**current, "vxlans": "5000-9000"})
    assert changed.status_code == 200, changed.text
    try:
        oper = node.get(GLOBAL_INSPECT).json()["Oper"]
        assert oper["freeVXLANsStart"] == 4999
    finally:
        assert node.post("/api/v1/globals/global/", current).status_code == 200

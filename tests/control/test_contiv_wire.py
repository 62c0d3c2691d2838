"""Contiv's wire contract against a real node: errors by client (first line = Contiv's text from
contiv_messages), Go-like decoding and omitempty bodies (contiv-api.md, Decisions 1 and 7)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from contivd.model import contiv_line
from tests.support.contivd_nodes import ContivdProcess

CONTIV = {"Accept": "*/*"}  # what the original netctl and curl send
NET = {"tenantName": "default", "networkName": "wnet", "encap": "vxlan", "subnet": "198.18.60.0/24", "gateway": "198.18.60.254"}


def ensure(node: ContivdProcess, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = node.post(path, body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def contiv_error(answer: httpx.Response) -> str:
    """The first line of a Contiv-contract error answer, after checking its shape."""
    assert answer.status_code == 500, answer.text
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert answer.text.endswith("\n")
    return answer.text.splitlines()[0]


@pytest.fixture(scope="module")
def world(node: ContivdProcess) -> ContivdProcess:
    ensure(node, "/api/v1/networks/default:wnet/", NET)
    ensure(node, "/api/v1/policys/default:wpol/", {"tenantName": "default", "policyName": "wpol"})
    ensure(node, "/api/v1/endpointGroups/default:wgrp/", {"tenantName": "default", "groupName": "wgrp", "networkName": "wnet", "policies": ["wpol"]})
    return node


RULE = {"tenantName": "default", "policyName": "wpol", "ruleId": "r9", "direction": "in", "action": "allow"}

# (case, method, path, body, values for contiv_line)
CASES: list[tuple[str, str, str, dict[str, Any] | None, dict[str, Any]]] = [
    ("object-not-found", "GET", "/api/v1/networks/default:nosuch/", None, {"kind": "network"}),
    ("object-not-found", "GET", "/api/v1/inspect/networks/default:nosuch/", None, {"kind": "network"}),
    ("object-not-found", "DELETE", "/api/v1/Bgps/nosuch/", None, {"kind": "Bgp"}),
    ("invalid-key", "POST", "/api/v1/networks/default:other/", NET, {}),
    ("string-invalid-format", "POST", "/api/v1/networks/default:bad/", {**NET, "networkName": "bad", "encap": "gre"}, {"field": "encap"}),
    ("string-too-long", "POST", "/api/v1/tenants/" + "t" * 65 + "/", {"tenantName": "t" * 65}, {"field": "tenantName"}),
    ("value-out-of-bound", "POST", "/api/v1/rules/default:wpol:r8/", {**RULE, "ruleId": "r8", "priority": 101}, {"field": "priority"}),
    ("unsupported-type", "POST", "/api/v1/volumes/v/", {}, {}),
    ("endpoint-not-found", "GET", "/api/v1/inspect/endpoints/nosuch/", None, {}),
    ("tenant-missing", "POST", "/api/v1/networks/nope:n/", {**NET, "tenantName": "nope", "networkName": "n"}, {}),
    (
        "policy-missing",
        "POST",
        "/api/v1/endpointGroups/default:g10/",
        {"tenantName": "default", "groupName": "g10", "networkName": "wnet", "policies": ["nosuchpol"]},
        {},
    ),
    (
        "network-missing-named",
        "POST",
        "/api/v1/endpointGroups/default:g11/",
        {"tenantName": "default", "groupName": "g11", "networkName": "nonet"},
        {"name": "nonet"},
    ),
    ("rule-group-missing", "POST", "/api/v1/rules/default:wpol:r9/", {**RULE, "fromEndpointGroup": "nogroup"}, {}),
    ("rule-from-network-missing", "POST", "/api/v1/rules/default:wpol:r9/", {**RULE, "fromNetwork": "nonet"}, {}),
    (
        "subnet-overlap",
        "POST",
        "/api/v1/networks/default:wnet2/",
        {**NET, "networkName": "wnet2", "gateway": ""},
        {"other": "wnet", "subnet": NET["subnet"]},
    ),
    (
        "group-name-clash",
        "POST",
        "/api/v1/endpointGroups/default:wnet/",
        {"tenantName": "default", "groupName": "wnet", "networkName": "wnet"},
        {"name": "wnet"},
    ),
    ("network-frozen", "POST", "/api/v1/networks/default:wnet/", {**NET, "gateway": "198.18.60.1"}, {}),
    ("tenant-frozen", "POST", "/api/v1/tenants/default/", {"tenantName": "default"}, {}),
    ("tenant-has-groups", "DELETE", "/api/v1/tenants/default/", None, {"name": "default", "count": 1}),
    ("network-has-groups", "DELETE", "/api/v1/networks/default:wnet/", None, {"name": "wnet", "count": 1}),
    ("policy-in-use", "DELETE", "/api/v1/policys/default:wpol/", None, {}),
    (
        "service-ports",
        "POST",
        "/api/v1/serviceLBs/default:s1/",
        {"tenantName": "default", "serviceName": "s1", "networkName": "wnet", "selectors": ["a=b"]},
        {},
    ),
    (
        "service-selectors",
        "POST",
        "/api/v1/serviceLBs/default:s2/",
        {"tenantName": "default", "serviceName": "s2", "networkName": "wnet", "ports": ["80:80:TCP"]},
        {},
    ),
    ("rule-to-in-incoming", "POST", "/api/v1/rules/default:wpol:r9/", {**RULE, "toNetwork": "wnet"}, {}),
]


@pytest.mark.parametrize("case, method, path, body, values", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_contiv_clients_get_500_text_with_contivs_first_line(
    world: ContivdProcess, case: str, method: str, path: str, body: dict[str, Any] | None, values: dict[str, Any]
) -> None:
    answer = world.request(method, path, json=body, headers=CONTIV)
    assert contiv_error(answer) == contiv_line(case, **values)
    typed = world.request(method, path, json=body)
    assert 400 <= typed.status_code < 500 and typed.json()["error"], "Accept: application/json keeps the typed answer"


def test_a_tenant_is_created_once_even_with_an_identical_body(node: ContivdProcess) -> None:
    """Contiv's TenantUpdate refuses every re-create (docs/control-plane.md, Decision 2a); other
    objects still answer an identical re-POST with the object (Decision 2)."""
    created = ensure(node, "/api/v1/tenants/wonce/", {"tenantName": "wonce"})
    again = node.post("/api/v1/tenants/wonce/", {"tenantName": "wonce"})
    assert again.status_code == 409
    assert again.json()["error"] == "Cant change tenant parameters after its created: tenant wonce already exists"
    assert contiv_error(node.post("/api/v1/tenants/wonce/", {"tenantName": "wonce"}, headers=CONTIV)) == contiv_line("tenant-frozen")
    assert node.get("/api/v1/tenants/wonce/").json() == created, "nothing changed"
    policy = ensure(node, "/api/v1/policys/wonce:p/", {"tenantName": "wonce", "policyName": "p"})
    assert ensure(node, "/api/v1/policys/wonce:p/", {"tenantName": "wonce", "policyName": "p"}) == policy
    assert node.delete("/api/v1/policys/wonce:p/").status_code == 200
    assert node.delete("/api/v1/tenants/wonce/").status_code == 200
    ensure(node, "/api/v1/tenants/wonce/", {"tenantName": "wonce"})  # once deleted, it can be created again
    assert node.delete("/api/v1/tenants/wonce/").status_code == 200


def test_unknown_route_is_muxs_404_text(node: ContivdProcess) -> None:
    answer = httpx.get(node.url + "/api/v1/nosuchcollection/", headers=CONTIV, timeout=15)
    assert answer.status_code == 404 and answer.text == "404 page not found\n"


def test_followers_answer_by_the_original_clients_contract(cluster3) -> None:  # type: ignore[no-untyped-def]
    leader = cluster3.leader()
    follower = next(n for n in cluster3.nodes if n is not leader)
    path = "/api/v1/endpointGroups/default:g10/"
    body = {"tenantName": "default", "groupName": "g10", "networkName": "nonet"}
    assert contiv_error(follower.post(path, body, headers=CONTIV)) == contiv_line("network-missing-named", name="nonet")
    typed = follower.post(path, body)
    assert typed.status_code == 404 and "nonet" in typed.json()["error"]


def test_go_decoding_folds_case_and_ignores_trailing_data_but_refuses_unknown_fields(node: ContivdProcess) -> None:
    body = b'{"Hostname": "h1", "routerip": "198.18.70.1/24", "As": "65000", "neighbor-as": "65001", "neighbor": "198.18.70.2"} trailing'
    answer = node.request("POST", "/api/v1/Bgps/h1/", content=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["as"] == "65000" and answer.json()["hostname"] == "h1"
    unknown = node.post("/api/v1/Bgps/h2/", {"hostname": "h2", "routerip": "198.18.70.1/24", "bogus": 1})
    assert unknown.status_code == 400 and "unknown field 'bogus'" in unknown.json()["error"]


def test_bodies_follow_omitempty_and_contivs_quirks(world: ContivdProcess) -> None:
    oper = world.get("/api/v1/inspect/tenants/default/").json()["Oper"]
    assert "totalAppProfiles" not in oper and "totalServicelbs" not in oper and oper["totalNetworks"] >= 1
    ensure(world, "/api/v1/networks/default:empty/", {**NET, "networkName": "empty", "subnet": "198.18.61.0/30", "gateway": ""})
    net_oper = world.get("/api/v1/inspect/networks/default:empty/").json()["Oper"]
    assert "numEndpoints" not in net_oper and "allocatedIPAddresses" not in net_oper and "endpoints" not in net_oper
    created = world.post(
        "/plugin/createEndpoint", {"TenantName": "default", "NetworkName": "wnet", "EndpointID": "e1", "ConfigEP": {"Container": "e1", "Host": "h"}}
    )
    assert created.json()["EndpointConfig"]["containerId"] == ""
    rule = ensure(world, "/api/v1/rules/default:wpol:rn/", {**RULE, "ruleId": "rn", "fromNetwork": "wnet"})
    assert rule["fromIpAddress"] == NET["subnet"]
    assert world.get("/service/netmaster").json() is None


def test_an_endpoint_shows_its_container_once_a_start_event_named_it(world: ContivdProcess) -> None:
    """Contiv's createEndpoint ignores ConfigEP.Container (its answer's containerId is "", not
    omitted: CfgEndpointState has no omitempty) and only the start event records the container,
    so the oper bodies of a created endpoint have no containerID; contivd keeps the container
    for its CNI server all the same."""
    body = {"TenantName": "default", "NetworkName": "wnet", "EndpointID": "ec1", "ConfigEP": {"Container": "cafe01", "Host": "h"}}
    created = world.post("/plugin/createEndpoint", body).json()["EndpointConfig"]
    assert created["containerId"] == "" and created["endpointID"] == "ec1"
    try:
        oper = world.get("/api/v1/inspect/endpoints/ec1/").json()["Oper"]
        assert "containerID" not in oper and oper["endpointID"] == "ec1"
        listed = [ep for ep in world.get("/api/v1/inspect/networks/default:wnet/").json()["Oper"]["endpoints"] if ep["endpointID"] == "ec1"]
        assert len(listed) == 1 and "containerID" not in listed[0]
        start = {"Tenant": "default", "Network": "wnet", "EndpointID": "ec1", "ContainerID": "cafe01", "Labels": {"app": "db"}, "Event": "start"}
        assert world.post("/plugin/updateEndpoint", start).status_code == 200
        oper = world.get("/api/v1/inspect/endpoints/ec1/").json()["Oper"]
        assert oper["containerID"] == "cafe01" and oper["labels"] == "map[app:db]"
    finally:
        world.post("/plugin/deleteEndpoint", {"TenantName": "default", "NetworkName": "wnet", "EndpointID": "ec1"})

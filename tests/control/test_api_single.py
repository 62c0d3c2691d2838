"""The Contiv REST API against a real single-node contivd process."""

from __future__ import annotations

import httpx
import pytest

from contivd.api.routes import ROUTES, openapi_path
from contivd.http import auth
from tests.support.contivd_nodes import SECRET, ContivdProcess
from tests.support.waiting import wait_for

NET = {"tenantName": "default", "networkName": "net1", "encap": "vxlan", "subnet": "198.18.1.0/24", "gateway": "198.18.1.254"}


def ensure(node: ContivdProcess, path: str, body: dict) -> dict:
    answer = node.post(path, body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_defaults_exist_at_start(node: ContivdProcess) -> None:
    assert node.get("/api/v1/tenants/default/").json()["tenantName"] == "default"
    glob = node.get("/api/v1/globals/global/").json()
    assert glob["vlans"] == "1-4094" and glob["fwdMode"] == "bridge"
    assert node.get("/version").json()["Version"]


def test_network_lifecycle_and_contiv_shapes(node: ContivdProcess) -> None:
    created = ensure(node, "/api/v1/networks/default:net1/", NET)
    assert created["key"] == "default:net1" and created["nwType"] == "data"
    assert created["links"] == {"Tenant": {"type": "tenant", "key": "default"}}
    assert node.post("/api/v1/networks/default:net1/", NET).json() == created, "identical re-POST is a no-op"
    changed = node.post("/api/v1/networks/default:net1/", {**NET, "gateway": "198.18.1.1"})
    assert changed.status_code == 409 and "Cant change network parameters" in changed.json()["error"]
    inspect = node.get("/api/v1/inspect/networks/default:net1/").json()
    assert inspect["Oper"]["availableIPAddresses"] == "198.18.1.1-198.18.1.253"
    assert inspect["Oper"]["allocatedIPAddresses"] == "198.18.1.254"
    assert node.get("/api/v1/networks/").json()[0]["key"] == "default:net1"
    refused = node.delete("/api/v1/tenants/default/")
    assert refused.status_code == 409 and "networks" in refused.json()["error"]
    assert node.delete("/api/v1/networks/default:net1/").json() == "default:net1"
    assert node.get("/api/v1/networks/default:net1/").status_code == 404


@pytest.mark.parametrize(
    "path, body, status, words",
    [
        ("/api/v1/networks/default:bad/", {**NET, "networkName": "bad", "subnet": "198.18.2.0/33"}, 400, "subnet"),
        ("/api/v1/networks/default:other/", NET, 400, "Invalid Key"),
        ("/api/v1/networks/default:bad/", {**NET, "networkName": "bad", "bogus": 1}, 400, "bogus"),
        ("/api/v1/networks/default:bad/", {**NET, "networkName": "bad", "encap": "gre"}, 400, "encap"),
        ("/api/v1/networks/nope:bad/", {**NET, "tenantName": "nope", "networkName": "bad"}, 404, "Tenant"),
        ("/api/v1/policys/default:p/", {"tenantName": "default", "policyName": "p", "x": []}, 400, "x"),
    ],
)
def test_invalid_input_is_a_4xx_naming_the_problem_and_writes_nothing(node: ContivdProcess, path: str, body: dict, status: int, words: str) -> None:
    """Nothing but the audit trail's entry for the refused write (which moves the revision)."""
    collections = ("tenants", "networks", "policys")
    before = {c: node.get(f"/api/v1/{c}/").json() for c in collections}
    answer = node.post(path, body)
    assert answer.status_code == status and words in answer.json()["error"], answer.text
    assert {c: node.get(f"/api/v1/{c}/").json() for c in collections} == before
    refused = {"who": "root", "method": "POST", "route": "/api/v1/<collection>/<key>/", "object": path.split("/", 3)[3].strip("/"), "status": status}
    wait_for(lambda: any(refused.items() <= entry.items() for entry in node.get("/api/v1/audit/").json()), 10, f"the audit entry {refused}")


def test_malformed_requests(node: ContivdProcess) -> None:
    raw = node.request("POST", "/api/v1/tenants/t1/", content=b"{not json")
    assert raw.status_code == 400 and "not valid JSON" in raw.json()["error"]
    assert node.get("/api/v1/nonsense/").status_code == 404
    assert node.request("POST", "/plugin/createEndpoint", content=b"[1]").status_code == 400
    assert node.get("/api/v1/volumes/").json() == []


def endpoint(node: ContivdProcess, ep: str, network: str = "net2", group: str = "", ip: str = "") -> httpx.Response:
    return node.post(
        "/plugin/createEndpoint",
        {"TenantName": "default", "NetworkName": network, "ServiceName": group, "EndpointID": ep,
         "ConfigEP": {"Container": ep, "Host": "node0", "IPAddress": ip}},
    )  # fmt: skip


def test_ipam_pools_static_addresses_reuse_and_exhaustion(node: ContivdProcess) -> None:
    ensure(node, "/api/v1/networks/default:net2/", {**NET, "networkName": "net2", "subnet": "198.18.2.0/28", "gateway": "198.18.2.14"})
    ensure(
        node,
        "/api/v1/endpointGroups/default:pool/",
        {"tenantName": "default", "groupName": "pool", "networkName": "net2", "ipPool": "198.18.2.10-198.18.2.11"},
    )
    first = endpoint(node, "a").json()["EndpointConfig"]
    assert first["ipAddress"] == "198.18.2.1" and first["macAddress"] == "02:02:c6:12:02:01"
    assert endpoint(node, "a").json()["EndpointConfig"] == first, "createEndpoint is idempotent"
    pooled = endpoint(node, "p1", group="pool").json()["EndpointConfig"]
    assert pooled["ipAddress"] == "198.18.2.10" and pooled["endpointGroupId"] > 0
    assert endpoint(node, "p2", group="pool").json()["EndpointConfig"]["ipAddress"] == "198.18.2.11"
    exhausted = endpoint(node, "p3", group="pool")
    assert exhausted.status_code == 409 and "exhaustion in pool" in exhausted.json()["error"]
    taken = endpoint(node, "b", ip="198.18.2.1")
    assert taken.status_code == 409 and "already in use" in taken.json()["error"]
    assert endpoint(node, "c", ip="198.18.2.5").json()["EndpointConfig"]["ipAddress"] == "198.18.2.5"
    deleted = node.post("/plugin/deleteEndpoint", {"TenantName": "default", "NetworkName": "net2", "EndpointID": "a"})
    assert deleted.json()["EndpointConfig"]["ipAddress"] == "198.18.2.1"
    assert endpoint(node, "d").json()["EndpointConfig"]["ipAddress"] == "198.18.2.1", "a freed address is reused"
    oper = node.get("/api/v1/inspect/endpointGroups/default:pool/").json()["Oper"]
    assert oper["numEndpoints"] == 2 and oper["allocatedIPAddresses"] == "198.18.2.10-198.18.2.11"
    in_use = node.delete("/api/v1/endpointGroups/default:pool/")
    assert in_use.status_code == 409 and "active endpoints" in in_use.json()["error"]
    assert node.get("/api/v1/inspect/endpoints/net2.default-p1/").json()["Oper"]["ipAddress"][0] == "198.18.2.10"


def test_policy_rules_compile_into_state(node: ContivdProcess) -> None:
    ensure(node, "/api/v1/networks/default:net3/", {**NET, "networkName": "net3", "subnet": "198.18.3.0/24", "gateway": "198.18.3.254"})
    ensure(node, "/api/v1/policys/default:web-in/", {"tenantName": "default", "policyName": "web-in"})
    ensure(
        node,
        "/api/v1/rules/default:web-in:1/",
        {
            "tenantName": "default",
            "policyName": "web-in",
            "ruleId": "1",
            "direction": "in",
            "protocol": "tcp",
            "port": 80,
            "action": "allow",
            "priority": 10,
        },
    )
    ensure(node, "/api/v1/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "net3", "policies": ["web-in"]})
    rules = node.get("/debug/ofnet").json()["PolicyDb"]
    compiled = {k.rsplit(":", 1)[1]: v for k, v in rules.items() if k.startswith("default:web:default:web-in:")}
    assert set(compiled) == {"inRx", "inTx"}
    assert compiled["inRx"]["DstPort"] == 80 and compiled["inRx"]["IpProtocol"] == 6 and compiled["inRx"]["Action"] == "allow"
    busy = node.delete("/api/v1/policys/default:web-in/")
    assert busy.status_code == 409
    ensure(node, "/api/v1/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "net3", "policies": []})
    assert not [k for k in node.get("/debug/ofnet").json()["PolicyDb"] if k.startswith("default:web:")], "detach removes the rules"


def test_openapi_covers_every_route(node: ContivdProcess) -> None:
    document = node.get("/api/v1/openapi.json").json()
    for route in ROUTES:
        assert route.method.lower() in document["paths"][openapi_path(route.path)]


def test_bad_credentials_get_401_and_never_write(node: ContivdProcess) -> None:
    body = b'{"tenantName": "intruder"}'
    forged = auth.sign("not-the-secret", "POST", "/api/v1/tenants/intruder/", body)
    answer = httpx.post(node.url + "/api/v1/tenants/intruder/", content=body, headers={auth.SIGNATURE_HEADER: forged}, timeout=10)
    assert answer.status_code == 401
    bearer = httpx.post(node.url + "/api/v1/tenants/intruder/", content=body, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert bearer.status_code == 401
    assert node.get("/api/v1/tenants/intruder/").status_code == 404
    good = auth.sign(SECRET, "POST", "/api/v1/tenants/signed/", b'{"tenantName": "signed"}')
    signed = httpx.post(node.url + "/api/v1/tenants/signed/", content=b'{"tenantName": "signed"}', headers={auth.SIGNATURE_HEADER: good}, timeout=10)
    assert signed.status_code == 200


def test_sigterm_shuts_down_cleanly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.support.contivd_nodes import ContivdCluster

    cluster = ContivdCluster(tmp_path, 1)
    try:
        cluster.start()
        (only,) = cluster.nodes
        assert only.stop() == 0
        assert "contivd stopped" in only.log_text()
    finally:
        cluster.close()


def test_service_lb_vip_and_providers_follow_endpoint_labels(node: ContivdProcess) -> None:
    ensure(node, "/api/v1/networks/default:svcnet/", {**NET, "networkName": "svcnet", "subnet": "198.18.20.0/24", "gateway": "198.18.20.254"})
    ensure(node, "/api/v1/networks/default:apps/", {**NET, "networkName": "apps", "subnet": "198.18.21.0/24", "gateway": "198.18.21.254"})
    service = {"tenantName": "default", "serviceName": "web", "networkName": "svcnet", "selectors": ["app=web"], "ports": ["80:8080:TCP"]}
    ensure(node, "/api/v1/serviceLBs/default:web/", service)
    assert node.get("/api/v1/inspect/serviceLBs/default:web/").json()["Oper"] == {"serviceVip": "198.18.20.1"}, "omitempty"
    for ep in ("w1", "w2", "db"):
        assert endpoint(node, ep, network="apps").status_code == 200
    for ep, app in (("w1", "web"), ("w2", "web"), ("db", "db")):
        update = {"Tenant": "default", "Network": "apps", "EndpointID": ep, "Event": "start", "Labels": {"app": app, "tier": "x"}}
        assert node.post("/plugin/updateEndpoint", update).status_code == 200
    oper = node.get("/api/v1/inspect/serviceLBs/default:web/").json()["Oper"]
    assert oper["numProviders"] == 2 and sorted(p["ipAddress"][0] for p in oper["providers"]) == ["198.18.21.1", "198.18.21.2"]
    node.post("/plugin/deleteEndpoint", {"TenantName": "default", "NetworkName": "apps", "EndpointID": "w1"})
    state = node.get("/services").json()
    (web,) = [s for s in state if s["servicename"] == "web"]
    assert list(web["providers"]) == ["198.18.21.2:default"] and web["ipaddress"] == "198.18.20.1"
    bad = node.post("/api/v1/serviceLBs/default:bad/", {**service, "serviceName": "bad", "ports": ["80:http"]})
    assert bad.status_code == 400 and "ports" in bad.json()["error"]
    assert node.delete("/api/v1/serviceLBs/default:web/").status_code == 200
    assert node.get("/api/v1/inspect/networks/default:svcnet/").json()["Oper"]["allocatedIPAddresses"] == "198.18.20.254", "VIP released"


def test_contiv_error_compat_answers_500_text(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.support.contivd_nodes import ContivdCluster

    cluster = ContivdCluster(tmp_path, 1)
    cluster.nodes[0].extra = ("--contiv-error-compat",)
    try:
        cluster.start()
        answer = cluster.nodes[0].get("/api/v1/networks/default:none/")
        assert answer.status_code == 500 and answer.headers["content-type"].startswith("text/plain")
        assert answer.text.splitlines()[0] == "network not found", "Contiv's text first, contivd's detail after"
    finally:
        cluster.close()


def test_netprofile_reaches_group_state_and_global_ranges_guard_allocated_tags(node: ContivdProcess) -> None:
    ensure(
        node, "/api/v1/netprofiles/default:gold/", {"tenantName": "default", "profileName": "gold", "bandwidth": "10Mbps", "DSCP": 46, "burst": 3000}
    )
    ensure(
        node,
        "/api/v1/networks/default:vl/",
        {**NET, "networkName": "vl", "encap": "vlan", "pktTag": 3000, "subnet": "198.18.30.0/24", "gateway": "198.18.30.254"},
    )
    ensure(node, "/api/v1/endpointGroups/default:g1/", {"tenantName": "default", "groupName": "g1", "networkName": "vl", "netProfile": "gold"})
    busy = node.delete("/api/v1/netprofiles/default:gold/")
    assert busy.status_code == 409
    glob = node.get("/api/v1/globals/global/").json()
    shrink = {k: v for k, v in glob.items() if k not in ("key", "link-sets", "links")} | {"vlans": "1-2000"}
    refused = node.post("/api/v1/globals/global/", shrink)
    assert refused.status_code == 409 and "3000" in refused.json()["error"], refused.text
    duplicate = node.post(
        "/api/v1/networks/default:vl2/",
        {**NET, "networkName": "vl2", "encap": "vlan", "pktTag": 3000, "subnet": "198.18.31.0/24", "gateway": "198.18.31.254"},
    )
    assert duplicate.status_code == 409 and "3000" in duplicate.json()["error"]


def test_policy_hits_scopes_and_refuses_an_unknown_tenant_or_policy(node: ContivdProcess) -> None:
    ensure(node, "/api/v1/policys/default:hitsp/", {"tenantName": "default", "policyName": "hitsp"})
    whole = node.get("/policy/hits").json()
    assert set(whole) == {"rules", "compiled", "netpol", "defaultDrops", "unanswered"} and whole["unanswered"] == [], whole
    assert node.get("/policy/hits/default").json()["defaultDrops"] == []
    assert node.get("/policy/hits/default:hitsp").json() == {"rules": {}, "compiled": {}, "netpol": {}, "defaultDrops": [], "unanswered": []}
    for scope, message in (("nosuch", "tenant 'nosuch' not found"), ("default:nosuch", "policy default:nosuch not found")):
        refused = node.get(f"/policy/hits/{scope}")
        assert refused.status_code == 404 and message in refused.json()["error"], refused.text
        contiv = node.get(f"/policy/hits/{scope}", headers={"Accept": "*/*"})  # Contiv's contract: 500 and text (Decision 1)
        assert contiv.status_code == 500 and contiv.headers["content-type"].startswith("text/plain") and message in contiv.text

"""Access control against real contivd processes: roles generated from the route table, the
cluster secret refused from operators, token expiry and revocation on every node, the audit trail."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from contivd.api.routes import OPERATOR_COLLECTIONS, ROUTES, Route, required_role
from contivd.http.tokens import TOKEN_ROLES, Role
from tests.support.contivd_nodes import SECRET, ContivdProcess, running_cluster
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster
_names = itertools.count()


def call(node: ContivdProcess, method: str, path: str, token: str, body: bytes = b"{}") -> httpx.Response:
    headers = {"Accept": "application/json", "Authorization": f"Bearer {token}"}
    return httpx.request(method, node.url + path, content=body if method in ("POST", "PUT") else None, headers=headers, timeout=15)


def concrete(route: Route, collection: str) -> tuple[str, dict[str, str]]:
    """A path for `route` whose handler refuses or finds nothing (no write succeeds but a token's
    creation): the role check is what tells the roles apart."""
    params = {"collection": collection, "key": "nosuch:absent", "name": f"matrix-{next(_names)}", "tenant": "default", "category": "bogus"}
    used = {name: value for name, value in params.items() if f"<{name}>" in route.path}
    path = route.path
    for name, value in used.items():
        path = path.replace(f"<{name}>", value)
    return path, used


def matrix() -> list[tuple[Route, str]]:
    """Every route of the table; the object routes once for an admin-only collection and once per operator collection."""
    cases = []
    for route in ROUTES:
        collections = ["tenants", *sorted(OPERATOR_COLLECTIONS)] if "<collection>" in route.path else ["tenants"]
        cases += [(route, collection) for collection in collections]
    return cases


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_cluster(tmp_path_factory.mktemp("access"), 1) as cluster:
        yield cluster.nodes[0]


@pytest.fixture(scope="module")
def tokens(node: ContivdProcess) -> dict[Role, str]:
    return {role: node.mint_token(f"matrix-{role.label}", role.label) for role in TOKEN_ROLES}


def test_every_route_declares_a_role() -> None:
    for route in ROUTES:
        assert route.role in TOKEN_ROLES, route
        assert route.write or route.role is Role.VIEWER or route.path.startswith("/api/v1/auth/"), f"a read needs more than viewer: {route}"


@pytest.mark.parametrize("route, collection", matrix(), ids=lambda v: v.method + " " + v.path if isinstance(v, Route) else v)
def test_each_role_can_do_what_the_table_says_and_no_more(node: ContivdProcess, tokens: dict[Role, str], route: Route, collection: str) -> None:
    for role, token in tokens.items():
        path, params = concrete(route, collection)
        needed = required_role(route, params)
        answer = call(node, route.method, path, token, b'{"bogus": 1}')
        if role >= needed:
            assert answer.status_code not in (401, 403), f"{role.label} refused {route.method} {path}: {answer.text}"
        else:
            assert answer.status_code == 403, f"{role.label} allowed {route.method} {path}: {answer.text}"
            assert f"needs role {needed.label}" in answer.json()["error"]


def test_the_cluster_secret_is_refused_as_an_operator_token(node: ContivdProcess) -> None:
    for method, path in (("GET", "/api/v1/tenants/"), ("POST", "/api/v1/tenants/viasecret/"), ("GET", "/metrics"), ("GET", "/status/api/node")):
        answer = call(node, method, path, SECRET, b'{"tenantName": "viasecret"}')
        assert answer.status_code == 401, (path, answer.text)
        assert "cluster secret is accepted from cluster nodes only" in answer.json()["error"]
    assert node.get("/api/v1/tenants/viasecret/").status_code == 404, "nothing written"


def test_unknown_and_expired_tokens_get_401_with_the_reason(node: ContivdProcess) -> None:
    unknown = call(node, "GET", "/api/v1/tenants/", "ctd1.nobody.AAAA")
    assert unknown.status_code == 401 and unknown.json()["error"] == "unknown token"
    minted = node.mint_token("short-lived", "viewer", ttl=1)
    forged = minted[:-4] + ("AAAA" if not minted.endswith("AAAA") else "BBBB")
    assert call(node, "GET", "/api/v1/tenants/", forged).json()["error"] == "unknown token", "the name alone is not enough"
    expired = wait_for(lambda: (a := call(node, "GET", "/api/v1/tenants/", minted)).status_code == 401 and a, 30, "the token to expire")
    assert expired.json()["error"] == "token 'short-lived' expired"


def test_token_lifecycle_and_bad_requests(node: ContivdProcess, tokens: dict[Role, str]) -> None:
    admin = tokens[Role.ADMIN]
    created = call(node, "POST", "/api/v1/auth/tokens/life/", admin, b'{"role": "operator", "ttl": 3600}')
    assert created.status_code == 200 and created.json()["token"].startswith("ctd1.life.")
    listed = {r["name"]: r for r in call(node, "GET", "/api/v1/auth/tokens/", admin).json()}
    assert listed["life"]["role"] == "operator" and "token" not in listed["life"] and "digest" not in listed["life"]
    again = call(node, "POST", "/api/v1/auth/tokens/life/", admin, b'{"role": "operator"}')
    assert again.status_code == 409 and "revoke it first" in again.json()["error"]
    for body, words in ((b'{"role": "root"}', "role must be one of"), (b'{"role": "node"}', "role must be one of"),
                        (b'{"role": "viewer", "ttl": -1}', "ttl"), (b'{"role": "viewer", "x": 1}', "the body must be"), (b"[1", "not valid JSON")):  # fmt: skip
        refused = call(node, "POST", "/api/v1/auth/tokens/bad/", admin, body)
        assert refused.status_code == 400 and words in refused.json()["error"], (body, refused.text)
    bad_name = call(node, "POST", "/api/v1/auth/tokens/-x/", admin, b'{"role": "viewer"}')
    assert bad_name.status_code == 400 and "token name" in bad_name.json()["error"]
    assert call(node, "DELETE", "/api/v1/auth/tokens/nosuch/", admin).status_code == 404
    assert call(node, "DELETE", "/api/v1/auth/tokens/life/", admin).status_code == 200
    revoked = call(node, "GET", "/api/v1/tenants/", created.json()["token"])
    assert revoked.status_code == 401 and revoked.json()["error"] == "token 'life' has been revoked"
    assert call(node, "POST", "/api/v1/auth/tokens/life/", admin, b'{"role": "viewer"}').status_code == 200, "a revoked name may be reused"


def test_revocation_applies_on_every_node_within_a_second(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 3) as cluster:
        leader, follower = cluster.leader(), cluster.followers()[0]
        admin = follower.mint_token("cluster-admin")  # minted through a follower: forwarded to the leader
        viewer = call(follower, "POST", "/api/v1/auth/tokens/doomed/", admin, b'{"role": "viewer"}').json()["token"]
        for node in cluster.nodes:
            wait_for(lambda n=node: call(n, "GET", "/api/v1/tenants/", viewer).status_code == 200, 10, f"{node.name} to accept the token")
        assert call(follower, "DELETE", "/api/v1/auth/tokens/doomed/", admin).status_code == 200
        revoked_at = time.monotonic()
        for node in cluster.nodes:
            wait_for(lambda n=node: call(n, "GET", "/api/v1/tenants/", viewer).status_code == 401, 10, f"{node.name} to refuse the token")
        elapsed = time.monotonic() - revoked_at
        assert elapsed < 1.0, f"the revocation took {elapsed:.2f} s to reach every node"
        entries = call(leader, "GET", "/api/v1/audit/", admin).json()
        assert {"who": "token:cluster-admin", "method": "DELETE", "object": "doomed", "status": 200}.items() <= entries[-1].items() or any(
            {"who": "token:cluster-admin", "method": "DELETE", "object": "doomed", "status": 200}.items() <= e.items() for e in entries
        ), "a forwarded write is audited under the caller's name"


def test_audit_entries_for_every_write_of_a_session(tmp_path: Path) -> None:
    net = {"tenantName": "default", "networkName": "audited", "encap": "vxlan", "subnet": "198.18.7.0/24", "gateway": "198.18.7.254"}
    with running_cluster(tmp_path, 3) as cluster:
        follower = cluster.followers()[0]
        admin = follower.mint_token("session-admin")
        operator = call(follower, "POST", "/api/v1/auth/tokens/session-op/", admin, b'{"role": "operator"}').json()["token"]
        session = [  # (token, method, path, body, status, object)
            (admin, "POST", "/api/v1/networks/default:audited/", json.dumps(net), 200, "networks/default:audited"),
            (operator, "POST", "/api/v1/netprofiles/default:slow/", json.dumps({"tenantName": "default", "profileName": "slow", "bandwidth": "10 mbps"}), 200, "netprofiles/default:slow"),
            (operator, "DELETE", "/api/v1/networks/default:audited/", "", 403, "networks/default:audited"),
            (admin, "POST", "/api/v1/tenants/default:bad/", json.dumps({"bogus": 1}), 400, "tenants/default:bad"),
            (operator, "DELETE", "/api/v1/netprofiles/default:slow/", "", 200, "netprofiles/default:slow"),
            (admin, "DELETE", "/api/v1/networks/default:audited/", "", 200, "networks/default:audited"),
        ]  # fmt: skip
        who = {admin: "token:session-admin", operator: "token:session-op"}
        for token, method, path, body, status, _ in session:
            answer = call(follower, method, path, token, body.encode())
            assert answer.status_code == status, (path, answer.text)
        expected = [(who[t], m, o, s) for t, m, _, _, s, o in session]

        def trail() -> list[tuple[str, str, str, int]] | None:
            entries = call(cluster.leader(), "GET", "/api/v1/audit/", admin).json()
            seen = [(e["who"], e["method"], e["object"], e["status"]) for e in entries if e["who"] in who.values() and "/auth/" not in e["route"]]
            return seen if seen == expected else None

        wait_for(trail, 15, f"the audit trail to hold {expected}")


# The routes registered beside the table (status page, metrics, import, snapshot): their roles.
OTHER_ROUTES = (
    ("GET", "/", Role.VIEWER),
    ("GET", "/status/api/snapshot", Role.VIEWER),
    ("GET", "/status/api/node", Role.VIEWER),
    ("GET", "/metrics", Role.VIEWER),
    ("GET", "/contivd/snapshot", Role.ADMIN),
    ("POST", "/contivd/import", Role.ADMIN),
)


@pytest.mark.parametrize("method, path, needed", OTHER_ROUTES)
def test_routes_beside_the_table_check_their_roles(node: ContivdProcess, tokens: dict[Role, str], method: str, path: str, needed: Role) -> None:
    for role, token in tokens.items():
        answer = call(node, method, path, token, b"{}")
        if role >= needed:
            assert answer.status_code not in (401, 403), f"{role.label} refused {method} {path}: {answer.text[:200]}"
        else:
            assert answer.status_code == 403 and f"needs role {needed.label}" in answer.json()["error"], (role, answer.text)

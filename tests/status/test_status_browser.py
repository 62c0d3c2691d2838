"""The status page in a real browser: Debian's chromium driven by Playwright, against a real contivd."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.contivd_nodes import CHROMIUM, CHROMIUM_ARGS, ContivdProcess, running_cluster

MARKUP = "<img src=x onerror=alert(1)>"

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed (packaging/deps.sh installs it)"),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright  # imported here: collecting must not need it when chromium is absent

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            yield instance
        finally:
            instance.close()


def test_page_renders_updates_live_and_shows_markup_as_text(node: ContivdProcess, browser: Any) -> None:
    from playwright.sync_api import expect

    body = {"tenantName": "default", "networkName": "browser-net", "encap": "vxlan", "subnet": "198.18.30.0/24", "gateway": "198.18.30.254"}
    assert node.post("/api/v1/networks/default:browser-net/", body).status_code == 200
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type in ("error", "warning") else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: problems.append(f"request failed: {req.url}") if "/status/events" not in req.url else None)
    page.add_init_script("window.alert = () => { document.documentElement.dataset.alerted = 'yes'; };")
    try:
        page.goto(node.url + "/")
        page.wait_for_selector("body[data-ready=true]", timeout=15000)
        assert "node0" in page.inner_text("#summary")
        assert page.locator("#members tr.leader .name").inner_text() == "node0"
        assert "quorum yes · can commit yes" in page.inner_text("#footer")
        assert page.locator("#diagram g.node.leader").count() == 1
        row = page.locator("#networks tr", has_text="browser-net")
        assert "198.18.30.0/24" in row.inner_text() and "0 / 253" in row.inner_text(), "no endpoint yet; the gateway is not counted"
        page.wait_for_selector("#live.on", timeout=10000)

        started = time.monotonic()
        create = {
            "TenantName": "default",
            "NetworkName": "browser-net",
            "EndpointID": "live-pod",
            "ConfigEP": {"Container": "live-pod", "Host": "node0"},
        }
        assert node.post("/plugin/createEndpoint", create).status_code == 200
        update = {
            "Tenant": "default",
            "Network": "browser-net",
            "EndpointID": "live-pod",
            "Event": "start",
            "Labels": {"note": MARKUP},
            "EPCommonName": MARKUP,
        }
        assert node.post("/plugin/updateEndpoint", update).status_code == 200
        page.wait_for_selector("#endpoints td.labels:has-text('onerror')", timeout=10000)
        print(f"endpoint shown {time.monotonic() - started:.3f}s after the API calls started (no reload)")
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1, "the page was not reloaded"

        pod_row = page.locator("#endpoints tr", has_text="live-pod")
        assert pod_row.locator("td.labels").inner_text() == f"note={MARKUP}"
        assert pod_row.locator("td").nth(1).inner_text() == MARKUP
        assert pod_row.locator("td.datapath").inner_text() == "–", "no node reports a datapath for it (this node runs none)"
        assert page.locator("img").count() == 0, "markup in user strings must stay text"
        assert page.evaluate("document.documentElement.dataset.alerted") is None

        page.fill("#ep-search", "live-pod")
        expect(page.locator("#endpoints tbody tr")).to_have_count(1)
        assert page.locator("#endpoints tbody td.name").inner_text() == "live-pod"
        page.fill("#ep-search", "no-such-endpoint")
        expect(page.locator("#endpoints tbody")).to_contain_text("no endpoint matches the filter")
        assert problems == [], problems
    finally:
        page.close()


def test_page_traces_a_packet_between_two_picked_endpoints(node: ContivdProcess, browser: Any) -> None:
    from playwright.sync_api import expect

    body = {"tenantName": "default", "networkName": "trace-net", "encap": "vxlan", "subnet": "198.18.31.0/24", "gateway": "198.18.31.254"}
    assert node.post("/api/v1/networks/default:trace-net/", body).status_code == 200
    for name in ("trace-a", "trace-b"):
        create = {"TenantName": "default", "NetworkName": "trace-net", "EndpointID": name, "ConfigEP": {"Container": name, "Host": "node0"}}
        assert node.post("/plugin/createEndpoint", create).status_code == 200
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    try:
        page.goto(node.url + "/")
        page.wait_for_selector("body[data-ready=true]", timeout=15000)
        expect(page.locator("#trace-endpoints option[label^='trace-b on node0']")).to_have_count(1, timeout=10000)
        src = page.locator("#trace-endpoints option[label^='trace-a on']").get_attribute("value")
        dst = page.locator("#trace-endpoints option[label^='trace-b on']").get_attribute("value")
        assert src and dst and src.startswith("198.18.31.") and dst.startswith("198.18.31.")
        page.fill("#trace-src", src)
        page.fill("#trace-dst", dst)
        page.fill("#trace-port", "tcp/5432")
        page.click("#trace-form button")
        expect(page.locator("#trace")).to_contain_text("ALLOW", timeout=15000)
        assert f"{src} → {dst}" in page.inner_text("#trace")
        assert page.locator("#trace tbody tr", has_text="not isolated for").count() == 2, "no NetworkPolicy: no rule"
        assert page.locator("#trace tbody tr", has_text="no Contiv rule matches (default allow)").count() == 1, "no Contiv rule either"
        assert "runs no agent" in page.inner_text("#trace"), "this node runs no datapath: its OVS half is named as unanswered"

        # An answer with a disagreement (real ones: tests/k8s/test_netpol_datapath.py) is shown loudly.
        page.evaluate(
            """renderTrace({src: "198.18.31.1", dst: "198.18.31.2", verdict: "drop", deciding: "default:b:default:p:default:p:1:inRx",
              contiv: {kind: "contiv", table: "policy", policy: "default:p", rule: "default:b:default:p:default:p:1:inRx", action: "deny", priority: 15},
              reasons: ["policy: deny by it", "np_egress: not reached", "np_ingress: not reached"],
              ovs: {node: "n1", bridge: "contivVxlanBridge", verdict: "allow", datapath_actions: "set(tunnel(dst=198.19.0.2)),4"},
              ovs_destination: {node: "n2", unanswered: "node n2's agent did not answer"},
              agree: false, disagreements: ["the source's node n1: OVS says allow, the model drop"]})"""
        )
        shown = page.inner_text("#trace")
        assert "DISAGREEMENT: the source's node n1: OVS says allow, the model drop" in shown and "node n2's agent did not answer" in shown
        assert page.locator("#trace tbody tr", has_text="default:p").count() == 1 and "OVS on n1 (source, contivVxlanBridge)" in shown

        page.fill("#trace-port", "gre/1")
        page.click("#trace-form button")
        expect(page.locator("#trace .disagree")).to_contain_text("trace failed: ", timeout=15000)
        assert "protocol 'gre'" in page.inner_text("#trace"), "the API's reason is shown"
        assert problems == [], problems
    finally:
        page.close()


def test_policy_matrix_shows_each_cells_hits_default_drops_and_silent_nodes(node: ContivdProcess, browser: Any) -> None:
    """The page renders /policy/hits as the API answers it. This node runs no datapath, so the
    answer is replaced by one with counts (real counts: tests/agent/test_datapath.py and
    tests/k8s/test_netpol_datapath.py read the same route after real traffic)."""
    from playwright.sync_api import Route, expect

    net = {"tenantName": "default", "networkName": "hits-net", "encap": "vxlan", "subnet": "198.18.32.0/24", "gateway": "198.18.32.254"}
    rule = {
        "tenantName": "default",
        "policyName": "hits-p",
        "ruleId": "1",
        "direction": "in",
        "protocol": "tcp",
        "port": 5432,
        "action": "deny",
        "priority": 5,
    }
    for path, body in (
        ("/api/v1/networks/default:hits-net/", net),
        ("/api/v1/policys/default:hits-p/", {"tenantName": "default", "policyName": "hits-p"}),
        ("/api/v1/rules/default:hits-p:1/", rule),
        (
            "/api/v1/endpointGroups/default:hits-db/",
            {"tenantName": "default", "groupName": "hits-db", "networkName": "hits-net", "policies": ["hits-p"]},
        ),
    ):
        assert node.post(path, body).status_code == 200, path
    real = node.get("/policy/hits").json()
    assert real["unanswered"] == [] and real["compiled"] == {}, "no datapath on this node: nothing counted"
    matrix = next(m for m in node.get("/status/api/snapshot").json()["store"]["policy"] if m["group"] == "hits-db")
    deciding = {rule_id for row in matrix["rows"] for action, rule_id in row["cells"] if action == "deny"}
    assert len(deciding) == 1, matrix
    counted = {
        **real,
        "compiled": {deciding.pop(): {"packets": 1234, "bytes": 98765}},
        "netpol": {"prod/db-in/ingress/0": {"packets": 7, "bytes": 700}},
        "defaultDrops": [{"tenant": "prod", "group": "db", "direction": "ingress", "packets": 3, "bytes": 180}],
        "unanswered": ["node9"],
    }
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def answer(route: Route) -> None:
        route.fulfill(status=200, content_type="application/json", body=json.dumps(counted))

    page.route("**/policy/hits", answer)
    try:
        page.goto(node.url + "/")
        page.wait_for_selector("body[data-ready=true]", timeout=15000)
        cell = page.locator("#policy .matrix", has_text="hits-db").locator("td.cell.deny").first
        expect(cell.locator("small.hits")).to_have_text("1,234", timeout=10000)
        assert "98,765 bytes" in (cell.get_attribute("title") or "")
        hits = page.locator("#policy-hits")
        expect(hits).to_contain_text("not counted: node9 did not answer")
        assert "prod/db-in/ingress/0" in hits.inner_text() and "Dropped by default" in hits.inner_text()
        assert page.locator("#policy-hits tr", has_text="ingress").filter(has_text="180").count() == 1
        assert problems == [], problems
    finally:
        page.close()


def test_page_names_an_unreachable_member_and_when_this_node_cannot_commit(tmp_path: Path, browser: Any) -> None:
    from playwright.sync_api import expect

    with running_cluster(tmp_path, 3) as cluster:
        leader = cluster.leader()
        first, second = cluster.followers()
        page = browser.new_page()
        try:
            page.goto(leader.url + "/")
            page.wait_for_selector("body[data-ready=true]", timeout=15000)
            first.kill()
            expect(page.locator("#cluster-note .unreachable")).to_contain_text(
                f"has no Raft link to {first.name} ({first.raft}) since", timeout=30000
            )
            expect(page.locator("#footer")).to_contain_text("can commit yes")
            second.kill()
            expect(page.locator("#commit-blocked")).to_contain_text("cannot commit: it reaches 1 of 3 voters, a majority is 2", timeout=30000)
            expect(page.locator("#footer")).to_contain_text("can commit NO")
        finally:
            page.close()

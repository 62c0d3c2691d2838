"""The status page's HTTP surface against real contivd processes: page, snapshot, reports, events."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.contivd_nodes import SECRET, ContivdProcess, running_cluster
from tests.support.waiting import wait_for

from .conftest import EventStream

pytestmark = pytest.mark.cluster
MARKUP = "<img src=x onerror=alert(1)>"


def create_network(node: ContivdProcess, name: str, subnet: str, gateway: str) -> None:
    body = {"tenantName": "default", "networkName": name, "encap": "vxlan", "subnet": subnet, "gateway": gateway}
    answer = node.post(f"/api/v1/networks/default:{name}/", body)
    assert answer.status_code == 200, answer.text


def create_endpoint(node: ContivdProcess, network: str, name: str, client: httpx.Client | None = None) -> None:
    body = {"TenantName": "default", "NetworkName": network, "EndpointID": name, "ConfigEP": {"Container": name, "Host": "node0"}}
    answer = client.post("/plugin/createEndpoint", json=body) if client else node.post("/plugin/createEndpoint", body)
    assert answer.status_code == 200, answer.text


def test_page_and_assets_are_served_with_a_strict_policy(node: ContivdProcess) -> None:
    page = node.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'src="/status/static/status.js"' in page.text and "http" not in page.text.replace("http-equiv", ""), "no external resources"
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name, kind in (("status.js", "text/javascript"), ("status.css", "text/css")):
        asset = node.get(f"/status/static/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    assert "innerHTML" not in node.get("/status/static/status.js").text
    assert node.post("/", {}).status_code == 405 and node.post("/status/api/snapshot", {}).status_code == 405, "read-only"
    missing = node.get("/status/static/other.js")
    assert missing.status_code == 404 and "other.js" in missing.json()["error"]


def test_reads_need_loopback_or_a_token(node: ContivdProcess) -> None:
    for path in ("/", "/status/api/snapshot", "/status/api/node", "/status/events"):
        forged = node.get(path, headers={"X-Contivd-Signature": "1:00"})
        assert forged.status_code == 401 and "signature" in forged.json()["error"], path
    assert node.get("/status/api/node", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert node.get("/status/api/node", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 401, "the secret is for nodes only"
    viewer = node.mint_token("status-viewer", "viewer")
    assert node.get("/status/api/node", headers={"Authorization": f"Bearer {viewer}"}).status_code == 200


def test_snapshot_shows_networks_endpoints_and_the_leader(node: ContivdProcess) -> None:
    create_network(node, "snap", "198.18.16.0/24", "198.18.16.254")
    create_endpoint(node, "snap", "snap-1")
    labels = {"Tenant": "default", "Network": "snap", "EndpointID": "snap-1", "Event": "start", "Labels": {"app": MARKUP}, "EPCommonName": MARKUP}
    assert node.post("/plugin/updateEndpoint", labels).status_code == 200
    snap = node.get("/status/api/snapshot").json()
    assert snap["cluster"]["leader"] == "node0" and snap["cluster"]["members"][0]["health"] == "ok"
    net = next(n for n in snap["store"]["networks"] if n["name"] == "snap")
    assert (net["subnet"], net["allocated"], net["total"], net["endpoints"]) == ("198.18.16.0/24", 1, 253, 1)
    row = next(r for r in snap["store"]["endpoints"]["rows"] if r[0] == "snap-1")
    assert row[1] == MARKUP and row[7] == f"app={MARKUP}"
    report = node.get("/status/api/node").json()
    assert report["name"] == "node0" and report["store"]["role"] == "leader" and report["agent"] is None
    written = {"who": "root", "method": "POST", "route": "/plugin/updateEndpoint", "status": 200}
    writes = wait_for(
        lambda: (w := node.get("/status/api/snapshot").json()["writes"]) and written.items() <= w[0].items() and w, 10, "the last write shown"
    )
    assert "EndpointID=snap-1" in writes[0]["object"] and len(writes) <= 20


def test_events_announce_a_new_endpoint_and_batch_a_burst(node: ContivdProcess) -> None:
    create_network(node, "live", "198.18.20.0/22", "198.18.23.254")
    stream = EventStream(node.url + "/status/events")
    try:
        cluster = stream.next("cluster")
        assert cluster["leader"] == "node0"
        before = node.get("/status/api/snapshot").json()["revision"]
        stream.drain()
        started = time.monotonic()
        create_endpoint(node, "live", "live-1")
        event = stream.next("store", timeout=5)
        while event["revision"] <= before:  # the network's own event, sent after drain() (events are batched)
            assert time.monotonic() - started < 5, f"no store event after revision {before}"
            event = stream.next("store", timeout=5)
        print(f"store event {time.monotonic() - started:.3f}s after the endpoint was created")
        assert event["revision"] > before
        rows = node.get("/status/api/snapshot").json()["store"]["endpoints"]["rows"]
        assert any(r[0] == "live-1" for r in rows)

        writes = 300
        stream.drain()
        with node.socket_client(timeout=15) as client:
            threads = [
                threading.Thread(target=lambda k=k: [create_endpoint(node, "live", f"burst-{k}-{i}", client) for i in range(writes // 6)])
                for k in range(6)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        wait_for(lambda: len(node.get("/status/api/snapshot").json()["store"]["endpoints"]["rows"]) >= writes + 2, 10, "the burst in the snapshot")
        last = node.get("/status/api/snapshot").json()["revision"]
        seen = [data["revision"] for kind, data in stream.drain() if kind == "store"]
        while not seen or seen[-1] < last:
            seen.append(stream.next("store", timeout=5)["revision"])
        print(f"{writes} endpoint writes → {len(seen)} store events")
        assert len(seen) < writes / 5, f"{len(seen)} events for {writes} writes: not batched"
    finally:
        stream.close()


def test_three_nodes_report_each_other(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 3) as cluster:
        follower = cluster.followers()[0]
        snap = follower.get("/status/api/snapshot").json()
        members = {m["name"]: m for m in snap["cluster"]["members"]}
        assert set(members) == {"node0", "node1", "node2"}
        assert all(m["health"] == "ok" and m["term"] is not None and m["commitIndex"] is not None for m in members.values()), members
        leader = cluster.leader()
        assert [m["name"] for m in members.values() if m["leader"]] == [leader.name] == [snap["cluster"]["leader"]]
        assert len(snap["cluster"]["tunnels"]) == 0, "loopback nodes share one VTEP address: no tunnels between them"
        victim = next(n for n in cluster.followers() if n is not follower)
        victim.kill()
        wait_for(
            lambda: {m["name"]: m["health"] for m in follower.get("/status/api/snapshot").json()["cluster"]["members"]}[victim.name] == "down",
            15,
            "the killed node shown down",
            interval=0.3,
        )

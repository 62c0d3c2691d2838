"""`/metrics`, `/healthz`, `/readyz` on a real contivd: values agree with what the API says."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.contivd_nodes import SECRET, ContivdProcess


def scrape(node: ContivdProcess, **kwargs: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = node.get("/metrics", **kwargs)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_agree_with_the_api(node: ContivdProcess) -> None:
    network = {"tenantName": "default", "networkName": "metrics-net", "encap": "vxlan", "subnet": "198.18.4.0/28", "gateway": "198.18.4.14"}
    assert node.post("/api/v1/networks/default:metrics-net/", network).status_code == 200
    hosts = ["metrics-a", "metrics-a", "metrics-a", "metrics-b"]
    for index, host in enumerate(hosts):
        request = {
            "TenantName": "default",
            "NetworkName": "metrics-net",
            "EndpointID": f"m{index}",
            "ConfigEP": {"Container": f"m{index}", "Host": host},
        }
        assert node.post("/plugin/createEndpoint", request).status_code == 200
    assert node.get("/api/v1/networks/no-such-net/").status_code == 404

    samples = scrape(node)
    inspect = node.get("/api/v1/inspect/networks/default:metrics-net/").json()["Oper"]
    assert samples[("contivd_ipam_allocated_addresses", (("network", "metrics-net.default"),))] == inspect["allocatedAddressesCount"] == 4
    assert samples[("contivd_ipam_total_addresses", (("network", "metrics-net.default"),))] == 13  # 14 hosts less the gateway
    endpoints = node.get("/api/v1/inspect/networks/default:metrics-net/").json()["Oper"]["endpoints"]
    for host in ("metrics-a", "metrics-b"):
        on_host = sum(1 for ep in endpoints if ep["homingHost"] == host)
        assert samples[("contivd_endpoints", (("node", host),))] == on_host == hosts.count(host)

    info = node.get("/info").json()["cluster"]
    assert samples[("contivd_raft_is_leader", ())] == 1
    assert samples[("contivd_raft_term", ())] == info["term"]
    assert samples[("contivd_raft_commit_index", ())] >= 1 and samples[("contivd_raft_applied_index", ())] >= 1
    assert samples[("contivd_raft_apply_seconds_count", ())] >= 5  # the network and four endpoints at least
    assert ("contivd_agent_switch_connected", ()) not in samples  # --datapath none: no agent metrics

    created = (("method", "POST"), ("route", "/plugin/createEndpoint"), ("status", "200"))
    assert samples[("contivd_api_request_seconds_count", created)] == 4
    assert samples[("contivd_api_request_seconds_bucket", (("le", "+Inf"), *created))] == 4
    not_found = (("method", "GET"), ("route", "/api/v1/<collection>/<key>/"), ("status", "404"))
    assert samples[("contivd_api_request_seconds_count", not_found)] >= 1


def test_metrics_need_a_token_of_any_role(node: ContivdProcess) -> None:
    assert node.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert node.get("/metrics", headers={"Authorization": f"Bearer {SECRET}"}).status_code == 401, "the cluster secret is for nodes only"
    viewer = node.mint_token("metrics-viewer", "viewer")
    assert ("contivd_raft_is_leader", ()) in scrape(node, headers={"Authorization": f"Bearer {viewer}"})


def test_cni_histogram_is_exported_per_registry() -> None:
    from contivd import metrics

    metrics.observe_cni("add", 0.004, True)
    metrics.observe_cni("DEL", 0.5, False)
    text = generate(metrics)
    assert 'contivd_cni_request_seconds_count{op="ADD",result="ok"}' in text
    assert 'contivd_cni_request_seconds_count{op="DEL",result="error"}' in text


def generate(module: Any) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(module.CNI_SECONDS)
    return generate_latest(registry).decode()


def test_healthz_and_readyz(node: ContivdProcess) -> None:
    assert node.get("/healthz").json() == {"status": "ok"}
    ready = node.get("/readyz")
    revision = ready.json()["store"]["revision"]
    assert revision > 0
    assert ready.status_code == 200 and ready.json() == {
        "ready": True,
        "failing": {},
        "store": {"role": "voter", "revision": revision, "followers": 0},
        "raft": {"can_commit": True, "commit_blockers": [], "unreachable": []},
    }


def test_readyz_is_503_with_the_failing_checks_when_the_store_has_no_leader(cluster3: Any) -> None:
    leader = cluster3.leader()
    survivor = cluster3.followers()[0]
    for other in cluster3.nodes:
        if other is not survivor:
            other.kill()

    def not_ready() -> httpx.Response | None:
        answer = survivor.get("/readyz")
        return answer if answer.status_code == 503 else None

    from tests.support.waiting import wait_for

    answer = wait_for(not_ready, 30, "/readyz to report the lost quorum", interval=0.2)
    assert "store_leader" in answer.json()["failing"] and answer.json()["ready"] is False
    assert survivor.get("/healthz").status_code == 200  # alive, just not ready
    assert leader is not survivor

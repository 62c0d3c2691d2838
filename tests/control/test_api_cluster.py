"""Three contivd processes on loopback: any node answers, the leader executes writes."""

from __future__ import annotations

import ipaddress
import re
import threading
import time

import httpx
import pytest

from tests.support.contivd_nodes import ContivdCluster, ContivdProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.cluster

NET = {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": "198.18.0.0/20", "gateway": "198.18.15.254"}


def test_writes_sent_to_followers_are_forwarded_to_the_leader(cluster3: ContivdCluster) -> None:
    follower = cluster3.followers()[0]
    created = follower.post("/api/v1/networks/default:pods/", NET)
    assert created.status_code == 200, created.text
    for node in cluster3.nodes:
        assert node.get("/api/v1/networks/default:pods/").json()["subnet"] == "198.18.0.0/20"
    bad = follower.post("/api/v1/networks/default:x/", {**NET, "networkName": "x", "subnet": "nonsense"})
    assert bad.status_code == 400 and "subnet" in bad.json()["error"], "errors come back through the forwarder"
    info = follower.get("/info").json()
    assert info["current-state"] == "follower" and len(info["nodes"]) == 3
    assert info["leader-ip"] == cluster3.leader().url


def test_concurrent_create_endpoint_from_three_nodes_never_duplicates_an_address(cluster3: ContivdCluster) -> None:
    assert cluster3.nodes[0].post("/api/v1/networks/default:pods/", NET).status_code == 200
    answers: list[httpx.Response] = []

    def burst(node: ContivdProcess) -> None:
        with node.socket_client(timeout=30) as client:
            for i in range(40):
                ep = f"{node.name}-{i}"
                answers.append(client.post("/plugin/createEndpoint", json={
                    "TenantName": "default", "NetworkName": "pods", "EndpointID": ep, "ConfigEP": {"Container": ep}}))  # fmt: skip

    threads = [threading.Thread(target=burst, args=(n,)) for n in cluster3.nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200][:3]
    addresses = [a.json()["EndpointConfig"]["ipAddress"] for a in answers]
    assert len(addresses) == 120 and len(set(addresses)) == 120
    assert sorted(cluster3.nodes[1].endpoint_addresses().values(), key=ipaddress.ip_address) == sorted(addresses, key=ipaddress.ip_address)


def test_leader_sigkill_during_create_endpoint_stream_loses_and_leaks_nothing(cluster3: ContivdCluster) -> None:
    leader = cluster3.leader()
    writer = next(n for n in cluster3.nodes if n is not leader)
    assert writer.post("/api/v1/networks/default:pods/", NET).status_code == 200
    acknowledged: dict[str, str] = {}
    attempted: list[str] = []
    stop = threading.Event()

    def stream() -> None:
        i = 0
        with writer.socket_client(timeout=30, headers={"Accept": "application/json"}) as client:  # typed errors: 503 while no leader
            while not stop.is_set():
                ep = f"ep{i}"
                attempted.append(ep)
                try:
                    answer = client.post("/plugin/createEndpoint", json={
                        "TenantName": "default", "NetworkName": "pods", "EndpointID": ep, "ConfigEP": {"Container": ep}})  # fmt: skip
                    if answer.status_code == 200:
                        acknowledged[ep] = answer.json()["EndpointConfig"]["ipAddress"]
                    else:
                        assert answer.status_code == 503, answer.text  # only "no leader yet" is acceptable
                except httpx.HTTPError:
                    pass
                i += 1

    thread = threading.Thread(target=stream)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while len(acknowledged) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        leader.kill()
        count = len(acknowledged)
        while len(acknowledged) < count + 30 and time.monotonic() < deadline + 30:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(60)
    assert len(acknowledged) >= count + 30, "creation resumed under the new leader"
    stored = writer.endpoint_addresses()
    assert all(stored.get(ep) == ip for ep, ip in acknowledged.items()), "every acknowledged endpoint exists as answered"
    assert len(set(stored.values())) == len(stored), "no address is used twice"
    oper = writer.get("/api/v1/inspect/networks/default:pods/").json()["Oper"]
    assert oper["numEndpoints"] == len(stored) and oper["allocatedAddressesCount"] == len(stored), "no address leaked"
    assert set(stored) <= set(attempted)


def test_a_leader_stopped_on_purpose_hands_the_leadership_over_before_it_exits(cluster3: ContivdCluster) -> None:
    """SIGTERM to the leader (a restart, a rolling upgrade): before exiting it names the voter
    it handed the leadership to, and the other two follow that voter and take writes."""
    old = cluster3.leader()
    assert old.post("/api/v1/networks/default:pods/", NET).status_code == 200
    assert old.stop() == 0
    handed = re.search(r"handed the Raft leadership to (\S+) before stopping", old.log_text())
    assert handed is not None, old.log_text()
    survivors = [node for node in cluster3.nodes if node is not old]
    assert handed.group(1) in [node.raft for node in survivors]
    for node in survivors:
        wait_for(lambda n=node: (n.info() or {}).get("cluster", {}).get("leader") == handed.group(1), 10, f"{node.name} to follow the new leader")  # type: ignore[misc]
    for i, node in enumerate(survivors):
        assert node.post_endpoint(f"after-{i}").status_code == 200

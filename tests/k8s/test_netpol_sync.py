"""The leader's NetworkPolicy watch against the test API server (the production client): the
store's `/contiv.io/k8s/netpol/` follows policies, pods and namespace labels; stale records of
an earlier leader go; a refused policy is left out and the rest still compiles."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from contivd.k8s import KubeHealth, KubernetesWatch
from contivd.state import keys
from contivd.state.records import netpol_pod_from_json, netpol_pod_to_json
from openflow.inputs import NetpolPod
from raftstore import MemoryStore
from tests.support.k8s_apiserver import KubeApiServer

CIDR = ipaddress.IPv4Network("198.19.112.0/20")
TIMEOUT = 45  # generous: the machine is shared and loaded


@pytest.fixture
def api() -> Any:
    with KubeApiServer(bookmark_seconds=0.2).start() as server:
        yield server


def pod(ns: str, name: str, ip: str, **labels: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"containers": []},
        "status": {"podIP": ip},
    }


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name, "labels": labels}}


def policy(ns: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "apiVersion": "networking.k8s.io/v1", "metadata": {"namespace": ns, "name": name}, "spec": spec}


def stored(store: MemoryStore) -> dict[str, NetpolPod]:
    records = (netpol_pod_from_json(kv.value) for kv in store.list_nowait(keys.K8S_NETPOL_PREFIX))
    return {r.pod: r for r in records}


def rule_ids(store: MemoryStore, pod_key: str) -> list[str]:
    record = stored(store).get(pod_key)
    return sorted(r.rule_id for r in record.rules) if record else []


async def until(predicate: Callable[[], object], what: str) -> None:
    with trio.fail_after(TIMEOUT):
        while not predicate():
            await trio.sleep(0.02)


@pytest.fixture
async def store(api: KubeApiServer, tmp_path: Path) -> AsyncIterator[MemoryStore]:
    store = MemoryStore()
    await store.put(keys.k8s_netpol("gone/stale"), netpol_pod_to_json(NetpolPod("gone/stale", ())))
    for obj in (
        namespace("prod", env="prod"),
        namespace("dev", env="dev"),
        pod("prod", "db", "198.18.0.11", app="db"),
        pod("dev", "tool", "198.18.1.11", app="tool"),
    ):
        api.apply(obj)
    api.apply(
        policy(
            "prod",
            "db-in",
            {"podSelector": {"matchLabels": {"app": "db"}}, "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"env": "dev"}}}]}]},
        )
    )
    watch = KubernetesWatch(store, api.kubeconfig(tmp_path / "kubeconfig"), CIDR, KubeHealth())  # a MemoryStore is always the leader
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        yield store
        nursery.cancel_scope.cancel()


async def test_first_sync_writes_compiled_rules_and_deletes_stale_records(store: MemoryStore) -> None:
    await until(lambda: set(stored(store)) == {"prod/db"}, "the first sync")
    assert rule_ids(store, "prod/db") == ["prod/db-in/ingress/0", "prod/db/ingress/isolation"]
    [allow] = [r for r in stored(store)["prod/db"].rules if r.action == "allow"]
    assert allow.peer == (int(ipaddress.IPv4Address("198.18.1.11")), 32)


async def test_pods_namespaces_and_policies_change_the_records(store: MemoryStore, api: KubeApiServer) -> None:
    await until(lambda: "prod/db" in stored(store), "the first sync")
    api.apply(pod("dev", "tool2", "198.18.1.12", app="tool"))  # a new peer: one more allow
    await until(lambda: len(stored(store)["prod/db"].rules) == 3, "the new peer's allow")
    api.apply(namespace("dev", env="staging"))  # the namespace no longer matches: isolation only
    await until(lambda: rule_ids(store, "prod/db") == ["prod/db/ingress/isolation"], "the peers gone")
    api.apply(policy("prod", "bad", {"podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}))
    api.apply(policy("dev", "deny-out", {"podSelector": {}, "policyTypes": ["Egress"]}))
    await until(lambda: set(stored(store)) == {"prod/db", "dev/tool", "dev/tool2"}, "dev's egress isolation")
    assert rule_ids(store, "dev/tool") == ["dev/tool/egress/isolation"]
    api.delete("NetworkPolicy", "prod", "db-in")
    api.delete("NetworkPolicy", "dev", "deny-out")
    await until(lambda: stored(store) == {}, "every record gone with the policies")

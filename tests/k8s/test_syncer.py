"""The leader's Service sync in-process: the production client and reflector threads against
the test API server, writing to a MemoryStore (the multi-node behaviour is in test_cluster.py)."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from contivd.k8s import KubeApi, KubeHealth, KubernetesWatch
from contivd.k8s.reflector import Listed, Relisting, Update
from contivd.k8s.syncer import ServiceSync
from contivd.k8s.view import ENDPOINT_SLICES, SERVICES
from contivd.state import KubeServiceState, keys
from raftstore import MemoryStore
from tests.support.k8s_apiserver import KubeApiServer
from tests.support.kube_objects import endpoint_slice, service

CIDR = ipaddress.IPv4Network("198.19.112.0/20")
TIMEOUT = 45  # generous: the machine is shared and loaded; backoff after a failure reaches seconds


@pytest.fixture
def api() -> Any:
    with KubeApiServer(bookmark_seconds=0.2).start() as server:
        yield server


def stored(store: MemoryStore) -> dict[str, KubeServiceState]:
    return {record.key: record for record in (KubeServiceState.from_json(kv.value) for kv in store.list_nowait(keys.K8S_SERVICES_PREFIX))}


async def until(predicate: Callable[[], object], what: str) -> None:
    with trio.fail_after(TIMEOUT):
        while not predicate():
            await trio.sleep(0.02)


def backends(store: MemoryStore, key: str) -> list[tuple[str, int]]:
    record = stored(store).get(key)
    return [(b.ip, b.port) for port in record.ports for b in port.backends] if record else []


class Running:
    def __init__(self, store: MemoryStore, health: KubeHealth):
        self.store, self.health = store, health


@pytest.fixture
async def running(api: KubeApiServer, tmp_path: Path) -> AsyncIterator[Running]:
    store = MemoryStore()
    await store.put(keys.k8s_service("gone", "stale"), {"namespace": "gone", "name": "stale", "clusterIP": "198.19.112.99", "ports": []})
    health = KubeHealth()
    watch = KubernetesWatch(store, api.kubeconfig(tmp_path / "kubeconfig"), CIDR, health)  # a MemoryStore is always the leader
    api.apply(service("shop", "web", "198.19.112.10"))
    api.apply(endpoint_slice("shop", "web-a", "web", ["198.18.0.5"], port=8080))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.run)
        yield Running(store, health)
        nursery.cancel_scope.cancel()
    assert not health.view().watching


async def test_first_sync_writes_the_services_and_deletes_stale_records(running: Running) -> None:
    await until(lambda: set(stored(running.store)) == {"shop/web"}, "the first reconcile")
    assert backends(running.store, "shop/web") == [("198.18.0.5", 8080)]
    assert running.health.view().watching and not running.health.view().problems


async def test_watch_events_update_records_one_service_at_a_time(running: Running, api: KubeApiServer) -> None:
    await until(lambda: "shop/web" in stored(running.store), "the first reconcile")
    api.apply(endpoint_slice("shop", "web-a", "web", ["198.18.0.5", "198.18.0.6"], port=8080, not_ready=["198.18.0.7"]))
    await until(lambda: backends(running.store, "shop/web") == [("198.18.0.5", 8080), ("198.18.0.6", 8080)], "the new backend")
    api.apply(service("shop", "dns", "198.19.112.53", protocol="SCTP"))
    await until(lambda: running.health.skip_counts() == {("shop/dns", "sctp"): 1}, "the skip")
    await until(lambda: [e["involvedObject"]["name"] for e in api.posted_events] == ["dns"], "the skip Event")
    api.apply(service("shop", "headless", "None"))
    api.delete("Service", "shop", "web")
    await until(lambda: stored(running.store) == {}, "the deleted service gone")


async def test_a_restart_with_compacted_history_relists_and_drops_what_went_away(running: Running, api: KubeApiServer) -> None:
    await until(lambda: "shop/web" in stored(running.store), "the first reconcile")
    api.stop()
    api.delete("Service", "shop", "web")
    api.apply(service("shop", "db", "198.19.112.11"))
    api.start(keep_history=False)
    await until(lambda: set(stored(running.store)) == {"shop/db"}, "the relist after the restart")


async def test_a_refused_token_is_reported_and_nothing_is_torn_down(running: Running, api: KubeApiServer) -> None:
    await until(lambda: "shop/web" in stored(running.store), "the first reconcile")
    api.token = "rotated"
    api.stop()
    api.start()
    await until(lambda: any("401" in why for why in running.health.view().problems.values()), "the 401 reported")
    assert "token" in " ".join(running.health.view().problems.values())
    assert set(stored(running.store)) == {"shop/web"}


def test_an_unusable_kubeconfig_is_refused_saying_why(tmp_path: Path) -> None:
    garbage = tmp_path / "kubeconfig"
    garbage.write_text("clusters: [")
    with pytest.raises(ValueError, match="cannot be used"):
        KubeApi(garbage)


async def test_the_leader_with_an_unusable_kubeconfig_says_why_and_keeps_running(tmp_path: Path) -> None:
    garbage = tmp_path / "kubeconfig"
    garbage.write_text("clusters: [")
    health = KubeHealth()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KubernetesWatch(MemoryStore(), garbage, CIDR, health).run)
        await until(lambda: "kubeconfig" in health.view().problems, "the kubeconfig problem")
        assert health.view().watching and "cannot be used" in health.view().problems["kubeconfig"]
        nursery.cancel_scope.cancel()
    assert "kubeconfig" in health.view().problems and not health.view().watching


async def test_both_kinds_relisting_reconcile_once_when_both_are_in() -> None:
    """An API server restart or compaction costs both watches their history: a reconcile as soon
    as the first relist is in would run against the other kind's stale view and write every
    Service twice."""
    reconciled: list[tuple[int, int]] = []

    class Counting(ServiceSync):
        async def reconcile(self) -> None:
            reconciled.append((len(self.view.services), len(self.view.slices)))

    sync = Counting(MemoryStore(), cast(KubeApi, None), CIDR, KubeHealth())
    web, slice_ = service("shop", "web", "198.19.112.10"), endpoint_slice("shop", "web-a", "web", ["198.18.0.5"], port=8080)
    send, receive = trio.open_memory_channel[Update](10)
    for update in (
        Listed(SERVICES, []), Listed(ENDPOINT_SLICES, []),  # the first lists: one reconcile
        Relisting(SERVICES), Relisting(ENDPOINT_SLICES), Listed(SERVICES, [web]), Listed(ENDPOINT_SLICES, [slice_]),
    ):  # fmt: skip
        send.send_nowait(update)
    send.close()
    await sync.consume(receive)
    assert reconciled == [(0, 0), (1, 1)]

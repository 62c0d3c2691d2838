"""Readiness tells the truth: the leader's watch against the test API server, stopped,
restarted and compacted, as readiness (KubeStatusView.not_ready), /metrics' watch families and
the log see it (in-process, like test_syncer.py)."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client.core import Metric

from contivd.k8s import KubeHealth, KubernetesWatch
from contivd.metrics import kube_watch_metrics
from raftstore import MemoryStore
from tests.support.k8s_apiserver import KubeApiServer
from tests.support.kube_objects import service

CIDR = ipaddress.IPv4Network("198.19.112.0/20")
TIMEOUT = 45  # generous: the machine is shared and loaded
KINDS = {"services", "endpointslices", "networkpolicies", "pods", "namespaces"}


@pytest.fixture
def api() -> Any:
    with KubeApiServer(bookmark_seconds=0.2).start() as server:
        yield server


@pytest.fixture
async def health(api: KubeApiServer, tmp_path: Path) -> AsyncIterator[KubeHealth]:
    health = KubeHealth()
    api.apply(service("shop", "web", "198.19.112.10"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(KubernetesWatch(MemoryStore(), api.kubeconfig(tmp_path / "kubeconfig"), CIDR, health).run)
        yield health
        nursery.cancel_scope.cancel()


async def until(predicate: Callable[[], object], health: KubeHealth | None = None) -> None:
    with trio.move_on_after(TIMEOUT):
        while not predicate():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"timed out; watch: {health.view() if health else ''}, counts {health.watch_counts() if health else ''}")


def not_ready(health: KubeHealth) -> dict[str, str]:
    """Why the leader is not ready; {"term": ...} before its term has started (a follower is ready)."""
    view = health.view()
    return view.not_ready(time.time()) if view.watching else {"term": "not started"}


def samples(health: KubeHealth) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    families: list[Metric] = list(kube_watch_metrics(health.view(), health.watch_counts(), time.time()))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in families for s in family.samples}


def in_state(health: KubeHealth, state: str) -> set[str]:
    return {
        dict(labels)["kind"]
        for (name, labels), value in samples(health).items()
        if name == "contivd_k8s_watch_state" and value and dict(labels)["state"] == state
    }


async def test_ready_only_once_every_kind_lists_and_watches(health: KubeHealth) -> None:
    assert set(not_ready(health)) <= {*KINDS, "term", "watch"}  # at first: not ready, saying why
    await until(lambda: not not_ready(health))
    assert in_state(health, "watching") == KINDS and set(health.view().kinds) == KINDS
    assert all(state.resource_version for state in health.view().kinds.values())


async def test_an_api_server_away_is_not_ready_logged_once_per_kind_then_resumed_without_relist(
    health: KubeHealth, api: KubeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    await until(lambda: not not_ready(health))
    caplog.set_level(logging.INFO, logger="contivd.k8s")
    api.stop()
    await until(lambda: in_state(health, "backing_off") == KINDS)
    assert all("unreachable" in why for why in not_ready(health).values())
    failures_before = sum(health.watch_counts()[1].values())
    await until(lambda: sum(health.watch_counts()[1].values()) >= failures_before + len(KINDS))  # every kind retried at least once more
    api.start(keep_history=True)
    await until(lambda: not not_ready(health))
    unreachable = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
    assert {line.split(":")[0] for line in unreachable} == {f"Kubernetes {kind}" for kind in KINDS}
    assert len(unreachable) == len(set(unreachable))  # one line per change (broken watch, then refused), none per retry
    assert not any("Retrying" in r.getMessage() for r in caplog.records)
    assert health.watch_counts()[0] == {}  # the history was kept: resumed, no relist
    assert sum(1 for r in caplog.records if "after backing off" in r.getMessage()) == len(KINDS)


async def test_a_restart_that_lost_the_history_relists_every_kind_like_a_real_api_server(health: KubeHealth, api: KubeApiServer) -> None:
    """A real kube-apiserver's watch cache starts empty after a restart (and etcd compaction
    does the same to an old resourceVersion): the resumed watches get 410 and every kind relists."""
    await until(lambda: not not_ready(health))
    api.stop()
    await until(lambda: in_state(health, "backing_off") == KINDS)  # every watch is cut: none can see what follows
    api.apply(service("shop", "db", "198.19.112.11"))
    api.start(keep_history=False)
    await until(lambda: set(health.watch_counts()[0]) == KINDS and not not_ready(health), health)
    relists = {dict(labels)["kind"]: value for (name, labels), value in samples(health).items() if name == "contivd_k8s_relists_total"}
    assert relists == dict.fromkeys(KINDS, 1.0)
    ages = {dict(labels)["kind"]: value for (name, labels), value in samples(health).items() if name == "contivd_k8s_resource_version_age_seconds"}
    assert set(ages) == KINDS and all(0 <= age < TIMEOUT for age in ages.values())
    assert in_state(health, "watching") == KINDS

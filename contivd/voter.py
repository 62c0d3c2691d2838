"""What only a voter runs: the Raft member, the netmaster's leader duties, the Kubernetes
watch (or its mode-off cleanup) and the leadership hand-over on stop.

Imported only when the node is a voter (contivd.roles), so a follower of the store never
loads PySyncObj, the Kubernetes watch or the leader's background writers.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from raftstore import Store, StoreError, open_store

from .config import Config
from .k8s import KubeHealth, KubernetesWatch
from .k8s.modeoff import KubernetesModeOff
from .model import ModelError
from .netmaster.service import Netmaster

log = logging.getLogger("contivd")
HAND_OVER_SECONDS = 3.0  # longest a stopping leader waits for another voter to take over (systemd allows 15 s)


class VoterRole:
    """A Raft member: it may lead, and then it is the netmaster."""

    def __init__(self, store: Store, config: Config):
        self.store = store
        self.config = config
        self.description = f"voter, raft on {config.raft_listen}"

    def start_duties(self, nursery: trio.Nursery, netmaster: Netmaster) -> KubeHealth | None:
        """The leader's background work: Contiv's defaults, the Kubernetes watch (or mode off)."""
        nursery.start_soon(_leader_duties, self.store, netmaster, self.config.node_name)
        return _start_kubernetes_watch(nursery, self.store, netmaster, self.config)

    async def before_stop(self) -> None:
        await _hand_over_leadership(self.store)


@asynccontextmanager
async def open_voter(config: Config) -> AsyncIterator[VoterRole]:
    async with open_store(config.store_config()) as store:
        yield VoterRole(store, config)


async def _leader_duties(store: Store, netmaster: Netmaster, node_name: str) -> None:
    """Log leadership changes; as the new leader, make sure Contiv's defaults exist."""
    async for change in store.leadership_changes():
        if change.is_leader:
            log.info("node %s is the leader (netmaster) in term %d", node_name, change.term)
            while store.is_leader():
                try:
                    await netmaster.ensure_defaults()
                    break
                except (StoreError, ModelError) as exc:
                    log.warning("creating default objects failed, retrying: %s", exc)
                    await trio.sleep(1)
        elif change.leader:
            log.info("leader is %s (term %d)", change.leader, change.term)
        else:
            log.warning("no leader: election in progress or no quorum")


def _start_kubernetes_watch(nursery: trio.Nursery, store: Store, netmaster: Netmaster, config: Config) -> KubeHealth | None:
    """Kubernetes mode (--kubeconfig): the leader, and only it, keeps the store's Kubernetes
    services equal to the API server's, and endpoints following their pods' labels. The
    health object says how the watch is doing. Without --kubeconfig the leader removes the
    Kubernetes records once no live node is in Kubernetes mode (None is returned)."""
    if config.kubeconfig is None:  # mode off: the leader removes what an earlier watch wrote (contivd.k8s.modeoff)
        nursery.start_soon(KubernetesModeOff(store).run)
        return None
    health = KubeHealth()
    nursery.start_soon(KubernetesWatch(store, config.kubeconfig, config.service_cidr, health, netmaster).run)
    log.info("Kubernetes mode: the Raft leader watches Services, EndpointSlices and Pods (service CIDR %s)", config.service_cidr)
    return health


async def _hand_over_leadership(store: Store) -> None:
    """A leader that stops on purpose (a restart, a rolling upgrade) first hands the leadership
    to the most caught-up voter, as etcd does: the others lead within a round trip, instead of
    an election timeout after this node went silent, during which every write answers 503.
    Writes waiting here when it moves answer 503 at once ("retrying is safe"). Bounded: a
    stop never waits longer than HAND_OVER_SECONDS for it."""
    if not store.is_leader() or not store.statistics().connected_voters:
        return
    with trio.move_on_after(HAND_OVER_SECONDS):
        try:
            leader = await store.transfer_leadership()
        except StoreError as exc:  # refused: no voter holds the whole log yet (writes in flight)
            log.warning("stopping without handing the Raft leadership over: %s", exc)
            return
        log.info("handed the Raft leadership to %s before stopping", leader)
        return
    log.warning("stopping without handing the Raft leadership over: no voter took it within %gs", HAND_OVER_SECONDS)

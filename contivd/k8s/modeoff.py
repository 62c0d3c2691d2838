"""Kubernetes mode turned off: the leader removes what the Kubernetes watch wrote.

The Services (`KUBE_SERVICES`) and NetworkPolicy records (`NETPOL_PODS`)
are written by the leader's watch only (syncer.py, netpol.py) and stay when the watch stops, so
that a new leader resumes from them. When the mode is turned off (contivd restarted without
`--kubeconfig`) nothing would ever remove them: every node kept the Services' flows, NodePort
rules and routes, and the pods' NetworkPolicy rules, for as long as the cluster ran.

What "off" means for the cluster: the leader has no `--kubeconfig` **and** no live node has
one (each node's registration says whether it runs in Kubernetes mode: `NodeRecord.kubernetes`).
A node left with its kubeconfig, a rolling restart that has not reached every node yet, or a
leadership moved for a moment to a node configured differently therefore removes nothing: the
records stay as they are until the last node in Kubernetes mode is restarted without it (or
its registration expires). The leader without a kubeconfig then removes them all, once per
leadership term, and every node's agent removes their flows, rules and routes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import trio

from raftstore import KeyValueStore, Op, StoreError

from ..nodes import registered_nodes
from ..state import NodeRecord
from ..state.families import KUBE_SERVICES, NETPOL_PODS
from .syncer import TXN_OPS, run_while_leader

log = logging.getLogger("contivd.k8s")
CHECK_SECONDS = 2.0  # how often the leader looks again at which live nodes are in Kubernetes mode
RETRY_SECONDS = 1.0


def kubernetes_nodes(nodes: Iterable[NodeRecord]) -> list[str]:
    """The live nodes (registered) started with --kubeconfig, by name."""
    return sorted(node.name for node in nodes if node.kubernetes)


async def remove_kubernetes_records(store: KeyValueStore) -> tuple[int, int]:
    """Delete every record the Kubernetes watch writes; returns (Services, pods' NetworkPolicy records) removed."""
    services = await KUBE_SERVICES.ids(store)
    policies = await NETPOL_PODS.ids(store)
    ops: list[Op] = [*(KUBE_SERVICES.delete(name) for name in services), *(NETPOL_PODS.delete(pod) for pod in policies)]
    for start in range(0, len(ops), TXN_OPS):
        await store.txn(success=ops[start : start + TXN_OPS])
    return len(services), len(policies)


class KubernetesModeOff:
    """On a node without --kubeconfig: nothing until it leads; then, once no live node is in
    Kubernetes mode, the records of the Kubernetes watch are removed (once per term)."""

    def __init__(self, store: KeyValueStore):
        self.store = store

    async def run(self) -> None:
        await run_while_leader(self.store, self._term)

    async def _term(self) -> None:
        reported: list[str] = []
        while on := kubernetes_nodes(registered_nodes(self.store)):
            if on != reported:
                log.warning(
                    "Kubernetes mode is off on this node (the leader) but on at %s: the Kubernetes Services and NetworkPolicy records stay, "
                    "and nobody follows the API server while this node leads",
                    ", ".join(on),
                )
                reported = on
            await trio.sleep(CHECK_SECONDS)
        while True:
            try:
                services, policies = await remove_kubernetes_records(self.store)
                break
            except StoreError as exc:
                log.warning("removing the Kubernetes records failed, retrying: %s", exc)
                await trio.sleep(RETRY_SECONDS)
        if services or policies:
            log.info(
                "Kubernetes mode is off (no live node has --kubeconfig): removed %d records, %d Services and %d pods' NetworkPolicy rules",
                services + policies,
                services,
                policies,
            )
        await trio.sleep_forever()  # until the term ends: a new leader looks again

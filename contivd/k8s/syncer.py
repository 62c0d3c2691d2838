"""The leader's Kubernetes duty: keep `/contiv.io/k8s/services/` equal to what the API server
says, one watch per cluster.

Only the Raft leader runs it (`run_while_leader`). On becoming leader it lists Services and
EndpointSlices, resolves every Service, reads what the store holds under
`KUBE_SERVICES` and writes only the difference (stale records deleted): a new leader
resumes without duplicate or stale services, whatever the old one managed to write. Then each
watch event re-resolves the Services it touched and writes the ones whose record changed, one
store write per Service. A relist (410) reconciles against the store again. Leadership lost:
the watch stops; the records stay for the next leader to reconcile.

A Service that cannot be programmed is reported once per change of reason: a log line, the
`contivd_k8s_services_skipped_total` counter (service, reason) and a Warning Event on the
Service (best effort).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio

from raftstore import KeyValueStore, Op, StoreError

from ..state import KubeServiceState
from ..state.families import KUBE_SERVICES
from ..state.records import RecordError
from .client import KubeApi, post_event_soon
from .netpol import NetpolSync
from .pods import EndpointRelabeller, PodSync
from .reflector import Changed, Consume, Listed, Relisting, Update, reflect_kinds
from .resolve import Skipped
from .status import KubeHealth
from .view import ENDPOINT_SLICES, SERVICES, ClusterView

log = logging.getLogger("contivd.k8s")
TXN_OPS = 100  # records per store transaction in a reconcile (bounded Raft entries)
SKIP_EVENT_REASON = "ContivdServiceSkipped"
RESTART_SECONDS = 5.0


class ServiceSync:
    """One leadership term's watch and writes."""

    def __init__(self, store: KeyValueStore, api: KubeApi, service_cidr: ipaddress.IPv4Network, health: KubeHealth):
        self.store, self.api, self.health = store, api, health
        self.view = ClusterView(service_cidr)
        self.written: dict[str, KubeServiceState] = {}  # what the store holds, by `<ns>/<name>`
        self.skipped: dict[str, Skipped] = {}

    KINDS = (SERVICES, ENDPOINT_SLICES)

    async def consume(self, receive: trio.MemoryReceiveChannel[Update]) -> None:
        """Follow the watches' updates and write until cancelled (leadership lost)."""
        listed: set[str] = set()
        async for update in receive:
            if isinstance(update, Relisting):
                # Both watches usually lose their history together (an API server restarted or
                # compacted): reconciling when the first relist is in, against the other kind's
                # stale view, would write every Service twice (once with the old endpoints).
                listed.discard(update.kind)
            elif isinstance(update, Listed):
                self.view.replace(update.kind, update.objects)
                listed.add(update.kind)
                if listed == {SERVICES, ENDPOINT_SLICES}:  # both kinds known: the store can follow
                    await self._retrying(self.reconcile)
            elif isinstance(update, Changed):
                touched = self.view.apply(update.kind, update.event, update.object)
                if listed == {SERVICES, ENDPOINT_SLICES}:
                    for service in sorted(touched):
                        await self._retrying(partial(self.write, service))

    async def _retrying(self, step: Callable[[], Awaitable[None]]) -> None:
        """A store write fails during an election: retry until it succeeds or the term ends (cancelled)."""
        while True:
            try:
                await step()
                return
            except StoreError as exc:
                log.warning("writing Kubernetes services to the store failed, retrying: %s", exc)
                await trio.sleep(1)

    async def reconcile(self) -> None:
        """Make the store hold exactly the resolved records (listing it first: another leader
        may have written since)."""
        stored: dict[str, KubeServiceState | None] = {}
        stale_keys: list[str] = []
        for service, record in await KUBE_SERVICES.each(self.store):
            if isinstance(record, RecordError) or service != record.key:  # unreadable: rewritten below if the Service exists
                stale_keys.append(service)
                continue
            stored[record.key] = record
        desired: dict[str, KubeServiceState] = {}
        for service in sorted(self.view.services):
            if (resolved := self._resolve(service)) is not None:
                desired[service] = resolved
        ops: list[Op] = [KUBE_SERVICES.delete(k) for k in stale_keys]
        ops += [KUBE_SERVICES.delete(s) for s in sorted(stored) if s not in desired]
        ops += [KUBE_SERVICES.put(s, r) for s, r in desired.items() if stored.get(s) != r]
        for start in range(0, len(ops), TXN_OPS):
            await self.store.txn(success=ops[start : start + TXN_OPS])
        self.written = desired
        self.health.services = len(desired)
        log.info("Kubernetes services reconciled: %d in the store, %d written or deleted", len(desired), len(ops))

    async def write(self, service: str) -> None:
        """Store the Service's record if it changed (delete it when it no longer has one)."""
        record = self._resolve(service)
        if record == self.written.get(service):
            return
        if record is None:
            await KUBE_SERVICES.remove(self.store, service)
            del self.written[service]
        else:
            await KUBE_SERVICES.write(self.store, service, record)
            self.written[service] = record
        self.health.services = len(self.written)

    def _resolve(self, service: str) -> KubeServiceState | None:
        """The Service's record, reporting a skip when it newly is one."""
        resolution = self.view.resolve(service)
        if not isinstance(resolution, Skipped):
            if self.skipped.pop(service, None) is not None:
                self.health.clear_skip(service)
            return resolution
        if self.skipped.get(service) != resolution:
            self.skipped[service] = resolution
            log.warning("Kubernetes service %s skipped (%s): %s", service, resolution.reason, resolution.message)
            self.health.record_skip(service, resolution.reason)
            post_event_soon(self.api, "Service", service, SKIP_EVENT_REASON, f"contivd does not program this Service: {resolution.message}")
        return None


class KubernetesWatch:
    """Kubernetes mode on one node: nothing until it is the Raft leader; then the client is
    built (off the event loop, once: it reads the kubeconfig and imports lightkube, which
    followers never load) and a ServiceSync, a NetpolSync (and, given the netmaster, a PodSync) run for the term. An unusable kubeconfig is logged
    and reported by readiness; the node keeps serving everything else."""

    def __init__(
        self,
        store: KeyValueStore,
        kubeconfig: Path,
        service_cidr: ipaddress.IPv4Network,
        health: KubeHealth,
        netmaster: EndpointRelabeller | None = None,
    ):
        """With `netmaster`, pods are watched too and their endpoints follow their labels (pods.py)."""
        self.store, self.kubeconfig, self.service_cidr, self.health = store, kubeconfig, service_cidr, health
        self.netmaster = netmaster
        self.api: KubeApi | None = None

    async def run(self) -> None:
        await run_while_leader(self.store, self._term)

    async def _term(self) -> None:
        self.health.start()
        try:
            if self.api is None:
                try:
                    self.api = await trio.to_thread.run_sync(KubeApi, self.kubeconfig)
                except ValueError as exc:
                    log.error("the Kubernetes watch cannot start: %s", exc)
                    self.health.failed("kubeconfig", str(exc))
                    await trio.sleep_forever()
            api = self.api
            assert api is not None
            services = ServiceSync(self.store, api, self.service_cidr, self.health)
            policies = NetpolSync(self.store, api, self.health)  # NetworkPolicy beside Services, for the same term
            duties: list[tuple[Iterable[str], Consume]] = [(services.KINDS, services.consume), (policies.KINDS, policies.consume)]
            if self.netmaster is not None:
                pods = PodSync(self.store, api, self.netmaster, self.health)
                duties.append((pods.KINDS, pods.consume))
            await reflect_kinds(api, self.health, duties)  # one watch per kind: Pods serve two duties
        finally:
            self.health.stop()


async def run_while_leader(store: KeyValueStore, duty: Callable[[], Awaitable[None]]) -> None:
    """Run `duty` from each time this member becomes the Raft leader until it stops being it.
    A term starts only once the previous one has finished (its cancellation delivered and its
    clean-up done): two terms never write or report at the same time."""
    async with trio.open_nursery() as nursery:
        term: Term | None = None
        async for change in store.leadership_changes():
            if change.is_leader and term is None:
                term = await nursery.start(_in_scope, duty)
            elif not change.is_leader and term is not None:
                term.scope.cancel()
                await term.done.wait()
                term = None


@dataclass(frozen=True)
class Term:
    scope: trio.CancelScope
    done: trio.Event


async def _in_scope(duty: Callable[[], Awaitable[None]], task_status: trio.TaskStatus[Term]) -> None:
    """Run the duty in a scope the caller cancels; a duty that fails (a bug, or an API answer
    nobody foresaw) is logged and restarted rather than taking the node down."""
    term = Term(trio.CancelScope(), trio.Event())
    try:
        with term.scope:
            task_status.started(term)
            while True:
                try:
                    await duty()
                except Exception:
                    log.exception("the leader's Kubernetes watch failed: restarting it in %s s", RESTART_SECONDS)
                await trio.sleep(RESTART_SECONDS)
    finally:
        term.done.set()

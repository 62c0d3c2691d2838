"""The leader's pod watch: a running pod's endpoint follows the pod's labels.

Same duty as the Service watch (one watch per cluster, only on the Raft leader, the same
reflector: resourceVersion, bookmarks, relist after a 410). Endpoints made by the CNI server for
a Kubernetes pod name it (`k8sPod`, `<namespace>/<name>`); for each such endpoint whose pod's
labels differ from the endpoint's, labels.py decides, and the netmaster's relabel operation moves
the endpoint between groups and replaces its labels in one commit. Every node's agent then
re-programs that endpoint's flows (new group id, so new policy) on the same port.

When it runs: after the list (a new leader converges whatever the old one did), after every pod
event, and every RESYNC_SECONDS (an endpoint whose ADD finished after its pod's last event, or a
write that failed during an election). A change that cannot be applied is reported once per
endpoint and reason: a log line, the `contivd_k8s_pod_label_changes_not_applied_total` counter
and a Warning Event on the pod; the endpoint is left as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import trio

from raftstore import KeyValueStore, StoreError

from ..model import ModelError, NotFoundError
from ..state import EndpointState
from ..state.families import ENDPOINTS
from ..state.records import RecordError
from .client import KubeApi, post_event_soon
from .labels import NotApplied, Relabel, plan_relabel, pod_labels
from .reflector import Changed, Listed, Update
from .resolve import object_key
from .status import KubeHealth
from .view import PODS

log = logging.getLogger("contivd.k8s")
RESYNC_SECONDS = 10.0
NOT_APPLIED_EVENT_REASON = "ContivdLabelChangeNotApplied"


class EndpointRelabeller(Protocol):
    """The netmaster operation the watch needs (on the leader: the Netmaster itself)."""

    async def relabel_endpoint(self, request: Mapping[str, Any]) -> dict[str, Any]: ...


class PodSync:
    """One leadership term's pod watch and endpoint moves."""

    def __init__(self, store: KeyValueStore, api: KubeApi, netmaster: EndpointRelabeller, health: KubeHealth):
        self.store, self.api, self.netmaster, self.health = store, api, netmaster, health
        self.pods: dict[str, Mapping[str, Any]] = {}  # `<ns>/<name>` -> the Pod as the server sent it
        self.listed = False
        self.reported: dict[str, NotApplied] = {}  # endpoint id -> the unapplied change reported for it
        self._lock = trio.Lock()  # one pass at a time (events and the periodic resync)

    KINDS = (PODS,)

    async def consume(self, receive: trio.MemoryReceiveChannel[Update]) -> None:
        """Follow the pods' updates until cancelled (leadership lost)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._resync)
            async for update in receive:
                if isinstance(update, Listed):
                    self.pods = {object_key(pod): pod for pod in update.objects}
                    self.listed = True
                    await self.follow()
                elif isinstance(update, Changed):
                    key = object_key(update.object)
                    if update.event == "DELETED":
                        self.pods.pop(key, None)  # its endpoint goes with the CNI DEL
                    else:  # pods change often (status): only a label change is looked into
                        old, self.pods[key] = self.pods.get(key), update.object
                        if self.listed and (old is None or pod_labels(old) != pod_labels(update.object)):
                            await self.follow({key})
            nursery.cancel_scope.cancel()

    async def _resync(self) -> None:
        while True:
            await trio.sleep(RESYNC_SECONDS)
            if self.listed:
                await self.follow()

    async def follow(self, pods: set[str] | None = None) -> None:
        """Bring the endpoints of `pods` (None: every pod) in line with their labels."""
        async with self._lock:
            try:
                endpoints = await self._endpoints()
            except StoreError as exc:
                log.warning("reading endpoints for the pod label watch failed (retried in %s s): %s", RESYNC_SECONDS, exc)
                return
            for endpoint in endpoints:
                if not endpoint.k8s_pod or (pods is not None and endpoint.k8s_pod not in pods):
                    continue
                pod = self.pods.get(endpoint.k8s_pod)
                if pod is not None:
                    await self._apply(endpoint, plan_relabel(endpoint, pod_labels(pod)))

    async def _endpoints(self) -> list[EndpointState]:
        # an unreadable record is not ours to judge: the agent reports it
        return [record for _, record in await ENDPOINTS.each(self.store) if not isinstance(record, RecordError)]

    async def _apply(self, endpoint: EndpointState, plan: Relabel | NotApplied | None) -> None:
        if isinstance(plan, NotApplied):
            self._report(endpoint, plan)
            return
        if plan is not None:
            try:
                await self.netmaster.relabel_endpoint(plan.request())
            except NotFoundError as exc:
                if plan.group != endpoint.service_name:  # else the endpoint itself went (a DEL): nothing to say
                    self._report(
                        endpoint, NotApplied("unknown-group", f"{exc}: endpoint {endpoint.id} stays in {_group_text(endpoint.service_name)}")
                    )
                return
            except ModelError as exc:
                self._report(endpoint, NotApplied("group-refused", f"{exc}: endpoint {endpoint.id} stays in {_group_text(endpoint.service_name)}"))
                return
            except StoreError as exc:  # no quorum, leadership lost: the next pass retries
                log.warning("moving endpoint %s of pod %s failed (retried): %s", endpoint.id, endpoint.k8s_pod, exc)
                return
            self.health.record_label_change(endpoint.k8s_pod, None)
            log.info(
                "pod %s's labels changed: endpoint %s %s, labels replaced",
                endpoint.k8s_pod,
                endpoint.id,
                f"moved from {_group_text(endpoint.service_name)} to {_group_text(plan.group)}"
                if plan.group != endpoint.service_name
                else "stays in its group",
            )
        self.reported.pop(endpoint.id, None)

    def _report(self, endpoint: EndpointState, problem: NotApplied) -> None:
        if self.reported.get(endpoint.id) == problem:
            return
        self.reported[endpoint.id] = problem
        log.warning("label change of pod %s not applied (%s): %s", endpoint.k8s_pod, problem.reason, problem.message)
        self.health.record_label_change(endpoint.k8s_pod, problem.reason)
        post_event_soon(self.api, "Pod", endpoint.k8s_pod, NOT_APPLIED_EVENT_REASON, f"contivd did not apply the label change: {problem.message}")


def _group_text(group: str) -> str:
    return f"group {group}" if group else "no group"

"""The netmaster service: Contiv's API executed on the replicated store.

Configuration writes are serialised on this leader (a lock) and across leaders (every
commit is guarded by CONFIG_VERSION and the state it read). Endpoint operations are batched
per network: concurrent requests for one network share one guarded transaction, so a burst
of pod creations costs one log entry, not one each. Callers must run writes on the Raft
leader; reads sync with the log first, so they are linearizable on any member.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import trio

from raftstore import KeyValueStore, UnavailableError

from ..model import (
    ModelError,
    NotFoundError,
    check_create,
    check_delete,
    check_update,
    contiv_line,
    kind_for,
    omit_empty,
    render,
    validate,
    with_network_subnets,
)
from ..state import EndpointState, tables
from ..state.tables import ConfigObject
from . import effects, endpoints, oper
from .view import Reads, View, Writes

log = logging.getLogger("contivd.netmaster")
T = TypeVar("T")
COMMIT_ATTEMPTS = 5

DEFAULT_OBJECTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "globals",
        "global",
        {
            "name": "global",
            "networkInfraType": "default",
            "vlans": "1-4094",
            "vxlans": "1-10000",
            "fwdMode": "bridge",
            "arpMode": "proxy",
            "pvtSubnet": "172.19.0.0/16",
        },
    ),
    ("tenants", "default", {"tenantName": "default"}),
)


class ConflictRetryError(UnavailableError):
    """Guarded commits kept failing: the state changed under us every time (leader churn)."""


class _Batch:
    """Flat combining: whoever holds the network's lock commits every request queued so far."""

    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.pending: list[tuple[Callable[[Reads, Writes], Any], dict[str, Any]]] = []


class Netmaster:
    def __init__(self, store: KeyValueStore, node_name: str):
        self.store = store
        self.node_name = node_name
        self._config_lock = trio.Lock()
        self._batches: dict[str, _Batch] = {}
        self._records = tables.RecordCache()  # endpoint plans decode a network or group once, not once per request

    # ---- configuration objects --------------------------------------------------------------

    async def view(self) -> View:
        await self.store.sync()
        return View(self.store)

    async def read_view(self) -> View:
        """A view for answering reads, refused (503) until the leader has created the default
        objects: Contiv created them before serving, so a client never sees a cluster without
        the `default` tenant (each default is one config commit, so the version counts them)."""
        view = await self.view()
        if view.config_version < len(DEFAULT_OBJECTS):
            raise UnavailableError("the default objects (global, tenant default) are not created yet: the leader creates them once elected; retry")
        return view

    async def ensure_defaults(self) -> None:
        """Create the `global` object and `default` tenant if missing (Contiv does at start)."""
        for collection, key, body in DEFAULT_OBJECTS:
            view = await self.view()
            if view.get(kind_for(collection), key) is None:
                await self.put_object(collection, key, body)
                log.info("created default %s %s", kind_for(collection), key)

    async def put_object(self, collection: str, key: str, body: object) -> dict[str, Any]:
        """Create or update; an identical re-POST changes nothing (Decision 2)."""
        kind = kind_for(collection)
        obj = validate(collection, body, key)
        async with self._config_lock:
            for _ in range(COMMIT_ATTEMPTS):
                view = await self.view()
                existing = view.get(kind, key)
                wanted = with_network_subnets(obj, view) if kind == "rule" else obj
                if existing is None:
                    check_create(kind, wanted, view)
                    stored: ConfigObject = wanted
                else:
                    stored = check_update(kind, existing, wanted, view)
                    if stored is existing:
                        return render(kind, existing, view)
                writes = Writes(view)
                view.put_object(kind, key, dict(stored))
                effects.handler(kind)(view, writes, existing, stored)
                writes.put(tables.CONFIG, tables.config_id(kind, key), stored)
                if await self._commit_config(view, writes):
                    return render(kind, stored, view)
        raise ConflictRetryError(f"{kind} {key}: configuration kept changing during the write; retry")

    async def delete_object(self, collection: str, key: str) -> str:
        kind = kind_for(collection)
        async with self._config_lock:
            for _ in range(COMMIT_ATTEMPTS):
                view = await self.view()
                existing = view.get(kind, key)
                if existing is None:
                    raise NotFoundError(f"{kind} not found: {key}", contiv=contiv_line("object-not-found", kind=kind))
                dependents = check_delete(kind, key, view)
                writes = Writes(view)
                for dep_kind, dep_key in (*dependents, (kind, key)):
                    old = view.get(dep_kind, dep_key)
                    view.put_object(dep_kind, dep_key, None)
                    effects.handler(dep_kind)(view, writes, old, None)
                    writes.delete(tables.CONFIG, tables.config_id(dep_kind, dep_key))
                if await self._commit_config(view, writes):
                    return key
        raise ConflictRetryError(f"{kind} {key}: configuration kept changing during the delete; retry")

    async def _commit_config(self, view: View, writes: Writes) -> bool:
        writes.put(tables.CONFIG_VERSION, "", view.config_version + 1)
        result = await self.store.txn(view.guards(), writes.ops())
        return result.succeeded

    async def _read_object(self, collection: str, key: str) -> tuple[str, View, ConfigObject]:
        kind = kind_for(collection)
        view = await self.read_view()
        obj = view.get(kind, key)
        if obj is None:
            raise NotFoundError(f"{kind} not found: {key}", contiv=contiv_line("object-not-found", kind=kind))
        return kind, view, obj

    async def get_object(self, collection: str, key: str) -> dict[str, Any]:
        kind, view, obj = await self._read_object(collection, key)
        return render(kind, obj, view)

    async def list_objects(self, collection: str) -> list[dict[str, Any]]:
        kind = kind_for(collection)
        view = await self.read_view()
        return [render(kind, obj, view) for obj in view.items(kind)]

    async def inspect_object(self, collection: str, key: str) -> dict[str, Any]:
        kind, view, obj = await self._read_object(collection, key)
        answer: dict[str, Any] = {"Config": render(kind, obj, view)}
        if kind in oper.OPER:
            answer["Oper"] = omit_empty(oper.OPER[kind](view, obj))
        elif kind in oper.EMPTY_OPER:
            answer["Oper"] = {}  # a Go struct, never omitted: netctl prints `"Oper": {}`
        return answer

    async def inspect_endpoint(self, key: str) -> dict[str, Any]:
        """Contiv matches endpoint ids containing `key`; the first in id order answers."""
        await self.store.sync()
        found = tables.first(self.store, tables.ENDPOINTS, lambda endpoint_id: key in endpoint_id)
        if found is not None:
            return {"Oper": oper.endpoint(found)}  # omitempty already
        raise NotFoundError(f"endpoint not found: {key}", contiv=contiv_line("endpoint-not-found"))

    # ---- endpoints (batched per network) ---------------------------------------------------

    async def create_endpoint(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return (await self.create_endpoint_at(request))[0]

    async def create_endpoint_at(self, request: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """create_endpoint's answer and the store revision that holds it (a caller that
        programs the datapath waits for its local state to reach that revision)."""
        state, revision = await self.create_endpoint_state(request)
        return {"EndpointConfig": state.to_json()}, revision

    async def create_endpoint_state(self, request: Mapping[str, Any]) -> tuple[EndpointState, int]:
        """The endpoint as committed, typed (in-process callers need no JSON round trip), and its revision."""
        return await self._batched_at(request, lambda reads, writes: endpoints.create_endpoint(reads, writes, request, self.node_name))

    async def delete_endpoint(self, request: Mapping[str, Any]) -> dict[str, Any]:
        state = await self._batched(request, lambda reads, writes: endpoints.delete_endpoint(reads, writes, request))
        return {"EndpointConfig": state.to_json() if state else None}

    async def update_endpoint(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return await self._batched(request, lambda reads, writes: endpoints.update_endpoint(reads, writes, request), "Tenant", "Network")

    async def relabel_endpoint(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Move an endpoint between groups and replace its labels (the leader's pod watch)."""
        state = await self._batched(request, lambda reads, writes: endpoints.relabel_endpoint(reads, writes, request), "Tenant", "Network")
        return state.to_json()

    async def alloc_address(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return await self._batched_on_network_id(request, endpoints.alloc_address)

    async def release_address(self, request: Mapping[str, Any]) -> str:
        return await self._batched_on_network_id(request, endpoints.release_address)

    async def _batched_on_network_id(self, request: Mapping[str, Any], plan: Callable[[Reads, Writes, Mapping[str, Any]], T]) -> T:
        network_id = request.get("NetworkID")
        tenant, network, _ = endpoints.parse_network_id(network_id if isinstance(network_id, str) else "")
        key = {"TenantName": tenant, "NetworkName": network}
        return await self._batched(key, lambda reads, writes: plan(reads, writes, request))

    async def _batched(
        self, request: Mapping[str, Any], plan: Callable[[Reads, Writes], T], tenant_field: str = "TenantName", net_field: str = "NetworkName"
    ) -> T:
        return (await self._batched_at(request, plan, tenant_field, net_field))[0]

    async def _batched_at(
        self, request: Mapping[str, Any], plan: Callable[[Reads, Writes], T], tenant_field: str = "TenantName", net_field: str = "NetworkName"
    ) -> tuple[T, int]:
        """Run `plan` in this network's next batch; its result and the revision it committed at."""
        batch_key = f"{request.get(tenant_field, '')}:{request.get(net_field, '')}"
        batch = self._batches.setdefault(batch_key, _Batch())
        slot: dict[str, Any] = {}
        batch.pending.append((plan, slot))
        async with batch.lock:
            if not slot:
                work, batch.pending = batch.pending, []
                await self._commit_batch(work)
        if not batch.pending and not batch.lock.locked():
            self._batches.pop(batch_key, None)
        if "error" in slot:
            raise slot["error"]
        return slot["result"], slot["revision"]

    async def _commit_batch(self, work: list[tuple[Callable[[Reads, Writes], Any], dict[str, Any]]]) -> None:
        try:
            for attempt in range(COMMIT_ATTEMPTS):
                if attempt:
                    await self.store.sync()  # our local read was stale: catch up, then replan
                reads = Reads(self.store, self._records)
                writes, outcomes = Writes(reads), []
                for plan, _ in work:
                    checkpoint, saved_writes = reads.checkpoint(), writes.ops()
                    try:
                        outcomes.append(("result", plan(reads, writes)))
                    except ModelError as exc:
                        reads.restore(checkpoint)
                        writes.reset(saved_writes)
                        outcomes.append(("error", exc))
                if not writes and any(kind == "result" for kind, _ in outcomes):
                    # Answered from local state alone (a retried create finds its endpoint):
                    # a barrier through the log first, so that a leader cut off from the
                    # majority answers 503 rather than acknowledging anything.
                    await self.store.sync()
                committed = self.store.revision if not writes else None
                if committed is None:
                    result = await self.store.txn(reads.guards(), writes.ops())
                    committed = result.revision if result.succeeded else None
                    if committed is not None:
                        self._records.committed(reads.written(writes.ops()), committed)
                if committed is not None:
                    for (_, slot), (kind, value) in zip(work, outcomes, strict=True):
                        slot[kind], slot["revision"] = value, committed
                    return
            error: Exception = ConflictRetryError("endpoint state kept changing during the write; retry")
        except Exception as exc:  # store unavailable, invalid input …: every waiter learns it
            error = exc
        except BaseException:
            # The committing caller was cancelled (it gave up: the node lost the leadership,
            # or it is shutting down). The other requests of its batch wait for an answer
            # in their slots; without one they would commit someone else's batch and find
            # none. Their write may still apply, as after any store timeout.
            for _, slot in work:
                slot["error"] = UnavailableError(
                    "the write was abandoned before it committed (this node stopped leading); it may still apply — retrying it is safe"
                )
            raise
        for _, slot in work:
            slot["error"] = error

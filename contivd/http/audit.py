"""The audit trail: who wrote what through the API, and how it ended.

The node that executes a write (the Raft leader; others forward to it, naming the caller)
records one entry per write: logged at once, and stored with its neighbours in one store
transaction per BATCH_SECONDS, so a burst of pod starts costs a few extra Raft writes, not one
per pod. The store keeps the newest MAX_ENTRIES (older ones are deleted in the same
transaction); the log keeps everything the log retention keeps.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections import deque
from collections.abc import Mapping

import trio

from raftstore import KeyValueStore, Op, StoreError

from ..state.audit import AUDIT, AuditEntry, entry_id

log = logging.getLogger("contivd.audit")
BATCH_SECONDS = 0.2
MAX_ENTRIES = 1000
# The body fields that name what a /plugin/* write touches (Contiv's request shapes).
_BODY_KEYS = ("TenantName", "Tenant", "NetworkName", "Network", "ServiceName", "EndpointID", "AllocSubnetPool", "IPv4Address")


def object_key(params: Mapping[str, str], body: bytes) -> str:
    """What a write touched: its path parameters (`networks/default:net1`), else the body's
    identifying fields (`TenantName=default NetworkName=net1 EndpointID=…`), else ''."""
    if params:
        return "/".join(params.values())
    try:
        value = json.loads(body) if body.strip() else None
    except (ValueError, RecursionError):  # not JSON, or nested past the decoder's stack (the handler answers 400)
        return ""
    if not isinstance(value, dict):
        return ""
    return " ".join(f"{name}={value[name]}" for name in _BODY_KEYS if isinstance(value.get(name), str | int) and value.get(name) != "")


def stored(store: KeyValueStore) -> list[AuditEntry]:
    """The stored entries, oldest first (this node's replica)."""
    return AUDIT.list_nowait(store)


class AuditTrail:
    """Entries waiting for the store, and the task that writes them (`run`, owned by main)."""

    def __init__(self, store: KeyValueStore, node_name: str, max_entries: int = MAX_ENTRIES):
        self.store = store
        self.node_name = node_name
        self.max_entries = max_entries
        self._pending: deque[AuditEntry] = deque(maxlen=max_entries)  # if the store is down for long, the oldest go
        self._wake = trio.Event()
        self._sequence = itertools.count()

    def record(self, who: str, method: str, route: str, obj: str, status: int) -> None:
        entry = AuditEntry(time.time(), self.node_name, who, method, route, obj, status)
        log.info("audit: %s %s %s [%s] -> %d", entry.who, entry.method, entry.route, entry.object, entry.status)
        self._pending.append(entry)
        self._wake.set()

    async def flush(self) -> None:
        """Store what is pending, dropping the oldest stored entries beyond max_entries."""
        batch = list(self._pending)
        if not batch:
            return
        self._pending.clear()
        held = AUDIT.ids_nowait(self.store)  # keys only: decoding up to max_entries values per flush cost more than the writes audited
        excess = max(0, len(held) + len(batch) - self.max_entries)
        ops: list[Op] = [AUDIT.delete(id) for id in held[:excess]]
        ops += [AUDIT.put(entry_id(entry, self.node_name, next(self._sequence)), entry) for entry in batch[-self.max_entries :]]
        try:
            await self.store.txn(success=ops)
        except StoreError as exc:
            log.warning("audit: storing %d entries failed (kept for the next try): %s", len(batch), exc)
            kept = [*batch, *self._pending][-self.max_entries :]  # beyond the bound, the oldest go (they were logged)
            self._pending = deque(kept, maxlen=self.max_entries)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            await trio.sleep(BATCH_SECONDS)  # what arrives meanwhile goes into the same transaction
            await self.flush()
            if self._pending:  # the store refused: try again later, not in a tight loop
                await trio.sleep(1.0)
                self._wake.set()

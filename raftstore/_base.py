"""The store's calls over a StateMachine, whatever carries commands to it.

StateMachineStore implements reads, writes, watches and leases in terms of four things a
subclass provides: how a command is proposed and its result returned (`_propose`), how a read
catches up with every earlier commit (`_linearize`), how local state is read (`_read_state`),
and the clock lease times come from. `Store` proposes through Raft; `MemoryStore` applies to a
local StateMachine at once. Subclasses call `_fire_changed()` (on the trio loop) after state
changed while a watch is open (`_open_watches`).
"""

from __future__ import annotations

import builtins
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import trio

from . import _commands
from ._errors import LeaseNotFoundError, StoreError, UnavailableError
from ._fsm import HistoryRecord, StateMachine
from ._image import StoreImage
from ._keys import validate_key, validate_prefix
from ._types import Compare, Delete, DeletePrefix, Event, EventType, KeyValue, Op, Put, TxnResult

log = logging.getLogger("raftstore")
T = TypeVar("T")


def _raw(key: str, entry: Any) -> tuple[Any, ...]:
    """Copy an entry's fields under the apply lock; decoding happens after releasing it, so a
    large listing does not stall Raft ticks."""
    return (key, entry.value, entry.create_revision, entry.mod_revision, entry.version, entry.lease)


def _decode(raw: tuple[Any, ...]) -> KeyValue:
    key, value, create_revision, mod_revision, version, lease = raw
    return KeyValue(key, json.loads(value), create_revision, mod_revision, version, lease)


def _kv(key: str, entry: Any) -> KeyValue:
    return _decode(_raw(key, entry))


def _event(record: HistoryRecord) -> Event:
    revision, kind, key, prev, value = record[:5]
    return Event(EventType(kind), key, None if prev is None else json.loads(prev), None if value is None else json.loads(value), revision)


_ERRORS: dict[str, type[StoreError]] = {"lease_not_found": LeaseNotFoundError}


def raise_for_error(result: dict[str, Any]) -> dict[str, Any]:
    if isinstance(result, dict) and "error" in result:
        raise _ERRORS.get(result["error"], StoreError)(result.get("message", result["error"]))
    return result


class StateMachineStore(ABC):
    """get/list/put/delete/txn, watches and leases over a StateMachine (see the module doc)."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock  # wall-clock seconds, carried inside lease commands
        self._changed = trio.Event()
        self._change_pending = False
        self._open_watches = 0
        # Cancel scopes bound to a view of the leadership (_leadership_view): cancelled by its
        # first change (_cancel_bound), so that work bound to a leader that is gone is abandoned.
        self._bound: dict[trio.CancelScope, object] = {}

    def _leadership_view(self) -> object:
        """What a change of leadership changes, as this store sees it (a single store: nothing)."""
        return None

    def _cancel_bound(self, view: object) -> None:
        for scope, bound_to in self._bound.items():
            if bound_to != view:
                scope.cancel()

    @contextmanager
    def cancelled_on_leadership_change(self) -> Iterator[trio.CancelScope]:
        """A cancel scope that the first change of this store's view of the leadership
        cancels: it gains or loses leadership, or follows another leader or none. Lets a
        caller abandon work bound to a leader that is gone (contivd's forwarded and
        leader-only requests); check `scope.cancelled_caught` after the block. Costs a dict
        entry, no task."""
        scope = trio.CancelScope()
        self._bound[scope] = self._leadership_view()
        try:
            with scope:
                yield scope
        finally:
            del self._bound[scope]

    @abstractmethod
    async def _propose(self, command: dict[str, Any]) -> dict[str, Any]:
        """Apply `command` through the log; its result, or raise (see raise_for_error)."""

    @abstractmethod
    async def _linearize(self) -> None:
        """Return once local state includes every write committed before the call."""

    @abstractmethod
    def _read_state(self, fn: Callable[[StateMachine], T]) -> T:
        """Run `fn` against local state, safely against concurrent applies. Keep `fn` short."""

    def _fire_changed(self) -> None:
        self._change_pending = False  # before waking: waiters re-read state after this
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    async def _read(self, fn: Callable[[StateMachine], T], stale: bool) -> T:
        if not stale:
            await self._linearize()
        return self._read_state(fn)

    # ---- key-value API -----------------------------------------------------------------------

    async def get(self, key: str, *, stale: bool = False) -> KeyValue | None:
        """The current value of `key`, or None."""
        validate_key(key)
        if not stale:
            await self._linearize()
        return self.get_nowait(key)

    async def list(self, prefix: str, *, stale: bool = False) -> builtins.list[KeyValue]:
        """Every key under `prefix`, sorted by key."""
        validate_prefix(prefix)
        if not stale:
            await self._linearize()
        return self.list_nowait(prefix)

    async def list_with_revision(self, prefix: str, *, stale: bool = False) -> tuple[builtins.list[KeyValue], int]:
        """Like list(), plus the store revision the listing reflects (to start a watch after it)."""
        validate_prefix(prefix)
        raws, revision = await self._read(lambda fsm: ([_raw(k, e) for k, e in fsm.range(prefix)], fsm.revision), stale)
        return [_decode(r) for r in raws], revision

    async def export_image(self) -> StoreImage:
        """Every key and lease at one revision, linearizable: a consistent point-in-time copy
        of the whole store (what a backup holds). Copied under the apply lock in one step."""
        return await self._read(lambda fsm: fsm.export_image(), stale=False)

    async def sync(self) -> int:
        """Wait until local state includes every write committed before this call; returns
        the revision. Then `*_nowait` reads are linearizable up to that point."""
        await self._linearize()
        return self.revision

    def get_nowait(self, key: str) -> KeyValue | None:
        """This member's applied value of `key`, without waiting (stale unless after sync())."""
        validate_key(key)
        found = self._read_state(lambda fsm: fsm.get(key))
        return None if found is None else _kv(*found)

    def list_nowait(self, prefix: str) -> builtins.list[KeyValue]:
        """This member's applied keys under `prefix`, without waiting (see get_nowait)."""
        validate_prefix(prefix)
        return [_decode(r) for r in self._read_state(lambda fsm: [_raw(k, e) for k, e in fsm.range(prefix)])]

    def keys_nowait(self, prefix: str) -> builtins.list[str]:
        """This member's applied keys under `prefix`, sorted, without their values: what a
        caller that only counts or trims a prefix needs, without decoding every value."""
        validate_prefix(prefix)
        return self._read_state(lambda fsm: fsm.keys(prefix))

    async def put(self, key: str, value: Any, *, lease: int | None = None) -> int:
        """Store `value` at `key`; returns the new revision."""
        return (await self.txn(success=[Put(key, value, lease)])).revision

    async def delete(self, key: str) -> bool:
        """Delete `key`; True if it existed."""
        return bool((await self.txn(success=[Delete(key)])).results[0])

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every key under `prefix`; returns how many."""
        return int((await self.txn(success=[DeletePrefix(prefix)])).results[0])

    async def txn(self, compares: Sequence[Compare] = (), success: Sequence[Op] = (), failure: Sequence[Op] = ()) -> TxnResult:
        """If every compare holds apply `success`, else `failure` — atomically, at one revision."""
        result = await self._propose(_commands.txn_command(compares, success, failure))
        return TxnResult(result["succeeded"], result["revision"], tuple(result["results"]))

    @property
    def revision(self) -> int:
        """This member's applied revision (stale by nature)."""
        return self._read_state(lambda fsm: fsm.revision)

    # ---- watches -----------------------------------------------------------------------------

    def changes_nowait(self, prefix: str, start_revision: int) -> tuple[builtins.list[Event], int]:
        """This member's changes under `prefix` from `start_revision` on, and its applied
        revision, read atomically without waiting. If the history no longer reaches back that
        far, the one event is RESYNC carrying the full current state under the prefix."""
        validate_prefix(prefix)
        read = self._read_state
        records, current = read(lambda f: (f.events_since(start_revision, prefix), f.revision))
        if records is not None:
            return [_event(record) for record in records], current
        raws, current = read(lambda f: ([_raw(k, e) for k, e in f.range(prefix)], f.revision))
        return [Event(EventType.RESYNC, prefix, None, None, current, tuple(_decode(r) for r in raws))], current

    async def watch(self, prefix: str, *, start_revision: int | None = None) -> AsyncIterator[Event]:
        """Changes under `prefix` in commit order, forever.

        With `start_revision`, replay from that revision first. If the history no longer
        reaches back that far, the first event is RESYNC carrying the full current state
        under the prefix; events after it continue from there.
        """
        validate_prefix(prefix)
        self._open_watches += 1
        try:
            next_revision = start_revision if start_revision is not None else self.revision + 1
            while True:
                changed = self._changed
                events, current = self.changes_nowait(prefix, next_revision)
                for event in events:
                    yield event
                next_revision = max(next_revision, current + 1)
                if current < next_revision:
                    await changed.wait()
        finally:
            self._open_watches -= 1

    async def wait_past(self, revision: int) -> int:
        """Until this member has applied a revision after `revision`; returns the one it has.
        For a reader that pulls its own changes (`changes_nowait`): a `watch` would decode
        every change once more just to say that something changed."""
        self._open_watches += 1
        try:
            while True:
                changed = self._changed
                current = self.revision
                if current > revision:
                    return current
                await changed.wait()
        finally:
            self._open_watches -= 1

    # ---- leases ------------------------------------------------------------------------------

    async def grant_lease(self, ttl: float) -> int:
        """A new lease that lives `ttl` seconds past its last keepalive; returns its id."""
        if not 0.5 <= ttl <= 86400:
            raise ValueError(f"lease ttl {ttl!r} must be between 0.5 and 86400 seconds")
        result = await self._propose({"op": "lease_grant", "rid": _commands.new_request_id(), "ttl": ttl, "now": self._clock()})
        return int(result["lease"])

    async def keepalive(self, lease: int) -> None:
        """Extend the lease by its ttl from now; LeaseNotFoundError if it is gone."""
        await self._propose({"op": "lease_keepalive", "rid": _commands.new_request_id(), "id": lease, "now": self._clock()})

    async def revoke_lease(self, lease: int) -> None:
        """Drop the lease and delete its keys now."""
        await self._propose({"op": "lease_revoke", "rid": _commands.new_request_id(), "id": lease})

    async def keep_lease_alive(self, lease: int, ttl: float) -> None:
        """Renew `lease` every ttl/3 until cancelled. Transient unavailability is logged and
        retried; a lease that is gone raises LeaseNotFoundError (the owner must re-register)."""
        while True:
            await trio.sleep(ttl / 3)
            try:
                await self.keepalive(lease)
            except UnavailableError as exc:
                log.warning("lease %s keepalive failed: %s", lease, exc)

    async def _expire_leases(self, now: float, leader_since: float) -> None:
        """Revoke leases whose owners stopped renewing (the leader's job; see expired_leases)."""
        for lease, expires_at in self._read_state(lambda f: f.expired_leases(now, leader_since)):
            try:
                await self._propose({"op": "lease_revoke", "id": lease, "expires_at": expires_at})
            except (UnavailableError, LeaseNotFoundError) as exc:
                log.info("expiring lease %s: %s", lease, exc)

"""Typed doors to the store: a family of records under one prefix, or one record under one key.

A `Family` knows where its records live and how they are parsed and rendered, so a caller reads
and writes records by id (`TOKENS.get(store, "ops")`, `NODES.put(name, record)`) and never spells
a key or handles a stored JSON value. Reads come in the store's two speeds: `get`/`list` ask the
store (linearizable on the leader), `*_nowait` read this member's applied copy. Writes are ops
(`put`, `delete`, guarded by `unchanged`) for the caller's transaction, so batching and guards
stay the caller's decision.

Not responsible for: what a record means (its module), when to write it (its owner).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from raftstore import Compare, Delete, Event, KeyValue, KeyValueStore, Put, absent, mod_revision_is

from .records import RecordError

R = TypeVar("R")


@dataclass(frozen=True)
class Held(Generic[R]):
    """A record as read, and the revision that last changed it: the guard of a write that must
    not overwrite a change made meanwhile (`Family.unchanged`, `Single.unchanged`)."""

    record: R
    mod_revision: int


@dataclass(frozen=True)
class Family(Generic[R]):
    """Records of one kind, each stored as JSON under `prefix + id`."""

    prefix: str
    parse: Callable[[Any], R]
    render: Callable[[R], Any]

    def key(self, id: str) -> str:
        return f"{self.prefix}{id}"

    def _id(self, kv: KeyValue) -> str:
        return kv.key[len(self.prefix) :]

    def get_nowait(self, store: KeyValueStore, id: str) -> R | None:
        kv = store.get_nowait(self.key(id))
        return None if kv is None else self.parse(kv.value)

    async def get(self, store: KeyValueStore, id: str) -> Held[R] | None:
        kv = await store.get(self.key(id))
        return None if kv is None else Held(self.parse(kv.value), kv.mod_revision)

    def list_nowait(self, store: KeyValueStore) -> list[R]:
        """Every record, in key order; a record that does not parse raises."""
        return [self.parse(kv.value) for kv in store.list_nowait(self.prefix)]

    async def list(self, store: KeyValueStore) -> list[R]:
        """Every record, in key order; a record that does not parse raises."""
        return [self.parse(kv.value) for kv in await store.list(self.prefix)]

    def ids_nowait(self, store: KeyValueStore) -> builtins.list[str]:
        """The ids, in key order, without decoding a value."""
        return [key[len(self.prefix) :] for key in store.keys_nowait(self.prefix)]

    async def ids(self, store: KeyValueStore) -> builtins.list[str]:
        return [self._id(kv) for kv in await store.list(self.prefix)]

    def each_nowait(self, store: KeyValueStore) -> builtins.list[tuple[str, R | RecordError]]:
        """Every record by id, in key order, or the RecordError that says why it is unusable (one
        bad record must not hide the rest)."""
        return [(self._id(kv), self._parsed(kv)) for kv in store.list_nowait(self.prefix)]

    async def each(self, store: KeyValueStore) -> builtins.list[tuple[str, R | RecordError]]:
        """`each_nowait`, asking the store."""
        return [(self._id(kv), self._parsed(kv)) for kv in await store.list(self.prefix)]

    def _parsed(self, kv: KeyValue) -> R | RecordError:
        try:
            return self.parse(kv.value)
        except RecordError as exc:
            return exc

    def put(self, id: str, record: R, *, lease: int | None = None) -> Put:
        return Put(self.key(id), self.render(record), lease)

    def delete(self, id: str) -> Delete:
        return Delete(self.key(id))

    def unchanged(self, id: str, held: Held[R] | None) -> Compare:
        """True while the record is as `held` (None: still absent)."""
        return mod_revision_is(self.key(id), 0 if held is None else held.mod_revision)

    async def write(self, store: KeyValueStore, id: str, record: R, *, lease: int | None = None) -> int:
        """Store `record` (the revision it was written at)."""
        return await store.put(self.key(id), self.render(record), lease=lease)

    async def remove(self, store: KeyValueStore, id: str) -> bool:
        return await store.delete(self.key(id))


@dataclass(frozen=True)
class Single(Generic[R]):
    """One record under one key (the cluster CA)."""

    key: str
    parse: Callable[[Any], R]
    render: Callable[[R], Any]

    def get_nowait(self, store: KeyValueStore) -> R | None:
        kv = store.get_nowait(self.key)
        return None if kv is None else self.parse(kv.value)

    async def get(self, store: KeyValueStore) -> Held[R] | None:
        kv = await store.get(self.key)
        return None if kv is None else Held(self.parse(kv.value), kv.mod_revision)

    def put(self, record: R) -> Put:
        return Put(self.key, self.render(record))

    def absent(self) -> Compare:
        return absent(self.key)

    def unchanged(self, held: Held[R]) -> Compare:
        return mod_revision_is(self.key, held.mod_revision)

    def changes(self, store: KeyValueStore) -> AsyncIterator[Event]:
        """Every change of the record (the events say only that it changed: read it again)."""
        return store.watch(self.key)

"""The deterministic state machine behind the store.

`apply(text)` consumes one encoded command and returns a JSON-able result. It reads no clock,
no randomness and no local node state: lease times come inside the command from the proposer.
Everything here is plain data so PySyncObj can snapshot it (pickled to the node's own disk
only, never sent to or from an unauthenticated peer).

Not thread-safe by itself; the node adapter serialises access with a lock.
"""

from __future__ import annotations

import bisect
import json
from collections import OrderedDict, deque
from collections.abc import Iterator
from typing import Any

from ._commands import COMMAND_VERSION
from ._image import KeyRecord, LeaseRecord, StoreImage

# One history record: (revision, "put"|"delete", key, prev_json|None, value_json|None,
# create_revision, version, lease), the last three those of the key after a put (0, 0, None
# after a delete): what a follower of the store needs to reproduce the key exactly. Records
# pickled into snapshots before they were added have only the first five fields.
HistoryRecord = tuple[int, str, str, "str | None", "str | None", int, int, "int | None"]
# One change as a follower of the store receives it: the record without prev (the follower
# knows it): (revision, "put"|"delete", key, value_json|None, create_revision, version, lease).
Change = tuple[int, str, str, "str | None", int, int, "int | None"]


class _Entry:
    """One stored key. Slots keep a 100k-key store small in memory and in snapshots."""

    __slots__ = ("value", "create_revision", "mod_revision", "version", "lease")

    def __init__(self, value: str, create_revision: int, mod_revision: int, version: int, lease: int | None):
        self.value = value
        self.create_revision = create_revision
        self.mod_revision = mod_revision
        self.version = version
        self.lease = lease

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.value, self.create_revision, self.mod_revision, self.version, self.lease)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.value, self.create_revision, self.mod_revision, self.version, self.lease = state


class _Lease:
    __slots__ = ("ttl", "expires_at", "keys")

    def __init__(self, ttl: float, expires_at: float):
        self.ttl = ttl
        self.expires_at = expires_at
        self.keys: set[str] = set()

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.ttl, self.expires_at, sorted(self.keys))

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.ttl, self.expires_at, keys = state
        self.keys = set(keys)


class StateMachine:
    """Keys with revisions, leases, a bounded change history for watches, request dedup."""

    # Set only by a restore or a recovery, which start a new cluster from an image. A class
    # default, so state machines pickled into snapshots before it existed still load.
    cluster_id: str | None = None
    # Commands applied (those inside a group-commit batch one by one): what the log costs,
    # counted the same on every member. A class default for snapshots taken before it existed.
    commands_applied = 0

    def __init__(self, history_limit: int = 10_000, dedup_limit: int = 10_000):
        self.revision = 0
        self._kv: dict[str, _Entry] = {}
        self._sorted_keys: list[str] = []
        self._history: deque[HistoryRecord] = deque(maxlen=history_limit)
        # Watches from a revision <= this one cannot be served from history: resync instead.
        self.compacted_revision = 0
        self._leases: dict[int, _Lease] = {}
        self._next_lease_id = 1
        self._dedup: OrderedDict[str, Any] = OrderedDict()
        self._dedup_limit = dedup_limit

    # ---- images (backup, restore, recovery) ------------------------------------------------

    def export_image(self) -> StoreImage:
        """Every key and lease at the current revision (callers hold the node lock)."""
        kv = self._kv
        keys = tuple(KeyRecord(k, e.value, e.create_revision, e.mod_revision, e.version, e.lease) for k in self._sorted_keys for e in (kv[k],))
        leases = tuple(LeaseRecord(i, lease.ttl, lease.expires_at) for i, lease in sorted(self._leases.items()))
        return StoreImage(self.revision, keys, leases, self._next_lease_id, self.cluster_id)

    @classmethod
    def from_image(cls, image: StoreImage, history_limit: int = 10_000) -> StateMachine:
        """A state machine holding exactly `image`, with no watch history before its revision."""
        fsm = cls(history_limit=history_limit)
        fsm.revision = fsm.compacted_revision = image.revision
        fsm.cluster_id = image.cluster_id
        fsm._next_lease_id = image.next_lease_id
        for record in image.leases:
            fsm._leases[record.lease_id] = _Lease(record.ttl, record.expires_at)
        for r in image.keys:
            fsm._kv[r.key] = _Entry(r.value, r.create_revision, r.mod_revision, r.version, r.lease)
            if r.lease is not None and r.lease in fsm._leases:
                fsm._leases[r.lease].keys.add(r.key)
        fsm._sorted_keys = sorted(fsm._kv)
        return fsm

    # ---- reads (callers hold the node lock) ----------------------------------------------

    def get(self, key: str) -> tuple[str, _Entry] | None:
        entry = self._kv.get(key)
        return None if entry is None else (key, entry)

    def range(self, prefix: str) -> Iterator[tuple[str, _Entry]]:
        keys = self._sorted_keys
        i = bisect.bisect_left(keys, prefix)
        while i < len(keys) and keys[i].startswith(prefix):
            yield keys[i], self._kv[keys[i]]
            i += 1

    def keys(self, prefix: str) -> list[str]:
        """The keys under `prefix`, sorted: one slice of the sorted index, no entry touched."""
        keys = self._sorted_keys
        start = bisect.bisect_left(keys, prefix)
        if not prefix:
            return keys[start:]
        end = bisect.bisect_left(keys, prefix[:-1] + chr(ord(prefix[-1]) + 1), start)
        return keys[start:end]

    def key_count(self) -> int:
        return len(self._kv)

    def lease_count(self) -> int:
        return len(self._leases)

    def lease_ttl(self, lease_id: int) -> float | None:
        """The lease's ttl, None if this member holds no such lease."""
        lease = self._leases.get(lease_id)
        return None if lease is None else lease.ttl

    def events_since(self, revision: int, prefix: str) -> list[HistoryRecord] | None:
        """History records with revision >= `revision` under `prefix`; None if compacted away."""
        if revision <= self.compacted_revision:
            return None
        found: list[HistoryRecord] = []
        for record in reversed(self._history):
            if record[0] < revision:
                break
            if record[2].startswith(prefix):
                found.append(record)
        found.reverse()
        return found

    def changes_since(self, revision: int) -> list[Change] | None:
        """Every change with revision >= `revision`, as followers of the store receive them;
        None if the history no longer reaches back (or holds records from before changes
        carried the key's revisions): then a follower needs an image."""
        records = self.events_since(revision, "")
        if records is None or (records and len(records[0]) < 8):
            return None
        return [(r[0], r[1], r[2], r[4], r[5], r[6], r[7]) for r in records]

    def apply_changes(self, changes: list[Change]) -> int:
        """A follower of the store applies the changes of revisions after its own, in order:
        afterwards its keys, revision and history equal the voter's at the last revision (the
        lease table stays the voters'). Changes at or below its revision are skipped (already
        held); ValueError for a gap, so a follower never applies out of order. Returns how
        many revisions it advanced."""
        start = self.revision
        for revision, kind, key, value, create_revision, version, lease in changes:
            if revision <= start:
                continue
            if revision > self.revision + 1:
                raise ValueError(f"change at revision {revision} does not follow revision {self.revision}")
            entry = self._kv.get(key)
            prev = None if entry is None else entry.value
            if kind == "put" and value is not None:
                if entry is None:
                    bisect.insort(self._sorted_keys, key)
                self._kv[key] = _Entry(value, create_revision, revision, version, lease)
            elif kind == "delete" and entry is not None:
                del self._kv[key]
                del self._sorted_keys[bisect.bisect_left(self._sorted_keys, key)]
            else:
                raise ValueError(f"change {kind!r} of {key!r} at revision {revision} does not fit this state")
            self._record(revision, kind, key, prev, value, create_revision, version, lease)
            self.revision = revision
        return self.revision - start

    def expired_leases(self, now: float, leader_since: float) -> list[tuple[int, float]]:
        """Leases past their deadline. A new leader grants every lease one full TTL first,
        because keepalives sent to the old leader may not have reached the log."""
        return [(lease_id, lease.expires_at) for lease_id, lease in self._leases.items() if now > lease.expires_at and now > leader_since + lease.ttl]

    # ---- the one write path ----------------------------------------------------------------

    def apply(self, text: str) -> Any:
        """Apply one log entry: a command, or a batch of them (results in a list, in order)."""
        try:
            command = json.loads(text)
        except ValueError:
            return {"error": "bad_command", "message": "undecodable command"}
        if isinstance(command, dict) and command.get("op") == "batch" and command.get("v") == COMMAND_VERSION:
            commands = command.get("cmds", [])
            self.commands_applied += len(commands)
            return [self._apply_command(c) for c in commands]
        self.commands_applied += 1
        return self._apply_command(command)

    def _apply_command(self, command: Any) -> dict[str, Any]:
        try:
            version = command.get("v")
            op = command["op"]
        except (KeyError, AttributeError, TypeError):
            return {"error": "bad_command", "message": "undecodable command"}
        if version != COMMAND_VERSION:
            return {"error": "bad_command", "message": f"unsupported command version {version!r}"}
        rid = command.get("rid")
        if rid is not None and rid in self._dedup:
            cached: dict[str, Any] = self._dedup[rid]
            return cached
        handler = _HANDLERS.get(op)
        if handler is None:
            return {"error": "bad_command", "message": f"unknown command {op!r}"}
        result = handler(self, command)
        if rid is not None:
            self._dedup[rid] = result
            while len(self._dedup) > self._dedup_limit:
                self._dedup.popitem(last=False)
        return result

    # ---- handlers --------------------------------------------------------------------------

    def _barrier(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"revision": self.revision}

    def _txn(self, command: dict[str, Any]) -> dict[str, Any]:
        succeeded = all(self._compare_holds(c) for c in command["if"])
        ops = command["then"] if succeeded else command["else"]
        for op in ops:  # validate the whole branch first: never a partial transaction
            if op["op"] == "put" and op.get("lease") is not None and op["lease"] not in self._leases:
                return {"error": "lease_not_found", "message": f"lease {op['lease']} does not exist"}
        revision = self.revision + 1
        results: list[Any] = []
        changed = False
        for op in ops:
            if op["op"] == "put":
                results.append(self._put(op["key"], op["value"], op.get("lease"), revision))
                changed = True
            elif op["op"] == "delete":
                removed = self._delete(op["key"], revision)
                results.append(removed)
                changed = changed or removed > 0
            else:
                keys = [k for k, _ in self.range(op["prefix"])]
                for key in keys:
                    self._delete(key, revision)
                results.append(len(keys))
                changed = changed or bool(keys)
        if changed:
            self.revision = revision
        return {"succeeded": succeeded, "revision": self.revision, "results": results}

    def _lease_grant(self, command: dict[str, Any]) -> dict[str, Any]:
        lease_id = self._next_lease_id
        self._next_lease_id += 1
        self._leases[lease_id] = _Lease(float(command["ttl"]), float(command["now"]) + float(command["ttl"]))
        return {"lease": lease_id}

    def _lease_keepalive(self, command: dict[str, Any]) -> dict[str, Any]:
        lease = self._leases.get(command["id"])
        if lease is None:
            return {"error": "lease_not_found", "message": f"lease {command['id']} does not exist (expired or revoked)"}
        lease.expires_at = max(lease.expires_at, float(command["now"]) + lease.ttl)
        return {"lease": command["id"], "expires_at": lease.expires_at}

    def _lease_keepalive_many(self, command: dict[str, Any]) -> dict[str, Any]:
        """Renew many leases at one `now` (a voter's coalesced keepalives of its followers):
        per id in order, exactly what a single `lease_keepalive` at that `now` answers, so an
        unknown id fails alone and a repeated id renews twice to the same deadline."""
        return {"results": [self._lease_keepalive({"id": lease_id, "now": command["now"]}) for lease_id in command["ids"]]}

    def _lease_revoke(self, command: dict[str, Any]) -> dict[str, Any]:
        lease = self._leases.get(command["id"])
        if lease is None:
            return {"error": "lease_not_found", "message": f"lease {command['id']} does not exist (expired or revoked)"}
        # An expiry proposed by the leader loses against a keepalive that landed meanwhile.
        if "expires_at" in command and lease.expires_at != command["expires_at"]:
            return {"revoked": False, "revision": self.revision}
        del self._leases[command["id"]]
        if lease.keys:
            revision = self.revision + 1
            for key in sorted(lease.keys):
                self._delete(key, revision)
            self.revision = revision
        return {"revoked": True, "revision": self.revision}

    # ---- primitives ------------------------------------------------------------------------

    def _compare_holds(self, compare: dict[str, Any]) -> bool:
        entry = self._kv.get(compare["key"])
        check = compare["check"]
        if check == "absent":
            return entry is None
        if check == "mod_revision":
            return bool((entry.mod_revision if entry else 0) == compare["value"])
        return entry is not None and bool(entry.value == compare["value"])

    def _put(self, key: str, value: str, lease: int | None, revision: int) -> Any:
        entry = self._kv.get(key)
        prev = None
        if entry is None:
            self._kv[key] = _Entry(value, revision, revision, 1, lease)
            bisect.insort(self._sorted_keys, key)
        else:
            prev = entry.value
            if entry.lease is not None and entry.lease != lease and entry.lease in self._leases:
                self._leases[entry.lease].keys.discard(key)
            entry.value, entry.mod_revision, entry.version, entry.lease = value, revision, entry.version + 1, lease
        if lease is not None:
            self._leases[lease].keys.add(key)
        self._record(revision, "put", key, prev, value, *self._identity(key))
        return None if prev is None else json.loads(prev)

    def _delete(self, key: str, revision: int) -> int:
        entry = self._kv.pop(key, None)
        if entry is None:
            return 0
        del self._sorted_keys[bisect.bisect_left(self._sorted_keys, key)]
        if entry.lease is not None and entry.lease in self._leases:
            self._leases[entry.lease].keys.discard(key)
        self._record(revision, "delete", key, entry.value, None, 0, 0, None)
        return 1

    def _identity(self, key: str) -> tuple[int, int, int | None]:
        entry = self._kv[key]
        return entry.create_revision, entry.version, entry.lease

    def _record(
        self, revision: int, kind: str, key: str, prev: str | None, value: str | None, create_revision: int, version: int, lease: int | None
    ) -> None:
        history = self._history
        if history.maxlen is not None and len(history) == history.maxlen:
            self.compacted_revision = max(self.compacted_revision, history[0][0])
        history.append((revision, kind, key, prev, value, create_revision, version, lease))


_HANDLERS = {
    "barrier": StateMachine._barrier,
    "txn": StateMachine._txn,
    "lease_grant": StateMachine._lease_grant,
    "lease_keepalive": StateMachine._lease_keepalive,
    "lease_keepalive_many": StateMachine._lease_keepalive_many,  # needs wire format 3 on every member (_lease_batch.py)
    "lease_revoke": StateMachine._lease_revoke,
}

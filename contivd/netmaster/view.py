"""A consistent read of the configuration and the state a plan consults, and the plan's writes.

Netmaster plans run against a View built right after `store.sync()` on the leader. The View
implements the model's `Lookup` and records every state key it hands out with its mod revision;
`guards()` turns those into transaction compares, so a plan commits only if nothing it looked
at changed (serialisable), also across a leader change.

Plans read and write the typed records of contivd.state through its tables: a record is decoded
once per plan when first read and rendered once per write; records are frozen, so a plan
changes one by writing a new one (`dataclasses.replace`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from typing import Any, TypeVar, cast

from raftstore import Compare, DeletePrefix, KeyValueStore, Op, Put, mod_revision_is

from ..model import PolicyRule
from ..nodes import registered_nodes
from ..state import EndpointState, EpgPolicyState, NodeRecord, tables
from ..state.stored import Family
from ..state.tables import ConfigObject
from . import resources

R = TypeVar("R")


class Reads:
    """Guarded reads of individual records: every key handed out is recorded with its mod
    revision, and `guards()` turns the record into transaction compares. Records are cached
    per plan, so a plan sees its own writes when it reads a record again."""

    def __init__(self, store: KeyValueStore, cache: tables.RecordCache | None = None):
        self._store = store
        self._cache = cache
        self._reads: dict[str, int] = {}
        self._records: dict[str, object] = {}  # key → record (None: absent), as this plan sees it

    def read(self, table: Family[R], id: str = "") -> R | None:
        """The record `id` of `table` (None if absent); the read is guarded."""
        key = table.key(id)
        if key not in self._records:
            read = tables.read if self._cache is None else self._cache.read
            found = read(self._store, table, id)
            self._records[key], self._reads[key] = found
        return cast("R | None", self._records[key])

    def written(self, ops: Iterable[Op]) -> list[tuple[str, object]]:
        """The record each Put of `ops` writes (this plan's view of its key): for the cache."""
        return [(op.key, self._records[op.key]) for op in ops if isinstance(op, Put)]

    def scan(self, table: Family[R], id_prefix: str = "") -> dict[str, R]:
        """Committed records whose id starts with `id_prefix`, merged with this plan's own
        writes (unguarded: callers guard through a key every relevant writer also writes)."""
        found = tables.scan(self._store, table, id_prefix)
        prefix, cut = table.key(id_prefix), len(table.prefix)
        for key, record in self._records.items():
            if key.startswith(prefix):
                if record is None:
                    found.pop(key[cut:], None)
                else:
                    found[key[cut:]] = cast(R, record)
        return found

    def remember(self, table: Family[R], id: str, record: R | None) -> None:
        """Make later reads of `id` in this plan see `record` (the plan is writing it)."""
        key = table.key(id)
        if key not in self._reads:
            self._reads[key] = tables.revision(self._store, table, id)
        self._records[key] = record

    def checkpoint(self) -> dict[str, object]:
        """A restore point: records are frozen, so a copy of the cache is enough."""
        return dict(self._records)

    def restore(self, checkpoint: dict[str, object]) -> None:
        """Forget everything since `checkpoint()`, including keys first read after it."""
        self._records = checkpoint

    def guards(self) -> list[Compare]:
        return [mod_revision_is(key, revision) for key, revision in sorted(self._reads.items())]


class View(Reads):
    """Every configuration object by kind and key (the model's `Lookup`), plus guarded state
    reads. Building one lists the whole configuration: for configuration writes and reads."""

    def __init__(self, store: KeyValueStore):
        super().__init__(store)
        self.config_version = self.read(tables.CONFIG_VERSION) or 0
        self._objects: dict[str, dict[str, ConfigObject]] = defaultdict(dict)
        for id, obj in tables.scan(store, tables.CONFIG).items():
            kind, key = tables.split_config_id(id)
            self._objects[kind][key] = obj

    # ---- Lookup -----------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> ConfigObject | None:
        return self._objects.get(kind, {}).get(key)

    def items(self, kind: str) -> Iterable[ConfigObject]:
        return [self._objects[kind][k] for k in sorted(self._objects.get(kind, {}))]

    def endpoint_ips(self, kind: str, key: str) -> Collection[str]:
        return [ep.ip_address for ep in self.endpoints(kind, key)]

    def tags_in_use(self, encap: str) -> Collection[int]:
        tags = self.read(tables.TAGS)
        return resources.in_use(tags, "vlan" if encap == "vlan" else "vxlan") if tags else []

    def nodes(self) -> list[NodeRecord]:
        """The registered (live) nodes, unguarded: for answers, never for a plan's decisions."""
        return registered_nodes(self._store)

    # ---- derived reads ----------------------------------------------------------------------

    def endpoints(self, kind: str, key: str) -> list[EndpointState]:
        """Endpoint states of a network (`tenant:net`) or group (`tenant:group`).

        Guarded through the network state: every endpoint create or delete rewrites it."""
        tenant, _, name = key.partition(":")
        group = None
        if kind == "endpointGroup":
            obj = self.get("endpointGroup", key)
            if obj is None:
                return []
            group, name = tables.group_id(tenant, name), obj["networkName"]
        self.read(tables.NETWORKS, tables.network_id(tenant, name))
        eps = tables.scan(self._store, tables.ENDPOINTS, tables.endpoints_of(tenant, name)).values()
        return [ep for ep in eps if group is None or ep.endpoint_group_key == group]

    def owned_policy_states(self, tenant: str) -> tuple[dict[str, EpgPolicyState], dict[str, PolicyRule]]:
        """EpgPolicy and policyRule states of a tenant's groups (ids start `<tenant>:`), by id.

        Only configuration writes change them, so CONFIG_VERSION already guards them."""
        return tables.scan(self._store, tables.POLICIES, f"{tenant}:"), tables.scan(self._store, tables.POLICY_RULES, f"{tenant}:")

    def put_object(self, kind: str, key: str, obj: ConfigObject | None) -> None:
        """Let handlers see the configuration as it will be after this write."""
        if obj is None:
            self._objects[kind].pop(key, None)
        else:
            self._objects[kind][key] = obj


class Writes:
    """The ops a plan commits, in order; a later write to a key replaces an earlier one.
    Each write is also shown to `reads`, so the rest of the plan reads what it wrote."""

    def __init__(self, reads: Reads) -> None:
        self._reads = reads
        self._ops: dict[str, Op] = {}

    def put(self, table: Family[R], id: str, record: R) -> None:
        op = table.put(id, record)
        self._ops.pop(op.key, None)
        self._ops[op.key] = op
        self._reads.remember(table, id, record)

    def delete(self, table: Family[Any], id: str = "") -> None:
        op = table.delete(id)
        self._ops.pop(op.key, None)
        self._ops[op.key] = op
        self._reads.remember(table, id, None)

    def ops(self) -> list[Op]:
        return list(self._ops.values())

    def reset(self, ops: list[Op]) -> None:
        """Go back to an earlier `ops()` (a plan in a batch failed)."""
        self._ops = {op.key if not isinstance(op, DeletePrefix) else op.prefix: op for op in ops}

    def __bool__(self) -> bool:
        return bool(self._ops)

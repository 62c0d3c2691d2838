"""A consistent read of the configuration and the state a plan consults, and the plan's writes.

Netmaster plans run against a View built right after `store.sync()` on the leader. The View
implements the model's `Lookup` and records every state key it hands out with its mod revision;
`guards()` turns those into transaction compares, so a plan commits only if nothing it looked
at changed (serialisable), also across a leader change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from raftstore import Compare, Delete, DeletePrefix, KeyValue, KeyValueStore, Op, Put, mod_revision_is

from ..state import keys as layout
from . import resources


class Reads:
    """Guarded reads of individual keys: every key handed out is recorded with its mod
    revision, and `guards()` turns the record into transaction compares. Values are private
    mutable copies, cached, so a plan sees its own changes when it reads a key again."""

    def __init__(self, store: KeyValueStore):
        self._store = store
        self._reads: dict[str, int] = {}
        self._states: dict[str, Any] = {}

    def state(self, key: str) -> Any:
        """A private mutable copy of a state value (None if absent); the read is guarded."""
        if key not in self._states:
            kv: KeyValue | None = self._store.get_nowait(key)
            self._reads[key] = kv.mod_revision if kv else 0
            self._states[key] = kv.value if kv else None  # freshly decoded: already a private copy
        return self._states[key]

    def list_states(self, prefix: str) -> dict[str, Any]:
        """Committed values under `prefix` merged with this plan's own writes (unguarded:
        callers guard through a key every relevant writer also writes)."""
        found = {kv.key: kv.value for kv in self._store.list_nowait(prefix)}
        for key, value in self._states.items():
            if key.startswith(prefix):
                if value is None:
                    found.pop(key, None)
                else:
                    found[key] = value
        return found

    def remember(self, key: str, value: Any) -> None:
        """Make later reads of `key` in this plan see `value` (the plan is writing it)."""
        if key not in self._reads:
            self.state(key)
        self._states[key] = value

    def checkpoint(self) -> dict[str, Any]:
        """A cheap restore point: plans replace nested values instead of mutating them, so a
        copy of each top-level dict is enough (state fields are scalars or replaced wholesale)."""
        return {k: dict(v) if isinstance(v, dict) else v for k, v in self._states.items()}

    def restore(self, checkpoint: dict[str, Any]) -> None:
        """Forget everything since `checkpoint()`, including keys first read after it."""
        self._states = checkpoint

    def guards(self) -> list[Compare]:
        return [mod_revision_is(key, revision) for key, revision in sorted(self._reads.items())]


class View(Reads):
    """Every configuration object by kind and key (the model's `Lookup`), plus guarded state
    reads. Building one lists the whole configuration: for configuration writes and reads."""

    def __init__(self, store: KeyValueStore):
        super().__init__(store)
        version = self.state(layout.CONFIG_VERSION)
        self.config_version = int(version) if version else 0
        self._objects: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for kv in store.list_nowait(layout.MODEL_PREFIX):
            kind, _, key = kv.key[len(layout.MODEL_PREFIX) :].partition("/")
            self._objects[kind][key] = kv.value

    # ---- Lookup -----------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None:
        return self._objects.get(kind, {}).get(key)

    def items(self, kind: str) -> Iterable[Mapping[str, Any]]:
        return [self._objects[kind][k] for k in sorted(self._objects.get(kind, {}))]

    def endpoint_ips(self, kind: str, key: str) -> Collection[str]:
        return [ep["ipAddress"] for ep in self.endpoints(kind, key)]

    def tags_in_use(self, encap: str) -> Collection[int]:
        tags = self.state(layout.TAGS_STATE)
        return resources.in_use(tags, "vlan" if encap == "vlan" else "vxlan") if tags else []

    # ---- derived reads ----------------------------------------------------------------------

    def endpoints(self, kind: str, key: str) -> list[dict[str, Any]]:
        """Endpoint states of a network (`tenant:net`) or group (`tenant:group`).

        Guarded through the network state: every endpoint create or delete rewrites it."""
        tenant, _, name = key.partition(":")
        group = None
        if kind == "endpointGroup":
            obj = self.get("endpointGroup", key)
            if obj is None:
                return []
            group, name = f"{name}:{tenant}", obj["networkName"]
        self.state(layout.net_state(tenant, name))
        prefix = f"{layout.EPS_PREFIX}{layout.net_id(tenant, name)}-"
        eps = [kv.value for kv in self._store.list_nowait(prefix)]
        return [ep for ep in eps if group is None or ep.get("endpointGroupKey") == group]

    def owned_policy_states(self, tenant: str) -> dict[str, Any]:
        """EpgPolicy and policyRule states of a tenant's groups (keys start `<tenant>:`).

        Only configuration writes change them, so CONFIG_VERSION already guards them."""
        found: dict[str, Any] = {}
        for prefix in (layout.POLICY_PREFIX, layout.POLICY_RULE_PREFIX):
            for kv in self._store.list_nowait(f"{prefix}{tenant}:"):
                found[kv.key] = kv.value
        return found

    def put_object(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
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

    def put(self, key: str, value: Any) -> None:
        self._ops.pop(key, None)
        self._ops[key] = Put(key, value)
        self._reads.remember(key, value)

    def delete(self, key: str) -> None:
        self._ops.pop(key, None)
        self._ops[key] = Delete(key)
        self._reads.remember(key, None)

    def ops(self) -> list[Op]:
        return list(self._ops.values())

    def reset(self, ops: list[Op]) -> None:
        """Go back to an earlier `ops()` (a plan in a batch failed)."""
        self._ops = {op.key if not isinstance(op, DeletePrefix) else op.prefix: op for op in ops}

    def __bool__(self) -> bool:
        return bool(self._ops)

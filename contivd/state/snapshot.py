"""A typed, revision-tagged copy of the store's `/contiv.io/` tree, kept up to date from one watch.

Every node reader (agent, CNI server, status page, metrics) reads this instead of decoding
store values itself: each value is parsed once, when its change arrives, into the records of
`records.py`. `StateSnapshot` is the pure part (apply an event, answer lookups, remember what
changed at which revision); `StateCache` is the trio shell that feeds it from the store (`changes_nowait`, woken by `wait_past`).

Consistency: the snapshot is only changed by the cache task between its awaits, so a reader
that does not await between two lookups sees one revision. Readers that need a revision at
least as new as a write they made call `wait_revision` with the write's revision.

Not responsible for: writing (the netmaster), configuration objects' meaning (contivd.model:
they are kept as the stored dicts).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from openflow.inputs import NetpolPod
from raftstore import Event, EventType, KeyValue, KeyValueStore, StoreError

from ..model import PolicyRule
from . import keys
from .records import (
    EndpointGroupState,
    EndpointState,
    KubeServiceState,
    NetworkState,
    NodeRecord,
    RecordError,
    ServiceLBState,
    netpol_pod_from_json,
    policy_rule_from_json,
)

log = logging.getLogger("contivd.state")
JOURNAL_REVISIONS = 4096  # how far back `changes_since` can answer; older asks get None (rebuild)


@dataclass(frozen=True, order=True)
class Change:
    """One changed object: its kind (`endpoint`, `network`, `group`, `rule`, `service`,
    `provider`, `node`, `k8s-service`, `k8s-netpol`, `object`, `other`) and id."""

    kind: str
    id: str


_PREFIXES: tuple[tuple[str, str], ...] = (
    (keys.EPS_PREFIX, "endpoint"),
    (keys.NETS_PREFIX, "network"),
    (keys.EPGS_PREFIX, "group"),
    (keys.POLICY_RULE_PREFIX, "rule"),
    (keys.SERVICE_LB_PREFIX, "service"),
    (keys.PROVIDER_PREFIX, "provider"),
    (keys.NODES_PREFIX, "node"),
    (keys.K8S_SERVICES_PREFIX, "k8s-service"),
    (keys.K8S_NETPOL_PREFIX, "k8s-netpol"),
    (keys.MODEL_PREFIX, "object"),
)


def classify(key: str) -> Change:
    """Which object a store key holds (pure)."""
    for prefix, kind in _PREFIXES:
        if key.startswith(prefix):
            return Change(kind, key[len(prefix) :])
    return Change("other", key)


class StateSnapshot:
    """Typed objects by id, the revision they are at, and a journal of recent changes."""

    def __init__(self) -> None:
        self.revision = 0
        self.endpoints: dict[str, EndpointState] = {}
        self.networks: dict[str, NetworkState] = {}
        self.groups: dict[str, EndpointGroupState] = {}  # by `<group>:<tenant>`
        self.rules: dict[str, PolicyRule] = {}
        self.services: dict[str, ServiceLBState] = {}  # by `<service>:<tenant>`
        self.providers: dict[str, tuple[str, ...]] = {}  # provider IPs by `<service>:<tenant>`
        self.nodes: dict[str, NodeRecord] = {}
        self.k8s_services: dict[str, KubeServiceState] = {}  # by `<namespace>/<name>`
        self.k8s_netpol: dict[str, NetpolPod] = {}  # compiled NetworkPolicy rules by pod `<namespace>/<name>`
        self.objects: dict[str, dict[str, Mapping[str, Any]]] = {}  # model kind → key → stored object
        self.other: dict[str, Any] = {}  # global config/state and tag bitmaps: as stored
        self.problems: dict[str, str] = {}  # key → why its value was not usable
        self._journal: deque[tuple[int, Change]] = deque()
        self._oldest = 0  # changes_since answers for revisions >= this

    # ---- applying changes (the cache task only) -----------------------------------------

    def apply(self, event: Event) -> None:
        """One watch event; RESYNC replaces everything."""
        if event.type is EventType.RESYNC:
            self.reset(event.kvs, event.revision)
            return
        self._set(event.key, None if event.type is EventType.DELETE else event.value)
        self.revision = max(self.revision, event.revision)
        self._journal.append((event.revision, classify(event.key)))
        while len(self._journal) > JOURNAL_REVISIONS:
            self._oldest = self._journal.popleft()[0] + 1

    def reset(self, kvs: Iterable[KeyValue], revision: int) -> None:
        for table in (
            self.endpoints,
            self.networks,
            self.groups,
            self.rules,
            self.services,
            self.providers,
            self.nodes,
            self.k8s_services,
            self.k8s_netpol,
        ):
            table.clear()
        self.objects.clear()
        self.other.clear()
        self.problems.clear()
        for kv in kvs:
            self._set(kv.key, kv.value)
        self.revision = revision
        self._journal.clear()
        self._oldest = revision + 1  # nothing before the reset can be answered incrementally

    def _set(self, key: str, value: Any) -> None:
        change = classify(key)
        self.problems.pop(key, None)
        try:
            self._store(change, value)
        except RecordError as exc:
            self.problems[key] = str(exc)
            self._store(change, None)  # an unusable object is absent, not stale

    def _store(self, change: Change, value: Any) -> None:
        kind, id_ = change.kind, change.id
        if kind == "object":
            model_kind, _, key = id_.partition("/")
            bucket = self.objects.setdefault(model_kind, {})
            _put(bucket, key, None if value is None else dict(value))
            return
        parsed: Any = value
        if value is not None:
            if kind == "endpoint":
                parsed = EndpointState.from_json(value)
            elif kind == "network":
                parsed = NetworkState.from_json(value)
            elif kind == "group":
                parsed = EndpointGroupState.from_json(value)
            elif kind == "rule":
                parsed = policy_rule_from_json(value)
            elif kind == "service":
                parsed = ServiceLBState.from_json(value)
            elif kind == "provider":
                if not isinstance(value, Mapping):
                    raise RecordError(f"provider {id_}: stored value is not an object")
                parsed = tuple(str(ip) for ip in value.get("Providers") or ())
            elif kind == "node":
                parsed = NodeRecord.from_json(value)
            elif kind == "k8s-service":
                parsed = KubeServiceState.from_json(value)
            elif kind == "k8s-netpol":
                parsed = netpol_pod_from_json(value)
        tables: dict[str, dict[str, Any]] = {
            "endpoint": self.endpoints,
            "network": self.networks,
            "group": self.groups,
            "rule": self.rules,
            "service": self.services,
            "provider": self.providers,
            "node": self.nodes,
            "k8s-service": self.k8s_services,
            "k8s-netpol": self.k8s_netpol,
        }
        _put(tables.get(kind, self.other), id_, parsed)

    # ---- reading -----------------------------------------------------------------------------

    def changes_since(self, revision: int) -> set[Change] | None:
        """What changed after `revision` (exclusive); None when the journal no longer reaches back
        that far (the caller rebuilds from the whole snapshot)."""
        if revision + 1 < self._oldest:
            return None
        return {change for rev, change in self._journal if rev > revision}

    def object(self, kind: str, key: str) -> Mapping[str, Any] | None:
        """A configuration object as stored (contivd.model owns its shape)."""
        return self.objects.get(kind, {}).get(key)

    def network_of(self, endpoint: EndpointState) -> NetworkState | None:
        return self.networks.get(endpoint.net_id)

    def group_of(self, endpoint: EndpointState) -> EndpointGroupState | None:
        return self.groups.get(endpoint.endpoint_group_key) if endpoint.endpoint_group_key else None

    def network(self, tenant: str, name: str) -> NetworkState | None:
        return self.networks.get(keys.net_id(tenant, name))

    def forwarding_mode(self) -> str:
        """The global object's fwdMode (`bridge` or `routing`; `bridge` while there is none)."""
        config = self.other.get(keys.GLOBAL_CONFIG)
        value = config.get("fwd-mode") if isinstance(config, Mapping) else None
        return str(value) if value else "bridge"

    def private_subnet(self) -> str | None:
        """The global object's pvtSubnet (host access); None while there is no global config."""
        config = self.other.get(keys.GLOBAL_CONFIG)
        value = config.get("pvt-subnet") if isinstance(config, Mapping) else None
        return str(value) if value else None


def _put(table: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


class StateCache:
    """Feeds one StateSnapshot from the store and wakes whoever waits for a revision.

    Changes are pulled with `Store.changes_nowait` (atomic with the revision they reach);
    `Store.wait_past` only says when to pull. A reader that needs a revision this member has applied gets
    it at once (`catch_up` runs synchronously), without waiting for the watch task.
    """

    def __init__(self, store: KeyValueStore):
        self.store = store
        self.snapshot = StateSnapshot()
        self._changed = trio.Event()

    def catch_up(self) -> StateSnapshot:
        """Apply everything this member has applied since the snapshot's revision."""
        snapshot = self.snapshot
        events, current = self.store.changes_nowait(f"{keys.ROOT}/", snapshot.revision + 1)
        for event in events:
            snapshot.apply(event)
        if current > snapshot.revision or events:
            snapshot.revision = max(snapshot.revision, current)
            changed, self._changed = self._changed, trio.Event()
            changed.set()
        return snapshot

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow the store forever; `started` once the snapshot holds this member's state."""
        self.catch_up()
        task_status.started()
        while True:
            try:
                while True:  # catch_up decodes the changes, once: a watch would decode them first only to wake us
                    await self.store.wait_past(self.snapshot.revision)
                    self.catch_up()
            except StoreError as exc:
                log.warning("state: store watch failed, restarting it: %s", exc)
                await trio.sleep(1)

    async def wait_changed(self) -> None:
        """Until the snapshot changes next."""
        await self._changed.wait()

    async def wait_revision(self, revision: int) -> StateSnapshot:
        """The snapshot once this member has applied `revision` (e.g. a write's, made on the leader)."""
        while self.catch_up().revision < revision:
            await self._changed.wait()
        return self.snapshot

    async def sync(self) -> StateSnapshot:
        """The snapshot at least as new as the log's commit point (a linearizable read)."""
        return await self.wait_revision(await self.store.sync())

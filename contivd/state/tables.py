"""Where each record the netmaster writes lives, and how it is read and written: the typed door
to the store's layout for the writer.

Each kind of record is a `stored.Family` (a key prefix, the record's parser and renderer); a
record is addressed by its id under the prefix (a singleton such as the tag state is a family
whose one record has the id ""). `read`, `scan` and `first` decode stored values into records
(with their mod revision where a plan guards on it), `RecordCache` keeps them decoded by
revision; the family's `put` and `delete` make the store operations that write them, in the
stored format `records` declares: the netmaster never spells a key or touches a stored value. The id functions build Contiv's ids (`<net>.<tenant>`, `<group>:<tenant>`, …).

Not responsible for: guarding reads or batching writes (contivd.netmaster.view), node readers
(contivd.state.snapshot keeps its own typed copy from the watch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from raftstore import KeyValueStore

from ..model import PolicyRule
from . import keys
from .records import (
    EndpointGroupState,
    EndpointState,
    EpgPolicyState,
    GlobalConfigState,
    GlobalState,
    NetworkState,
    ServiceLBState,
    ServiceProvidersState,
    TagsState,
    policy_rule_from_json,
    policy_rule_to_json,
)
from .stored import Family

R = TypeVar("R")

ConfigObject = Mapping[str, Any]
"""A configuration object as contivd.model validates and renders it (the stored JSON object)."""


def _config_object(value: Any) -> ConfigObject:
    if not isinstance(value, Mapping):
        raise TypeError(f"configuration object is {type(value).__name__}, not an object")
    return value


NETWORKS: Family[NetworkState] = Family(keys.NETS_PREFIX, NetworkState.from_json, NetworkState.to_json)
ENDPOINTS: Family[EndpointState] = Family(keys.EPS_PREFIX, EndpointState.from_json, EndpointState.to_json)
GROUPS: Family[EndpointGroupState] = Family(keys.EPGS_PREFIX, EndpointGroupState.from_json, EndpointGroupState.to_json)
SERVICES: Family[ServiceLBState] = Family(keys.SERVICE_LB_PREFIX, ServiceLBState.from_json, ServiceLBState.to_json)
PROVIDERS: Family[ServiceProvidersState] = Family(keys.PROVIDER_PREFIX, ServiceProvidersState.from_json, ServiceProvidersState.to_json)
POLICIES: Family[EpgPolicyState] = Family(keys.POLICY_PREFIX, EpgPolicyState.from_json, EpgPolicyState.to_json)
POLICY_RULES: Family[PolicyRule] = Family(keys.POLICY_RULE_PREFIX, policy_rule_from_json, policy_rule_to_json)
TAGS: Family[TagsState] = Family(keys.TAGS_STATE, TagsState.from_json, TagsState.to_json)
GLOBAL_CONFIG: Family[GlobalConfigState] = Family(keys.GLOBAL_CONFIG, GlobalConfigState.from_json, GlobalConfigState.to_json)
GLOBAL_STATE: Family[GlobalState] = Family(keys.GLOBAL_STATE, GlobalState.from_json, GlobalState.to_json)
CONFIG_VERSION: Family[int] = Family(keys.CONFIG_VERSION, int, int)
"""Bumped by every configuration write: config transactions compare it, so two writers that read
the same configuration cannot both commit."""
CONFIG: Family[ConfigObject] = Family(keys.MODEL_PREFIX, _config_object, dict)
"""Every configuration object; ids are `config_id(kind, key)`."""


def config_id(kind: str, key: str) -> str:
    return f"{kind}/{key}"


def split_config_id(id: str) -> tuple[str, str]:
    """`config_id`'s inverse: (kind, key)."""
    kind, _, key = id.partition("/")
    return kind, key


def network_id(tenant: str, network: str) -> str:
    """Contiv's network id `<net>.<tenant>`."""
    return keys.net_id(tenant, network)


def endpoint_id(tenant: str, network: str, endpoint: str) -> str:
    """Contiv's endpoint id `<net>.<tenant>-<endpointID>`."""
    return keys.ep_id(tenant, network, endpoint)


def endpoints_of(tenant: str, network: str) -> str:
    """The id prefix of a network's endpoints."""
    return f"{network_id(tenant, network)}-"


def group_id(tenant: str, group: str) -> str:
    """Contiv's endpoint group (and serviceLB) id `<name>:<tenant>`, the group's `endpointGroupKey`."""
    return f"{group}:{tenant}"


service_id = group_id


def read(store: KeyValueStore, table: Family[R], id: str = "") -> tuple[R | None, int]:
    """The record stored under `id` (None if absent) and its mod revision (0 if absent)."""
    kv = store.get_nowait(table.key(id))
    return (None, 0) if kv is None else (table.parse(kv.value), kv.mod_revision)


def scan(store: KeyValueStore, table: Family[R], id_prefix: str = "") -> dict[str, R]:
    """Every record whose id starts with `id_prefix`, by id."""
    cut = len(table.prefix)
    return {kv.key[cut:]: table.parse(kv.value) for kv in store.list_nowait(table.key(id_prefix))}


def first(store: KeyValueStore, table: Family[R], match: Callable[[str], bool]) -> R | None:
    """The first record, in id order, whose id `match`es (only that one is decoded)."""
    cut = len(table.prefix)
    for kv in store.list_nowait(table.prefix):
        if match(kv.key[cut:]):
            return table.parse(kv.value)
    return None


def revision(store: KeyValueStore, table: Family[Any], id: str = "") -> int:
    """The mod revision of the record under `id`, 0 if absent (nothing is decoded)."""
    return store.mod_revision_nowait(table.key(id))


class RecordCache:
    """Decoded records by key and the revision that wrote them, so a record is decoded once
    however often it is read: a key's value at a given mod revision never changes. The
    netmaster also files what it committed (`committed`), so its next plan reads the network
    it just wrote without decoding it. Bounded: emptied when it holds `size` keys."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._records: dict[str, tuple[int, object]] = {}

    def read(self, store: KeyValueStore, table: Family[R], id: str = "") -> tuple[R | None, int]:
        """As `read`, decoding only what this cache does not hold at its current revision."""
        key = table.key(id)
        held = self._records.get(key)
        if held is not None and held[0] == store.mod_revision_nowait(key):
            return cast(R, held[1]), held[0]
        found = read(store, table, id)
        if found[0] is not None:
            self._file(key, found[1], found[0])
        return found

    def committed(self, records: Iterable[tuple[str, object]], revision: int) -> None:
        """File records a transaction committed at `revision` (key, record as written)."""
        for key, record in records:
            self._file(key, revision, record)

    def _file(self, key: str, revision: int, record: object) -> None:
        if len(self._records) >= self._size and key not in self._records:
            self._records.clear()
        self._records[key] = (revision, record)

"""The store's configuration and derived state as a whole: what `contivd import-contiv` plans
over, replaces in one transaction, and guards.

An import owns every configuration object and all derived state (not node registrations, not
the Kubernetes watch's records, not contivd's tokens and audit trail). Its transaction compares
the configuration version (a configuration write racing the import fails it) and every network
state (an endpoint created meanwhile fails it instead of dangling), and bumps the version.

Not responsible for: what the entries mean (contivd.migrate.plan computes them through the
netmaster), when to refuse an import (contivd.migrate.commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raftstore import Compare, Delete, KeyValue, KeyValueStore, Op, Put, mod_revision_is

from . import keys

DEFAULT_OBJECTS = frozenset({keys.model("global", "global"), keys.model("tenant", "default")})  # what every store holds from its start
_OWNED_PREFIXES = (keys.MODEL_PREFIX, f"{keys.ROOT}/state/", f"{keys.ROOT}/master/config/")


@dataclass(frozen=True)
class OwnedTree:
    """What an import would replace, and the configuration version, as this member holds them."""

    version: KeyValue | None
    entries: Mapping[str, KeyValue]

    @classmethod
    def read_nowait(cls, store: KeyValueStore) -> OwnedTree:
        return cls(store.get_nowait(keys.CONFIG_VERSION), {kv.key: kv for prefix in _OWNED_PREFIXES for kv in store.list_nowait(prefix)})

    def user_content(self) -> list[str]:
        """What makes the store not empty for an import: configuration objects beyond the
        defaults (`<type>/<key>`), then endpoints (their keys), each sorted."""
        objects = sorted(k for k in self.entries if k.startswith(keys.MODEL_PREFIX) and k not in DEFAULT_OBJECTS)
        endpoints = sorted(k for k in self.entries if k.startswith(keys.EPS_PREFIX))
        return [k.removeprefix(keys.MODEL_PREFIX) for k in objects] + endpoints

    def replacement(self, entries: Mapping[str, Any]) -> tuple[list[Compare], list[Op]]:
        """The guards and ops of one transaction that makes the owned tree hold `entries`
        (key → value) and nothing else, and bumps the configuration version."""
        version = self.version
        guards = [mod_revision_is(keys.CONFIG_VERSION, version.mod_revision if version else 0)]
        guards += [mod_revision_is(k, kv.mod_revision) for k, kv in sorted(self.entries.items()) if k.startswith(keys.NETS_PREFIX)]
        ops: list[Op] = [Delete(k) for k in sorted(self.entries) if k not in entries]
        ops += [Put(k, v) for k, v in sorted(entries.items())]
        ops.append(Put(keys.CONFIG_VERSION, (int(version.value) if version else 0) + 1))
        return guards, ops


class PlannedTree:
    """An import's planned store contents (key → value, the configuration version aside),
    addressed by object; the values stay the netmaster's JSON, which contivd.migrate.plan lays
    Contiv's allocations over in place."""

    def __init__(self, entries: dict[str, Any]):
        self.entries = entries

    @classmethod
    def read_nowait(cls, store: KeyValueStore) -> PlannedTree:
        """Everything under Contiv's root but the configuration version, as this member holds it."""
        return cls({kv.key: kv.value for kv in store.list_nowait(f"{keys.ROOT}/") if kv.key != keys.CONFIG_VERSION})

    def tags(self) -> dict[str, Any]:
        """The VLAN, VXLAN, local VLAN and EPG id bitsets."""
        value: dict[str, Any] = self.entries[keys.TAGS_STATE]
        return value

    def network(self, tenant: str, name: str) -> dict[str, Any]:
        value: dict[str, Any] = self.entries[keys.net_state(tenant, name)]
        return value

    def group(self, tenant: str, name: str) -> dict[str, Any]:
        value: dict[str, Any] = self.entries[keys.epg_state(tenant, name)]
        return value

    def set_object(self, kind: str, key: str, value: Any) -> None:
        self.entries[keys.model(kind, key)] = value

    def set_endpoint(self, endpoint_id: str, value: Any) -> None:
        self.entries[keys.ep_state(endpoint_id)] = value

    def puts(self) -> list[Op]:
        return [Put(key, value) for key, value in self.entries.items()]


def network_states(entries: Mapping[str, Any]) -> list[Any]:
    """The network states among planned `entries`, by key."""
    return [value for key, value in sorted(entries.items()) if key.startswith(keys.NETS_PREFIX)]

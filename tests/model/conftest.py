"""An in-memory `Lookup` and builders of validated objects for the model tests."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import pytest

from contivd.model import SPECS, kind_for, validate


def make(collection: str, **body: Any) -> dict[str, Any]:
    """A validated object, keyed by what its body says (so it always passes the key check)."""
    return validate(collection, body, SPECS[kind_for(collection)].key_of(body))


class FakeLookup:
    """The stored world of a test: objects by type and key, endpoint IPs, allocated tags."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Mapping[str, Any]]] = {}
        self.endpoints: dict[tuple[str, str], list[str]] = {}
        self.tags: dict[str, set[int]] = {"vlan": set(), "vxlan": set()}

    def add(self, collection: str, **body: Any) -> dict[str, Any]:
        obj = make(collection, **body)
        self.objects.setdefault(kind_for(collection), {})[obj["key"]] = obj
        return obj

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None:
        return self.objects.get(kind, {}).get(key)

    def items(self, kind: str) -> Iterable[Mapping[str, Any]]:
        return list(self.objects.get(kind, {}).values())

    def endpoint_ips(self, kind: str, key: str) -> Collection[str]:
        return self.endpoints.get((kind, key), [])

    def tags_in_use(self, encap: str) -> Collection[int]:
        return self.tags[encap]


GLOBAL = {
    "name": "global",
    "fwdMode": "bridge",
    "arpMode": "proxy",
    "networkInfraType": "default",
    "vlans": "1-4094",
    "vxlans": "1-10000",
    "pvtSubnet": "198.19.0.0/16",
}


@pytest.fixture
def world() -> FakeLookup:
    """Global config, tenant `default`, network `net1` (198.18.1.0/24, gw .254) and group `web`."""
    lookup = FakeLookup()
    lookup.add("globals", **GLOBAL)
    lookup.add("tenants", tenantName="default")
    lookup.add("networks", tenantName="default", networkName="net1", encap="vxlan", subnet="198.18.1.0/24", gateway="198.18.1.254")
    lookup.add("endpointGroups", tenantName="default", groupName="web", networkName="net1")
    return lookup

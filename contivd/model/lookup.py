"""What the pure model checks may read of the stored world: a narrow, read-only protocol.

The store layer implements it over its snapshot (tests use an in-memory fake). Objects are the
validated dicts `objects.validate` returns, stored under their model key.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol


class Lookup(Protocol):
    """Read access to stored objects plus the two bits of allocator state the checks need."""

    def get(self, kind: str, key: str) -> Mapping[str, Any] | None:
        """The stored object of type `kind` (e.g. `"network"`) under `key`, or None."""

    def items(self, kind: str) -> Iterable[Mapping[str, Any]]:
        """Every stored object of type `kind`, in any order."""

    def endpoint_ips(self, kind: str, key: str) -> Collection[str]:
        """IPv4 addresses of the endpoints attached to network or endpointGroup `key`."""

    def tags_in_use(self, encap: str) -> Collection[int]:
        """VLAN ids (`"vlan"`) or VNIs (`"vxlan"`) currently allocated."""

"""A point-in-time image of the whole store: what a backup carries and a restore seeds.

Plain, immutable data taken from the state machine at one revision (under its lock, so no
write lands half-way) and turned back into a state machine by `StateMachine.from_image`.
Watch history and request ids are not part of it: a restored store starts with no history
(watches from an older revision get a `resync`) and a fresh deduplication window.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeyRecord:
    """One key as stored: value as canonical JSON text, etcd-style revisions, its lease."""

    key: str
    value: str
    create_revision: int
    mod_revision: int
    version: int
    lease: int | None


@dataclass(frozen=True)
class LeaseRecord:
    """One lease: its TTL in seconds and its deadline (wall-clock seconds, the proposer's)."""

    lease_id: int
    ttl: float
    expires_at: float


@dataclass(frozen=True)
class StoreImage:
    """Every key and lease at `revision`; `cluster_id` names the cluster (None before any restore)."""

    revision: int
    keys: tuple[KeyRecord, ...]
    leases: tuple[LeaseRecord, ...]
    next_lease_id: int
    cluster_id: str | None = None

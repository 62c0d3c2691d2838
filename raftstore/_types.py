"""Typed values that cross the store's public surface. All frozen: callers cannot corrupt state."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class KeyValue:
    """A stored key with etcd-style revisions.

    `create_revision` is the revision that created the key, `mod_revision` the one that last
    changed it, `version` counts writes since creation, `lease` the owning lease id (or None).
    """

    key: str
    value: Any
    create_revision: int
    mod_revision: int
    version: int
    lease: int | None = None


class EventType(enum.StrEnum):
    PUT = "put"
    DELETE = "delete"
    # History before the requested revision was compacted: `kvs` holds the full current state
    # under the watched prefix at `revision`; the watcher must replace what it knew.
    RESYNC = "resync"


@dataclass(frozen=True)
class Event:
    """One change, delivered in commit order. Events of one transaction share a revision."""

    type: EventType
    key: str
    prev_value: Any
    value: Any
    revision: int
    kvs: tuple[KeyValue, ...] = ()


# --- transaction building blocks -----------------------------------------------------------


@dataclass(frozen=True)
class Compare:
    """A transaction guard. Build with `absent()`, `mod_revision_is()` or `value_is()`."""

    key: str
    check: Literal["absent", "mod_revision", "value"]
    value: Any = None


def absent(key: str) -> Compare:
    """True when `key` does not exist."""
    return Compare(key, "absent")


def mod_revision_is(key: str, revision: int) -> Compare:
    """True when `key` was last modified at `revision` (0 means: does not exist)."""
    return Compare(key, "mod_revision", int(revision))


def value_is(key: str, value: Any) -> Compare:
    """True when `key` exists and holds `value` (compared as canonical JSON)."""
    return Compare(key, "value", value)


@dataclass(frozen=True)
class Put:
    key: str
    value: Any
    lease: int | None = None


@dataclass(frozen=True)
class Delete:
    key: str


@dataclass(frozen=True)
class DeletePrefix:
    prefix: str


Op = Put | Delete | DeletePrefix


@dataclass(frozen=True)
class TxnResult:
    """`succeeded` says which branch ran; `revision` is the store revision after the transaction."""

    succeeded: bool
    revision: int
    # Per op of the branch that ran: for Put the previous value (None if created), for
    # Delete/DeletePrefix the number of keys removed.
    results: tuple[Any, ...] = field(default_factory=tuple)


# --- observability -------------------------------------------------------------------------


@dataclass(frozen=True)
class LeadershipChange:
    """Delivered when this node gains or loses leadership, or learns of a new leader."""

    is_leader: bool
    leader: str | None
    term: int


@dataclass(frozen=True)
class StoreStatistics:
    self_address: str | None
    role: Literal["leader", "follower", "candidate", "readonly", "store_follower"]
    leader: str | None
    term: int
    commit_index: int
    last_applied: int
    log_length: int
    revision: int
    keys: int
    leases: int
    voters: tuple[str, ...]
    connected_voters: tuple[str, ...]
    readonly_members: int
    has_quorum: bool
    fsync: bool
    cluster_id: str | None = None  # set once the cluster was seeded by a restore or a recovery
    wire_formats: tuple[tuple[str, int], ...] = ()  # (peer, Raft wire format in use with it) per connected peer
    disk_problem: str | None = None  # why the data dir cannot be written (names the file and errno); writes fail meanwhile
    disk_problem_since: float | None = None  # wall-clock seconds
    unreachable_voters: tuple[tuple[str, float], ...] = ()  # (voter address, wall-clock time since which no link to it is up)
    commit_blockers: tuple[str, ...] = ("unknown",)  # why a write through this member cannot commit now; empty: it can
    followers: int = 0  # a voter: followers of the store connected to it
    # A follower of the store (role "store_follower"): the voter it follows (None: none now),
    # that voter's revision minus its own, and seconds since it last heard from a voter.
    feed_voter: str | None = None
    lag_revisions: int = 0
    lag_seconds: float = 0.0
    commands_applied: int = 0  # a Raft member: log commands its state machine applied (a group-commit entry counts each of its commands)


def commit_blockers(
    *,
    self_address: str | None,
    voters: tuple[str, ...],
    leader: str | None,
    connected_voters: tuple[str, ...],
    has_quorum: bool,
    disk_problem: str | None,
) -> tuple[str, ...]:
    """Why a write through this member cannot commit now, as far as it can tell (none: it can).
    It must be able to write its data dir, reach a majority of the voters (itself included) and
    know a leader that it is or has a link to (a follower cut off from the leader cannot forward)."""
    reasons = []
    if disk_problem is not None:
        reasons.append(f"its data dir is unwritable ({disk_problem})")
    if not has_quorum:
        reached = len(connected_voters) + (self_address is not None and self_address in voters)
        reasons.append(f"it reaches {reached} of {len(voters)} voters, a majority is {len(voters) // 2 + 1}")
    if leader is None:
        reasons.append("it knows no leader (an election is under way, or too few voters are reachable)")
    elif leader != self_address and leader not in connected_voters:
        reasons.append(f"it has no link to the leader {leader}")
    return tuple(reasons)

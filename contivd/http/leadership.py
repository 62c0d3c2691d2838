"""Requests bound to one Raft leader are abandoned the moment this member's view of it changes.

A write runs on the leader and a follower forwards it there. When that leader is cut off, the
forward would wait for a timeout, and a write waiting on a leader that has stepped down would
wait for the store's request timeout. Clients see nothing for that long. Here the request
ends when this member follows a new leader or none, or when it gains or loses leadership.
The client then gets 503 + Retry-After at once and retries, on this node or another one.
Retrying is safe: writes are idempotent by their ids. A write abandoned here may still
apply; nothing is undone, the caller only stops waiting for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from raftstore import UnavailableError

if TYPE_CHECKING:  # annotations only: a follower of the store never loads PySyncObj
    from ..nodes import NodeStore

T = TypeVar("T")


def _name(is_leader: bool, leader: str | None) -> str:
    return "this node" if is_leader else leader or "no leader"


async def unless_leader_changes(store: NodeStore, call: Callable[[], Awaitable[T]], what: str) -> T:
    """`await call()`, unless this member's view of the leader changes first: then it is
    cancelled and UnavailableError (503 + Retry-After) names the change. `call`'s own
    exceptions propagate unchanged. Costs a cancel scope (the store cancels it), no task."""
    was = _name(store.is_leader(), store.leader())
    with store.cancelled_on_leadership_change():
        return await call()
    now = _name(store.is_leader(), store.leader())
    raise UnavailableError(f"{what} abandoned: the Raft leader changed from {was} to {now} (it may still apply; retrying is safe)")

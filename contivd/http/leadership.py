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
from typing import TypeVar

import trio

from raftstore import Store, UnavailableError

T = TypeVar("T")


async def unless_leader_changes(store: Store, call: Callable[[], Awaitable[T]], what: str) -> T:
    """`await call()`, unless this member's view of the leader changes first: then it is
    cancelled and UnavailableError (503 + Retry-After) names the change. `call`'s own
    exceptions propagate unchanged."""
    is_leader, leader = store.is_leader(), store.leader()
    outcome: list[T] = []
    failure: list[Exception] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            try:
                outcome.append(await call())
            except Exception as exc:  # noqa: BLE001 - re-raised below, outside the nursery's exception group
                failure.append(exc)
            nursery.cancel_scope.cancel()

        async def watch() -> None:
            await store.wait_leadership_change(is_leader, leader)
            nursery.cancel_scope.cancel()

        nursery.start_soon(run)
        nursery.start_soon(watch)
    if failure:
        raise failure[0]
    if outcome:
        return outcome[0]
    now = "this node" if store.is_leader() else store.leader() or "no leader"
    was = "this node" if is_leader else leader or "no leader"
    raise UnavailableError(f"{what} abandoned: the Raft leader changed from {was} to {now} (it may still apply; retrying is safe)")

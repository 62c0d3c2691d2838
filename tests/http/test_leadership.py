"""`unless_leader_changes`: a request bound to a leader ends with 503 as soon as this member's
view of the leader changes, and otherwise behaves exactly like the call it wraps.

The store here is a stand-in with the three calls the helper uses; the real Store under real
leadership changes is covered by tests/faults/test_partitions.py (forwards and local writes
abandoned) and tests/raftstore/test_cluster.py (a step-down fails the pending write)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio

from contivd.http.errors import answer_for
from contivd.http.leadership import unless_leader_changes
from contivd.model import NotFoundError
from raftstore import UnavailableError


class Leadership:
    """is_leader / leader / cancelled_on_leadership_change over a settable view, as raftstore's
    Store offers them."""

    def __init__(self, leader: str | None, is_leader: bool = False):
        self.view = (is_leader, leader)
        self.bound: dict[trio.CancelScope, tuple[bool, str | None]] = {}

    def is_leader(self) -> bool:
        return self.view[0]

    def leader(self) -> str | None:
        return self.view[1]

    def follow(self, leader: str | None, is_leader: bool = False) -> None:
        self.view = (is_leader, leader)
        for scope, view in self.bound.items():
            if view != self.view:
                scope.cancel()

    @contextmanager
    def cancelled_on_leadership_change(self) -> Iterator[trio.CancelScope]:
        scope = trio.CancelScope()
        self.bound[scope] = self.view
        try:
            with scope:
                yield scope
        finally:
            del self.bound[scope]


async def test_a_forward_in_flight_ends_with_503_when_the_member_follows_another_leader() -> None:
    store: Any = Leadership("198.18.0.1:9002")
    started = trio.Event()

    async def hangs() -> None:
        started.set()
        await trio.sleep_forever()

    async def change() -> None:
        await started.wait()
        store.follow("198.18.0.2:9002")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(change)
        with pytest.raises(UnavailableError, match=r"from 198\.18\.0\.1:9002 to 198\.18\.0\.2:9002") as caught:
            await unless_leader_changes(store, hangs, "forwarding")
    answer = answer_for(caught.value)
    assert (answer.status, answer.retry_after) == (503, 1)


async def test_losing_leadership_ends_a_local_write_and_names_it() -> None:
    store: Any = Leadership("me:9002", is_leader=True)

    async def hangs() -> None:
        store.follow(None)
        await trio.sleep_forever()

    with pytest.raises(UnavailableError, match="from this node to no leader"):
        await unless_leader_changes(store, hangs, "a write")


async def test_results_and_errors_of_the_call_pass_through_unchanged() -> None:
    store: Any = Leadership("198.18.0.1:9002")

    async def answers() -> int:
        return 42

    async def fails() -> None:
        raise NotFoundError("network default:x not found")

    assert await unless_leader_changes(store, answers, "x") == 42
    with pytest.raises(NotFoundError, match="default:x"):
        await unless_leader_changes(store, fails, "x")

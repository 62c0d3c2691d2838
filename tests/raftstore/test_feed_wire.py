"""What a follower of the store accepts from a voter: pure checks, no sockets."""

from __future__ import annotations

from typing import Any

import pytest

from raftstore import FollowerConfig, Put, StoreConfigError
from raftstore._commands import encode, txn_command
from raftstore._feed_wire import changes_message, decode_changes, decode_image, image_message
from raftstore._follower import FollowerStore, _Leave, _Link, voter_order
from raftstore._fsm import StateMachine
from raftstore._wire import CURRENT_VERSION, WireError, decode_message, encode_message


def wire(message: dict[str, Any]) -> dict[str, Any]:
    """As the follower receives it: through msgpack (tuples arrive as lists)."""
    return decode_message(encode_message(message, CURRENT_VERSION), CURRENT_VERSION)


def voter_state() -> StateMachine:
    fsm = StateMachine()
    for i in range(5):
        fsm.apply(encode(txn_command((), [Put(f"/k/{i}", {"i": i}), Put("/count", i)], ())))
    return fsm


def test_changes_and_images_round_trip() -> None:
    fsm = voter_state()
    changes = fsm.changes_since(1)
    assert changes is not None
    assert decode_changes(wire(changes_message(changes, fsm.revision))) == (changes, fsm.revision)
    image = fsm.export_image()
    decoded = decode_image(wire(image_message(image)))
    assert (decoded.revision, decoded.keys, decoded.leases, decoded.next_lease_id) == (image.revision, image.keys, (), image.next_lease_id)


@pytest.mark.parametrize(
    "message",
    [
        {"revision": 2, "changes": "not a list"},
        {"revision": -1, "changes": []},
        {"revision": 2, "changes": [[1, "upsert", "/a", "1", 1, 1, None]]},
        {"revision": 2, "changes": [[1, "put", "/a", 1, 1, 1, None]]},  # a value that is not JSON text
        {"revision": 2, "changes": [[2, "put", "/a", "1", 1, 1, None], [1, "put", "/b", "1", 1, 1, None]]},  # out of order
        {"revision": 1, "changes": [[2, "put", "/a", "1", 1, 1, None]]},  # past the batch's revision
        {"revision": 2, "changes": [[1, "put", "/a", "1", 1, 1, "lease"]]},
        {"revision": 2, "changes": [[1, "put", "/a"]]},
    ],
)
def test_malformed_changes_are_refused(message: dict[str, Any]) -> None:
    with pytest.raises(WireError, match="follower feed"):
        decode_changes({"type": "feed_changes", **message})


@pytest.mark.parametrize(
    "image",
    [
        None,
        [1, None],
        [1, None, [["/b", "1", 1, 1, 1, None], ["/a", "1", 1, 1, 1, None]]],
        [1, 5, []],
        [1, None, [["/a", "1", 1, 1, 1]]],
        ["x", None, []],
    ],
)
def test_malformed_images_are_refused(image: Any) -> None:
    with pytest.raises(WireError, match="follower feed"):
        decode_image({"type": "feed_image", "revision": 3, "image": image})


async def test_a_follower_never_goes_back_and_never_skips() -> None:
    voter = voter_state()
    follower = FollowerStore(FollowerConfig(("127.0.0.1:9002",), "node7"))
    link = _Link("127.0.0.1:9002", None, None)  # type: ignore[arg-type]  # _receive sends nothing
    follower._receive(link, wire(image_message(voter.export_image())))
    assert follower.revision == 5 and follower.get_nowait("/count") is not None
    older = StateMachine()
    older.apply(encode(txn_command((), [Put("/old", 1)], ())))
    with pytest.raises(_Leave, match="older than the 5 served here"):
        follower._receive(link, wire(image_message(older.export_image())))
    voter.apply(encode(txn_command((), [Put("/k/6", 6)], ())))
    voter.apply(encode(txn_command((), [Put("/k/7", 7)], ())))
    with pytest.raises(_Leave, match="does not follow revision 5"):
        follower._receive(link, wire(changes_message(voter.changes_since(7) or [], 7)))
    follower._receive(link, wire(changes_message(voter.changes_since(1) or [], 7)))  # held revisions skipped
    assert follower.revision == 7 and follower.list_nowait("/k/") == (await follower.list("/k/", stale=True))
    assert follower.statistics().role == "store_follower"


def test_followers_spread_over_the_voters_and_configs_are_checked() -> None:
    voters = ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
    firsts = {voter_order(f"node{i}", voters)[0] for i in range(30)}
    assert firsts == set(voters)
    assert sorted(voter_order("node1", voters)) == sorted(voters)
    for bad in [dict(voters=()), dict(voters=voters, name=""), dict(voters=("198.18.0.1:9002",)), dict(voters=voters, heartbeat_timeout=0.5)]:
        with pytest.raises(StoreConfigError):
            FollowerConfig(**{"name": "n", **bad})  # type: ignore[arg-type]

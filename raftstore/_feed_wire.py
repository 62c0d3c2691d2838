"""What the voter's feed and a follower of the store say to each other, as plain data.

Pure functions on both sides of `_feed.py` (voter) and `_follower.py` (follower): the messages
are `_wire` schema messages (`feed_*`), and everything a follower receives is checked here
before it touches its state machine (a malformed message is a WireError: the connection
is dropped, the follower moves to another voter). Images carry the keys at one revision, not
the lease table, which stays the voters' (a follower forwards every lease call).
"""

from __future__ import annotations

from typing import Any

from ._fsm import Change
from ._image import KeyRecord, StoreImage
from ._wire import WireError


def changes_message(changes: list[Change], revision: int) -> dict[str, Any]:
    """The changes of whole revisions up to `revision`, oldest first."""
    return {"type": "feed_changes", "revision": revision, "changes": changes}


def image_message(image: StoreImage) -> dict[str, Any]:
    keys = [[r.key, r.value, r.create_revision, r.mod_revision, r.version, r.lease] for r in image.keys]
    return {"type": "feed_image", "revision": image.revision, "image": [image.next_lease_id, image.cluster_id, keys]}


def heartbeat_message(revision: int, serving: bool, leader: str | None) -> dict[str, Any]:
    """`serving`: the voter reaches a quorum and knows a leader; a follower leaves one that does not."""
    return {"type": "feed_heartbeat", "revision": revision, "serving": serving, "leader": leader}


def _int(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise WireError(f"follower feed: {what} is not a non-negative integer: {value!r}")
    return value


def _lease(value: Any) -> int | None:
    return None if value is None else _int(value, "lease")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise WireError(f"follower feed: {what} is not text: {type(value).__name__}")
    return value


def decode_changes(message: dict[str, Any]) -> tuple[list[Change], int]:
    """(changes, revision) of a feed_changes message; WireError if anything is off."""
    raw, revision = message.get("changes"), _int(message.get("revision"), "revision")
    if not isinstance(raw, list):
        raise WireError("follower feed: changes is not a list")
    changes: list[Change] = []
    last = 0
    for item in raw:
        if not isinstance(item, list) or len(item) != 7 or item[1] not in ("put", "delete"):
            raise WireError(f"follower feed: malformed change {item!r:.200}")
        change_revision = _int(item[0], "revision")
        if change_revision < last or change_revision > revision:
            raise WireError("follower feed: changes out of revision order")
        last = change_revision
        value = None if item[1] == "delete" else _text(item[3], "value")
        changes.append(
            (change_revision, item[1], _text(item[2], "key"), value, _int(item[4], "create revision"), _int(item[5], "version"), _lease(item[6]))
        )
    return changes, revision


def decode_image(message: dict[str, Any]) -> StoreImage:
    """The StoreImage of a feed_image message (no leases); WireError if anything is off."""
    revision, raw = _int(message.get("revision"), "revision"), message.get("image")
    if not isinstance(raw, list) or len(raw) != 3 or not isinstance(raw[2], list):
        raise WireError("follower feed: malformed image")
    next_lease_id, cluster_id, raw_keys = raw
    keys = []
    for item in raw_keys:
        if not isinstance(item, list) or len(item) != 6:
            raise WireError(f"follower feed: malformed key record {item!r:.200}")
        keys.append(
            KeyRecord(
                _text(item[0], "key"),
                _text(item[1], "value"),
                _int(item[2], "create revision"),
                _int(item[3], "mod revision"),
                _int(item[4], "version"),
                _lease(item[5]),
            )
        )
    if keys != sorted(keys, key=lambda r: r.key) or len({r.key for r in keys}) != len(keys):
        raise WireError("follower feed: image keys are not sorted and unique")
    return StoreImage(
        revision, tuple(keys), (), _int(next_lease_id, "next lease id"), None if cluster_id is None else _text(cluster_id, "cluster id")
    )

"""The leader's next index per follower survives late answers to earlier AppendEntries."""

from __future__ import annotations

from typing import Any

from raftstore._propagation import keep_next_index_on_success
from raftstore._transport import MessageHandler


class _Leader:
    """What the wrapper touches of a SyncObj: its next-index dict (by its private name)."""

    def __init__(self) -> None:
        self._SyncObj__raftNextIndex: dict[str, int] = {"f1": 1}


class _Transport:
    def __init__(self, handler: MessageHandler):
        self.handler = handler

    def wrap_message_handler(self, wrap: Any) -> None:
        self.handler = wrap(self.handler)


def _answer(next_index: int, success: bool = True, reset: bool = False) -> dict[str, Any]:
    return {"type": "next_node_idx", "next_node_idx": next_index, "success": success, "reset": reset}


def _wired() -> tuple[dict[str, int], _Transport]:
    leader = _Leader()
    indexes = leader._SyncObj__raftNextIndex

    def pysyncobj_handler(node: Any, message: dict[str, Any]) -> None:  # what PySyncObj 0.3.17 does with an answer
        if message["reset"] or message["success"]:
            indexes[node] = message["next_node_idx"]

    transport = _Transport(pysyncobj_handler)
    keep_next_index_on_success(leader, transport)
    return indexes, transport


def test_a_late_success_answer_does_not_resend_what_went_out() -> None:
    indexes, transport = _wired()
    indexes["f1"] = 103  # entries 101 and 102 were sent
    transport.handler("f1", _answer(102))  # the answer to the AppendEntries carrying 101
    assert indexes["f1"] == 103
    transport.handler("f1", _answer(104))  # answers move it forward as before
    assert indexes["f1"] == 104


def test_a_rejection_still_moves_it_back() -> None:
    indexes, transport = _wired()
    indexes["f1"] = 103
    transport.handler("f1", _answer(90, success=False, reset=True))  # the follower lacks 90..102 (a reconnect, a restart)
    assert indexes["f1"] == 90


def test_other_messages_pass_unchanged() -> None:
    seen: list[dict[str, Any]] = []
    transport = _Transport(lambda node, message: seen.append(message))
    keep_next_index_on_success(_Leader(), transport)
    transport.handler("f1", {"type": "append_entries", "term": 3})
    assert seen == [{"type": "append_entries", "term": 3}]

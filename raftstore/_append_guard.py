"""A follower truncates its log only from the first conflicting entry (Raft §5.3), not from prevLogIdx.

PySyncObj 0.3.17's AppendEntries handler deletes every local entry after prevLogIdx whenever
the follower holds more than the prev entry, even when the incoming entries equal the local
ones or the message is an empty heartbeat (a resend, or one overtaken by a later message).
The leader never lowers its matchIndex, so it keeps counting the dropped entries as
replicated on this follower: a committed entry can end up on fewer than a majority, and an
acknowledged write is lost if the leader then dies. The handler also rolls back the
membership changes among the dropped entries, and logs CRITICAL "truncating already-applied
log entries" when they were applied.

Before PySyncObj's handler sees an AppendEntries whose prev entry matches, `trim_append_entries`
drops the new entries this member already holds with the same term (moving prevLogIdx and
prevLogTerm forward to the last matching entry M):

- entries remain: the first one conflicts with the local log or extends it, so PySyncObj's
  own truncate-then-append is Raft's rule, and its commit index, min(leaderCommit, log end),
  is min(leaderCommit, index of the last new entry);
- none remain and the log ends at M: the message is already one PySyncObj handles right;
- none remain and the local log goes past M: the entries after M are not confirmed by this
  leader (they may be an older term's, conflicting with its log) but must not be dropped
  either. The message becomes a heartbeat whose prev is the local last entry (so nothing is
  truncated or rolled back), with the leader's commit index capped at M, and the answer's
  next index is capped at M + 1 (PySyncObj would report the log end, making the leader count
  unconfirmed entries as matched).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pysyncobj import SyncObj

from . import _pysyncobj_compat as compat

TermAt = Callable[[int], "int | None"]


def trim_append_entries(message: dict[str, Any], term_at: TermAt, last_index: int) -> tuple[dict[str, Any], int | None]:
    """The message PySyncObj's handler should see instead, and the highest next index this
    member may report for it (None: what the handler computes is right).

    `term_at(i)` is the term of the local entry at index i, None if there is none (past the
    end, or compacted away); `last_index` is the index of the local log's last entry.
    """
    if message.get("type") != "append_entries" or "prevLogIdx" not in message or message.get("transmission") is not None:
        return message, None
    if term_at(message["prevLogIdx"]) != message["prevLogTerm"]:
        return message, None  # PySyncObj rejects it and asks for an earlier index itself
    entries: Sequence[Sequence[Any]] = message.get("entries", ())
    held = 0
    while held < len(entries) and term_at(entries[held][1]) == entries[held][2]:
        held += 1
    if held == 0 and (entries or last_index == message["prevLogIdx"]):
        return message, None
    matched = message["prevLogIdx"] + held
    matched_term = entries[held - 1][2] if held else message["prevLogTerm"]
    if held < len(entries) or last_index == matched:
        return {**message, "prevLogIdx": matched, "prevLogTerm": matched_term, "entries": list(entries[held:])}, None
    return {
        **message,
        "prevLogIdx": last_index,
        "prevLogTerm": term_at(last_index),
        "entries": [],
        "commit_index": min(message["commit_index"], matched),
    }, matched + 1


def install_append_guard(syncobj: SyncObj, transport: Any) -> None:
    """Route every message `transport` delivers to `syncobj` through `trim_append_entries`.

    `transport` is the SyncObj's own (PySyncObj registered its handler there at construction);
    both the handler and the answer it sends run under the node's tick lock.
    """
    handle = compat.private_method(syncobj, "onMessageReceived")
    send_next_index = compat.private_method(syncobj, "sendNextNodeIdx")
    journal = compat.journal(syncobj)
    cap: int | None = None

    def term_at(index: int) -> int | None:
        position = index - journal[0][1]
        return int(journal[position][2]) if 0 <= position < len(journal) else None

    def capped_send_next_index(node: Any, reset: bool = False, nextNodeIdx: int | None = None, success: bool = False) -> None:  # noqa: N803  (PySyncObj's keyword)
        if cap is not None and nextNodeIdx is not None:
            nextNodeIdx = min(nextNodeIdx, cap)
        send_next_index(node, reset=reset, nextNodeIdx=nextNodeIdx, success=success)

    def guarded(node: Any, message: Any) -> None:
        nonlocal cap
        if isinstance(message, dict):
            message, cap = trim_append_entries(message, term_at, int(journal[-1][1]))
        try:
            handle(node, message)
        finally:
            cap = None

    compat.override(syncobj, "sendNextNodeIdx", capped_send_next_index)
    transport.setOnMessageReceivedCallback(guarded)

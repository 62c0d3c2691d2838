"""Commit propagation: how a committed entry reaches the followers, without waste.

PySyncObj's replication (batching off, as raftstore runs it) sends a second AppendEntries per
write only to spread the commit index, and lets a late answer move a follower's next index
back so entries go out twice. Both cost CPU on the write's critical path on every member;
neither is needed for Raft's safety. raftstore's corrections of that behaviour, and the rule
for when a leader may commit without its own copy on disk, live here, apart from the node
that drives SyncObj (`_node.py`); they reach PySyncObj's internals through `_pysyncobj_compat`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pysyncobj import SyncObj

from . import _pysyncobj_compat as compat
from ._transport import MessageHandler

PROPAGATION_DELAY = 0.002  # seconds a leader waits for a new entry to carry the commit index


def followers_hold_a_majority(match_indexes: Sequence[int], last_index: int) -> bool:
    """Whether the other voters alone, not counting the leader, are a majority of all voters
    holding every entry up to `last_index` (a leader's match indexes of its followers).

    Then the leader may commit its whole log before its own copy is on disk (Raft thesis
    10.2.1: the leader need not be part of the majority): followers flush before they
    answer, so every entry is durable on a majority without it. With 3 voters: both
    followers have acknowledged the last entry.
    """
    voters = len(match_indexes) + 1
    return sum(1 for index in match_indexes if index >= last_index) > voters / 2


class CommitPropagation:
    """Spread the commit index to followers a little later, and only if nothing else does.

    With batching off, PySyncObj replicates each new entry at once (what we want) and then,
    after applying it, sends every follower another AppendEntries only to spread the new
    commit index. Under load the next entry carries it anyway, so that second message per
    write only costs the leader and both followers a pickle/encrypt/decrypt round on the
    critical path. Here the apply step marks the propagation pending instead; any
    AppendEntries sent clears it, and a tick sends one after PROPAGATION_DELAY if
    none went out (followers' reads and watches lag by at most that). PySyncObj's apply step
    only *returns* "send now"; the replacement returns False, so the batching flag (which
    PySyncObj also reads to wake the tick thread for every submitted command) stays as is.
    A member alone has nobody to tell: nothing is marked, and no tick runs only to send nothing.
    """

    def __init__(self, syncobj: SyncObj):
        self._syncobj = syncobj
        apply_entries = compat.private_method(syncobj, "applyLogEntries")
        send_entries = compat.private_method(syncobj, "sendAppendEntries")
        self.pending = False
        self.since = 0.0

        def apply_quietly() -> bool:
            applied = syncobj.raftLastApplied
            apply_entries()
            if syncobj.raftLastApplied != applied and syncobj.otherNodes and compat.is_leader(syncobj) and not self.pending:
                self.pending, self.since = True, time.monotonic()
            return False

        def send_and_clear() -> None:
            self.pending = False
            send_entries()

        self._send = send_and_clear
        compat.override(syncobj, "applyLogEntries", apply_quietly)
        compat.override(syncobj, "sendAppendEntries", send_and_clear)

    def wait_time(self, idle: float) -> float:
        """How long the tick loop may wait for events before propagating."""
        if not self.pending:
            return idle
        return max(0.0, min(idle, self.since + PROPAGATION_DELAY - time.monotonic()))

    def propagate_if_due(self) -> None:
        """Send the commit index if no AppendEntries carried it within the delay."""
        if self.pending and time.monotonic() - self.since >= PROPAGATION_DELAY:
            if compat.is_leader(self._syncobj):
                self._send()
            else:
                self.pending = False


def keep_next_index_on_success(syncobj: SyncObj, transport: Any) -> None:
    """A successful answer to an older AppendEntries must not move the leader's next index back.

    PySyncObj sets a follower's next index to the one in its answer whenever the match index
    grows. With more than one AppendEntries in flight (the next entry goes out before the
    slower follower's answer to the previous one arrives; group commit keeps two entries in
    flight; the commit-index propagation), an answer to an earlier message moves it back
    below entries already sent, and the next AppendEntries sends them again, and so on:
    traced here, a follower spent about a quarter of its CPU decoding (and the leader encoding,
    sealing and compressing, on the write's critical path) entries it already had. Raft's next
    index is a hint (the log check on prevLogIdx is the safety): on success keep the larger
    one, as pipelined Raft implementations (etcd's) do. A rejection (`reset`) still sets it, so
    a follower that lost messages (a dropped connection, a restart) is caught up as before.
    """
    next_index = compat.next_indexes(syncobj)

    def wrap(handle: MessageHandler) -> MessageHandler:
        def keep_on_success(node: Any, message: dict[str, Any]) -> None:
            if message.get("type") != "next_node_idx" or message.get("reset") or not message.get("success"):
                handle(node, message)
                return
            sent = next_index.get(node)
            handle(node, message)
            if sent is not None and next_index.get(node, sent) < sent:
                next_index[node] = sent

        return keep_on_success

    transport.wrap_message_handler(wrap)

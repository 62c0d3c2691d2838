"""The replicated log as `Store` sees it: the seam between raftstore's store and its consensus.

`Store` (trio, watches, leases, group commit, retries) is raftstore's own; how a command gets
ordered and applied is not. Today one implementation exists, `RaftNode` (`_node.py`), a
member of the PySyncObj Raft group. Issue 27 adds nodes that are *not* Raft members — followers
of the store that receive a voter's state as a snapshot plus an ordered change stream and
forward their writes — and the store above them must stay the same. So `Store` depends on this
Protocol only, and nothing here imports PySyncObj: a follower must be able to implement it
without loading PySyncObj (issue 27 item 4).

The result codes are PySyncObj's `FAIL_REASON` values, numerically (checked against the
installed PySyncObj by `_pysyncobj_compat.check`), so `RaftNode` hands PySyncObj's callbacks
through untranslated: nothing is added per write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from ._disk_space import DiskSpace
from ._fsm import StateMachine

T = TypeVar("T")

# Outcome of a submitted command, passed to its callback with the result.
SUCCESS = 0
QUEUE_FULL = 1
MISSING_LEADER = 2
DISCARDED = 3
NOT_LEADER = 4
LEADER_CHANGED = 5
DENIED = 6  # PySyncObj's REQUEST_DENIED
UNKNOWN_OUTCOME = 7
FAIL_NAMES = {
    SUCCESS: "SUCCESS",
    QUEUE_FULL: "QUEUE_FULL",
    MISSING_LEADER: "MISSING_LEADER",
    DISCARDED: "DISCARDED",
    NOT_LEADER: "NOT_LEADER",
    LEADER_CHANGED: "LEADER_CHANGED",
    DENIED: "REQUEST_DENIED",
    UNKNOWN_OUTCOME: "UNKNOWN_OUTCOME",
}
# Failures after which the command certainly or possibly did not apply. Retrying is safe:
# writes carry request ids that the state machine deduplicates.
RETRYABLE = frozenset({QUEUE_FULL, MISSING_LEADER, DISCARDED, NOT_LEADER, LEADER_CHANGED, UNKNOWN_OUTCOME})

Callback = Callable[[Any, int], None]  # (result, outcome code); runs on whichever thread applied it


@dataclass(frozen=True)
class ConsensusStatus:
    """What `Store.statistics()` reports of the replication, in raftstore's terms (not
    PySyncObj's status dict, whose keys would otherwise leak into the store)."""

    role: Literal["follower", "candidate", "leader"]
    term: int
    commit_index: int
    last_applied: int
    log_length: int
    other_voters: tuple[tuple[str, bool], ...]  # (address, linked), sorted; this member excluded
    readonly_members: int
    has_quorum: bool
    wire_formats: tuple[tuple[str, int], ...]  # (peer, wire format version) per connected peer; read-only peers: readonly-N
    down_since: dict[str, float]  # voter address → wall-clock time since which it has no link


class Consensus(Protocol):
    """What `Store` needs from the replicated log; every method may be called from any thread.

    The implementation is built with two callbacks, `on_applied()` (after commands were applied
    to the state `read` sees) and `on_leadership()` (after `is_leader()`/`leader()` may have
    changed); both run on whichever thread applied or noticed it and must not block. Command
    results reach the `Callback` given to `submit` the same way.

    `RaftNode` is a Raft member. A follower of the store (issue 27: not a member; a voter
    sends it a snapshot at a revision, then ordered changes) would answer:

    - `submit`: forward the encoded command to a voter, which proposes it; the callback gets
      the result from the voter's answer, or a RETRYABLE code when the link drops first (the
      request id makes the store's retry safe);
    - `read`: the local `StateMachine`, fed by the snapshot and the change stream, under its
      lock; `replace_state` installs a (new) snapshot; `compact` does nothing (no log);
    - `fileno`/`tick`/`attach_loop`/`loop_drives`: `loop_drives()` is always False (it never
      leads), so the store's loop never ticks it; its own thread reads the stream;
    - `is_leader` False; `leader` the leader its voter names; `add_member`/`remove_member`
      forwarded like `submit` (membership changes are log commands, as a read-only member
      forwards them today); `transfer_leadership` answers NOT_LEADER through the callback at
      once (only the leader hands it over); `hold_commands` is never set, `commands_held` False;
    - `disk`: a `DiskSpace("")`, which never fails (it keeps no Raft files);
    - `status`: role "follower", the term, commit index and applied index its voter last
      sent (`log_length` 0), the voters it knows with `linked` for the one it streams from,
      `has_quorum` as that voter reports it;
    - `close`: drop the stream.
    """

    @property
    def disk(self) -> DiskSpace:
        """Whether this member can write its data dir (proposals fail at once while not)."""
        ...

    @property
    def commands_held(self) -> bool:
        """True while a leadership transfer holds proposals back (see `hold_commands`)."""
        ...

    def submit(self, text: str, callback: Callback, lone: bool = False) -> None:
        """Propose an encoded command; `callback(result, code)` runs once it applied or failed.
        `lone`: nothing else is queued or in flight, so a member without followers may wait a
        moment for its own disk instead of a later tick (the caller's loop has nothing else to do)."""
        ...

    def read(self, fn: Callable[[StateMachine], T]) -> T:
        """Run `fn` against the local applied state under its lock. Keep `fn` short."""
        ...

    def fileno(self) -> int:
        """A descriptor readable while there is something for `tick` to do."""
        ...

    def attach_loop(self, attached: bool = True) -> None:
        """An event loop will wait on `fileno()` and `tick()` whenever `loop_drives()`."""
        ...

    def loop_drives(self) -> bool:
        """Whether the attached loop, not the implementation's own thread, should tick now."""
        ...

    def tick(self) -> float:
        """Do what is due; returns the seconds the caller may wait on `fileno()` until the next."""
        ...

    def is_leader(self) -> bool: ...

    def leader(self) -> str | None:
        """The current leader's address as this member knows it, or None."""
        ...

    def transfer_leadership(self, address: str | None, callback: Callback) -> None: ...

    def add_member(self, address: str, callback: Callback) -> None: ...

    def remove_member(self, address: str, callback: Callback) -> None: ...

    def hold_commands(self, held: bool) -> None:
        """While held, commands forwarded by other members are refused as NOT_LEADER."""
        ...

    def replace_state(self, fsm: StateMachine) -> None:
        """Make `fsm` the whole applied state (seeding from an image; see `compact`)."""
        ...

    def compact(self) -> None:
        """Persist the applied state as a snapshot soon, so the log need not produce it."""
        ...

    def status(self) -> ConsensusStatus: ...

    def accept_followers(self, adopt: Callable[..., None]) -> None:
        """Hand connections on the Raft port that introduce themselves as followers of the store
        (not members) to `adopt(sock, channel, hello, unsent)`, once authenticated (_feed.py)."""
        ...

    def close(self) -> None:
        """Stop, release sockets and files. Blocks briefly: call it off the event loop."""
        ...

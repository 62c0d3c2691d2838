"""Starting a new single-voter cluster from an image: restore from a backup, quorum-loss recovery.

`seed_data_dir` writes a data dir the way PySyncObj itself would: it runs one member alone on
the empty dir, replaces its state with the image, appends two more entries and has PySyncObj
write its snapshot. The snapshot then carries both the state and the member list (this member
only, which wins over any `--peers` later: PySyncObj issue #133), and the image sits behind the
snapshot's first entry, so a member that joins later receives it as a snapshot, never by
replaying a log that does not produce it. The seeded cluster gets a new cluster id; members of
the old cluster are not in its member list, so their connections are refused.

`recover_image` reads a stopped member's data dir (snapshot plus every journal entry after it)
into an image, for `contivd recover`. It applies the whole journal tail: a survivor cannot know
which of its last entries the dead majority had committed, and keeping them is what etcd's
--force-new-cluster does too (Raft may commit any of them anyway).

Neither runs inside a live node: both are for a stopped member, from the command line.
"""

from __future__ import annotations

import gzip
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pysyncobj.pickle import load as pickle_load

from . import _pysyncobj_compat as compat
from ._commands import encode
from ._config import StoreConfig
from ._consensus import SUCCESS
from ._durability import fsync_path
from ._errors import StoreConfigError, UnavailableError
from ._fsm import StateMachine
from ._image import StoreImage
from ._journal_check import check_journal_bytes
from ._node import RaftNode

JOURNAL, SNAPSHOT = "raft.journal", "raft.snapshot"
SEED_TIMEOUT_SECONDS = 60.0  # election of a lone member, three entries, one snapshot


def new_cluster_id() -> str:
    return str(uuid.uuid4())


def refuse_non_empty(data_dir: Path) -> None:
    """StoreConfigError if `data_dir` holds anything: a seed never overwrites a member's files."""
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise StoreConfigError(f"{data_dir} is not empty: restore only into a new, empty data dir (move the old one away first)")


def seed_data_dir(config: StoreConfig, image: StoreImage) -> None:
    """Make `config.data_dir` (empty) a single-voter cluster at `config.listen` holding `image`.

    Binds the Raft address while it runs (a few seconds); the caller stops any member using it.
    On failure the data dir is removed again: a journal without the image would otherwise
    start as an empty cluster.
    """
    if config.data_dir is None or config.listen is None:
        raise StoreConfigError("seeding needs a data dir and this member's Raft address")
    refuse_non_empty(config.data_dir)
    try:
        _seed(config, config.data_dir, image)
    except BaseException:
        shutil.rmtree(config.data_dir, ignore_errors=True)
        raise


def _seed(config: StoreConfig, data_dir: Path, image: StoreImage) -> None:
    changed = threading.Event()
    node = RaftNode(replace(config, peers=()), lambda: None, changed.set)
    try:
        deadline = time.monotonic() + SEED_TIMEOUT_SECONDS
        _wait(lambda: node.is_leader(), changed, deadline, f"the lone member at {config.listen} to become leader")
        _barrier(node, deadline)
        node.replace_state(StateMachine.from_image(image, history_limit=config.history_limit))
        _barrier(node, deadline)  # two entries after the image: the snapshot starts past the
        _barrier(node, deadline)  # log a new member could match, so it gets the snapshot
        node.compact()
        snapshot = data_dir / SNAPSHOT
        _wait(snapshot.is_file, threading.Event(), deadline, f"PySyncObj to write {snapshot}")
        fsync_path(str(snapshot))
        fsync_path(str(data_dir))
    finally:
        node.close()


def _wait(done: Callable[[], bool], wake: threading.Event, deadline: float, what: str) -> None:
    while not done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise UnavailableError(f"timed out waiting for {what}")
        wake.wait(min(remaining, 0.05))  # woken early by leadership changes; else polled
        wake.clear()


def _barrier(node: RaftNode, deadline: float) -> None:
    done = threading.Event()
    outcome: list[int] = []

    def finished(result: Any, reason: int) -> None:
        outcome.append(reason)
        done.set()

    node.submit(encode({"op": "barrier"}), finished)
    if not done.wait(max(0.0, deadline - time.monotonic())) or outcome[0] != SUCCESS:
        raise UnavailableError(f"the lone member could not commit an entry (outcome {outcome or 'none'})")


@dataclass(frozen=True)
class Recovered:
    """What `recover_image` found: the image, and which part of the log it came from."""

    image: StoreImage
    snapshot_index: int  # last log index the snapshot covered; 0 without a snapshot
    replayed: int  # journal entries applied on top of the snapshot
    last_index: int  # last log index applied (snapshot or journal)
    last_term: int
    commit_index: int  # the commit index the member last recorded (may lag by ~1 s)


def recover_image(raft_dir: Path, history_limit: int = 10_000) -> Recovered:
    """The state a stopped member's files hold: its snapshot plus every journal entry after it."""
    snapshot, journal = raft_dir / SNAPSHOT, raft_dir / JOURNAL
    if not snapshot.is_file() and not journal.is_file():
        raise StoreConfigError(f"{raft_dir} holds neither {JOURNAL} nor {SNAPSHOT}: not a store member's data (is --data-dir right?)")
    fsm, covered, last_term = StateMachine(history_limit=history_limit), 0, 0
    if snapshot.is_file():
        try:
            with open(snapshot, "rb") as f, gzip.GzipFile(fileobj=f) as g:
                data, last, _, _ = pickle_load(g)
            fsm, covered, last_term = data[1]["fsm"], int(last[1]), int(last[2])
        except Exception as exc:  # noqa: BLE001 - any failure means the same to the operator
            raise StoreConfigError(f"cannot read {snapshot}: {exc}") from None
    if journal.is_file():
        check_journal_bytes(journal.read_bytes(), str(journal))  # PySyncObj would load a damaged tail as it is
    entries, commit_index = compat.read_journal(str(journal)) if journal.is_file() else ([], covered)
    replayed, last_index = 0, covered
    for command, index, term in entries:
        if index <= covered:
            continue
        args = compat.regular_command_args(command)
        if args and isinstance(args[0], str):
            fsm.apply(args[0])
            replayed += 1
        last_index, last_term = index, term
    return Recovered(fsm.export_image(), covered, replayed, last_index, last_term, commit_index)


def move_aside(raft_dir: Path) -> Path:
    """Rename a member's raft dir out of the way (kept, never deleted) and say where it went."""
    target = raft_dir.with_name(f"{raft_dir.name}.before-recover-{time.strftime('%Y%m%dT%H%M%S')}")
    os.rename(raft_dir, target)
    fsync_path(str(raft_dir.parent))
    return target

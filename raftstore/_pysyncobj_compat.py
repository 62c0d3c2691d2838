"""Every reach into PySyncObj's private internals, checked once against the pinned release.

raftstore changes PySyncObj's behaviour in a few places it offers no hook for (durable
journal writes, commit propagation, snapshot loading, a follower's log truncation, proposals
appended where they are made); its message path goes through PySyncObj's own Transport
extension point (`_transport.py`), which needs none of them.
Those patches depend on private, name-mangled attributes that any PySyncObj
release may rename. This module is the only one in raftstore allowed to name them: at import
it checks the installed version against PINNED_VERSION and that every attribute it patches
or reads exists, and raises IncompatiblePySyncObjError naming the missing attribute and the
pinned version. Behaviour (what a patch does and why) stays with the callers (`_node.py`, `_durability.py`,
`_propagation.py`, `_append_guard.py`); this module only says *where* in PySyncObj it goes.

It is imported before PySyncObj's TCP code so that PySyncObj's Windows `inet_ntop` shim never
replaces the process's `socket.inet_ntop` (see `_inet_shim.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _inet_shim  # noqa: F401  (before PySyncObj loads: keeps its inet_ntop shim out)
from ._errors import StoreError

PINNED_VERSION = "0.3.17"  # also pinned in pyproject.toml; docs/raftstore.md says how to upgrade


class IncompatiblePySyncObjError(StoreError):
    """The installed PySyncObj lacks an internal raftstore patches, or is not the pinned release."""


def _incompatible(what: str) -> IncompatiblePySyncObjError:
    return IncompatiblePySyncObjError(
        f"pysyncobj internals changed: {what}; raftstore's patches are written against pysyncobj=={PINNED_VERSION} (pip install pysyncobj=={PINNED_VERSION})"
    )


from pysyncobj import FAIL_REASON, SyncObj, SyncObjConsumer  # noqa: E402  (after the shim stand-in is registered)
from pysyncobj import pickle as pysyncobj_pickle  # noqa: E402
from pysyncobj import syncobj as syncobj_module  # noqa: E402
from pysyncobj import version as installed  # noqa: E402
from pysyncobj.journal import FileJournal, MetaStorer, ResizableFile  # noqa: E402

from ._consensus import FAIL_NAMES  # noqa: E402

# Methods replaced or called, by owner; each must be defined by that class itself (not only by
# a base such as Journal, whose methods are abstract placeholders).
PATCHED_METHODS: dict[type, tuple[str, ...]] = {
    SyncObj: (
        "_SyncObj__applyLogEntries",
        "_SyncObj__sendAppendEntries",
        "_SyncObj__onMessageReceived",
        "_SyncObj__sendNextNodeIdx",
        "_isLeader",
        "_getLeader",
        "_checkCommandsToApply",
    ),
    SyncObjConsumer: ("_deserialize",),
    FileJournal: ("add", "deleteEntriesTo", "flush"),
    ResizableFile: ("write",),
    MetaStorer: ("storeMeta", "getPath"),
}
# Instance attributes read or replaced, by owner; each must be assigned by the class's __init__.
INSTANCE_ATTRIBUTES: dict[type, tuple[str, ...]] = {
    SyncObj: (
        "_SyncObj__raftLog",
        "_SyncObj__properies",
        "_SyncObj__raftNextIndex",
        "_SyncObj__raftMatchIndex",
        "_SyncObj__pipeNotifier",
        "_poller",
    ),
    FileJournal: ("_FileJournal__journalFile", "_FileJournal__metaStorer", "_FileJournal__journal"),
    ResizableFile: ("_ResizableFile__f", "_ResizableFile__mm", "_ResizableFile__fileName"),
}


def check() -> None:
    """Raise IncompatiblePySyncObjError unless PySyncObj is the pinned release with every
    internal the patches use (run at import; tests call it again after removing one)."""
    if installed.VERSION != PINNED_VERSION:
        raise _incompatible(f"installed pysyncobj is {installed.VERSION}, not {PINNED_VERSION}")
    for owner, names in PATCHED_METHODS.items():
        for name in names:
            if name not in vars(owner):
                raise _incompatible(f"{owner.__name__}.{name} is missing")
    for owner, names in INSTANCE_ATTRIBUTES.items():
        assigned = vars(owner)["__init__"].__code__.co_names  # attribute stores compile to names here
        for name in names:
            if name not in assigned:
                raise _incompatible(f"{owner.__name__}.__init__ no longer sets {name}")
    if getattr(getattr(syncobj_module, "_COMMAND_TYPE", None), "REGULAR", None) != 0:
        raise _incompatible("syncobj._COMMAND_TYPE.REGULAR (journal entry kinds) changed")
    # RaftNode hands PySyncObj's callback codes to the store untranslated, as Consensus codes.
    if {name: code for name, code in vars(FAIL_REASON).items() if name.isupper()} != {name: code for code, name in FAIL_NAMES.items()}:
        raise _incompatible("FAIL_REASON codes differ from the Consensus outcome codes (_consensus.py)")


check()


def _private(owner: Any, name: str) -> Any:
    try:
        return getattr(owner, name)
    except AttributeError:
        raise _incompatible(f"{type(owner).__name__} has no {name}") from None


# ---- small reads ---------------------------------------------------------------------------


def is_leader(syncobj: SyncObj) -> bool:
    return bool(syncobj._isLeader())


def last_known_leader(syncobj: SyncObj) -> Any:
    """The leader node PySyncObj last heard of (a Node, an address, or None)."""
    return syncobj._getLeader()


def next_indexes(syncobj: SyncObj) -> dict[Any, int]:
    """The leader's next index per follower (the live dict, changed in place)."""
    indexes: dict[Any, int] = _private(syncobj, "_SyncObj__raftNextIndex")
    return indexes


def voter_match_indexes(syncobj: SyncObj) -> list[int]:
    """The leader's match index of every other voter (read-only members, which PySyncObj
    also tracks there, left out: they never count towards a commit)."""
    match: dict[Any, int] = _private(syncobj, "_SyncObj__raftMatchIndex")
    return [match.get(node, 0) for node in syncobj.otherNodes]


def last_log_index(syncobj: SyncObj) -> int:
    """The index of the last entry in this member's log."""
    return int(journal(syncobj)[-1][1])


def append_submitted(syncobj: SyncObj) -> None:
    """Take the commands queued by replicated calls now, as the tick would: a leader appends
    them and sends AppendEntries (batching is off), a follower forwards them to the leader."""
    syncobj._checkCommandsToApply()


def journal(syncobj: SyncObj) -> Any:
    """The Raft log (a FileJournal with a journal file, else PySyncObj's in-memory journal)."""
    return _private(syncobj, "_SyncObj__raftLog")


# ---- replacing parts of a SyncObj ----------------------------------------------------------


def override(syncobj: SyncObj, name: str, value: Any) -> None:
    """Replace a SyncObj attribute (its private name given unmangled, e.g. "applyLogEntries")
    and keep it out of snapshots: PySyncObj pickles every instance attribute it did not have at
    construction, and closures cannot be pickled."""
    mangled = f"_SyncObj__{name}"
    _private(syncobj, mangled)
    setattr(syncobj, mangled, value)
    _private(syncobj, "_SyncObj__properies").add(mangled)


class _NothingToWake:
    """PySyncObj's own poller and its command pipe, as raftstore runs them: idle."""

    def notify(self) -> None:
        pass

    def poll(self, timeout: float) -> None:
        pass


def drop_command_pipe(syncobj: SyncObj) -> None:
    """PySyncObj writes a byte to a pipe for every command queued, which its tick then polls
    and reads back (four syscalls and an exception per write) to wake its own poller. raftstore
    takes queued commands itself right after queuing them (`append_submitted`), ticks with a
    zero wait and polls its sockets in its own poller (`_poller.EpollPoller`), so that pipe and
    PySyncObj's poller have nothing to wake anyone for: both become no-ops."""
    _private(syncobj, "_SyncObj__pipeNotifier")
    _private(syncobj, "_poller")
    syncobj._SyncObj__pipeNotifier = syncobj._poller = _NothingToWake()


def private_method(syncobj: SyncObj, name: str) -> Callable[..., Any]:
    """A bound private SyncObj method by its unmangled name (the original, to wrap)."""
    method: Callable[..., Any] = _private(syncobj, f"_SyncObj__{name}")
    return method


def regular_command_args(command: bytes) -> tuple[Any, ...] | None:
    """The arguments of a replicated method call stored in a journal entry, or None for
    PySyncObj's own entries (no-op, membership, code version), which carry no store state."""
    if command[:1] != bytes([syncobj_module._COMMAND_TYPE.REGULAR]):
        return None
    call = pysyncobj_pickle.loads(command[1:])
    if isinstance(call, tuple) and len(call) >= 2:
        return tuple(call[1])
    return ()


def read_journal(path: str) -> tuple[list[tuple[bytes, int, int]], int]:
    """A journal file's entries (command, index, term) and the commit index its meta file last
    recorded (PySyncObj saves it at most once a second, so it may lag), without changing it."""
    found = FileJournal(path)
    try:
        return [tuple(found[i]) for i in range(len(found))], int(found.getRaftCommitIndex())
    finally:
        found._destroy()


class ConsumerBase(SyncObjConsumer):  # type: ignore[misc]  # pysyncobj is untyped
    """A SyncObjConsumer whose snapshot load goes through `load_snapshot` (a public hook
    around PySyncObj's private `_deserialize`)."""

    def load_snapshot(self, load: Callable[[], None]) -> None:
        """Override to run code around `load()`, which replaces the replicated state."""
        load()

    def _deserialize(self, data: dict[str, Any]) -> None:
        self.load_snapshot(lambda: SyncObjConsumer._deserialize(self, data))


@dataclass
class JournalFile:
    """A SyncObj's FileJournal and the parts of it the durability patches replace.

    `raw_*` are PySyncObj's originals; `install` puts the replacements in place."""

    journal: Any
    raw_add: Callable[[bytes, int, int], None]
    raw_delete_entries_to: Callable[[int], None]
    meta_path: str
    _resizable: Any
    _meta_storer: Any

    @classmethod
    def of(cls, syncobj: SyncObj) -> JournalFile:
        found = journal(syncobj)
        if not isinstance(found, FileJournal):
            raise _incompatible(f"the raft log is a {type(found).__name__}, not a FileJournal")
        resizable = _private(found, "_FileJournal__journalFile")
        meta_storer = _private(found, "_FileJournal__metaStorer")
        return cls(found, found.add, found.deleteEntriesTo, meta_storer.getPath(), resizable, meta_storer)

    @property
    def path(self) -> str:
        return str(_private(self._resizable, "_ResizableFile__fileName"))

    def fileno(self) -> int:
        """The journal file's descriptor (it changes when PySyncObj grows the file)."""
        return int(_private(self._resizable, "_ResizableFile__f").fileno())

    def mapped_size(self) -> int:
        """Bytes of the journal file PySyncObj has mapped; writes past it must grow the file.
        The mapping's length, not mmap.size() (an fstat of the file, several per write)."""
        return len(_private(self._resizable, "_ResizableFile__mm"))

    def grow_mapping(self, size: int) -> None:
        """Map `size` bytes of the journal file (already allocated to that size by the caller)."""
        _private(self._resizable, "_ResizableFile__mm").resize(size)

    def forget_entries_from(self, count: int) -> None:
        """Drop in-memory entries past `count`: PySyncObj's add lists an entry before writing it."""
        del _private(self.journal, "_FileJournal__journal")[count:]

    def install(
        self,
        *,
        write: Callable[[int, bytes], None],
        add: Callable[[bytes, int, int], None],
        delete_entries_to: Callable[[int], None],
        store_meta: Callable[[dict[str, Any]], None],
    ) -> None:
        self._resizable.write = write
        self.journal.add = add
        self.journal.deleteEntriesTo = delete_entries_to
        self._meta_storer.storeMeta = store_meta

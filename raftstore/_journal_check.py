"""Refuse to start on a damaged journal instead of serving a silently shortened history.

PySyncObj's journal (`raft.journal`) is a header (name, version, the offset where the records
end) and records `size | index, term, command | size`, with no checksum. What PySyncObj does
with a damaged one (measured, see tests/raftstore/test_disk_faults.py): a file cut short or a
tail overwritten still loads — the short or garbled last record is read as it is — and the
member then fails every tick while applying it, logging a traceback each time, or, if the
damage still decodes, applies it. A journal whose end offset points back at an earlier record
loads as a shorter log with no error at all.

So before PySyncObj opens the files, `check_raft_dir` walks every record and cross-checks the
journal with the meta file (the commit index the member recorded) and the snapshot (the last
index it covers). It raises JournalDamagedError naming the file and the first fault when:

- the header is not PySyncObj's, or says the records run past the end of the file (cut short);
- a record's leading and trailing sizes disagree, or a record runs past the records' end;
- the indexes are not consecutive or the terms go down;
- a command no longer decodes (PySyncObj's envelope, then our JSON text);
- the log (journal plus snapshot) ends before the commit index the meta file recorded, or starts
  after index 1 with no snapshot to cover the gap — entries this member acknowledged are gone.

- a record does not match its CRC-32 in `raft.journal.sums`, the checksum file raftstore
  writes beside the journal (PySyncObj's records have no room for one; see JournalChecksums).

What it cannot see: records without a checksum (written before the checksum file existed, or
after a failed checksum write, until the next compaction), and a tail cut exactly at a record
boundary that does not reach back behind the commit index the meta file last recorded (saved
at most once a second).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysyncobj.journal import APP_NAME, FIRST_RECORD_OFFSET, JOURNAL_FORMAT_VERSION, LAST_RECORD_OFFSET_OFFSET, NAME_SIZE, VERSION_SIZE
from pysyncobj.pickle import load as pickle_load
from pysyncobj.pickle import loads as pickle_loads
from pysyncobj.pickle import to_bytes

from . import _pysyncobj_compat as compat
from ._errors import JournalDamagedError as JournalDamagedError

JOURNAL, META, SNAPSHOT, SUMS = "raft.journal", "raft.journal.meta", "raft.snapshot", "raft.journal.sums"
_U32 = struct.Struct("<I")
_INDEX_TERM = struct.Struct("<QQ")
_SUMS_HEADER = struct.Struct("<8sQ")  # magic, log index of the first slot
_SUMS_MAGIC = b"RSJSUM01"


@dataclass(frozen=True)
class JournalSummary:
    """What a sound journal holds: its entry count and first/last (index, term)."""

    entries: int
    first_index: int
    last_index: int
    last_term: int


REPAIR_HINT = "this member must not serve a shortened history: see docs/operations.md#a-damaged-raft-journal (remove the member, clear its data dir, add it back)"


@dataclass(frozen=True)
class Checksums:
    """CRC-32 per log index from `first` on, as read from a checksum file named `source`."""

    source: str
    first: int
    crcs: bytes  # little-endian u32 per index

    def expected(self, index: int) -> int | None:
        slot = index - self.first
        if slot < 0 or 4 * slot + 4 > len(self.crcs):
            return None
        return int(_U32.unpack_from(self.crcs, 4 * slot)[0])


def record_crc(index: int, term: int, command: bytes) -> int:
    """The checksum of one journal record's body (index, term, command), as stored on disk."""
    return zlib.crc32(command, zlib.crc32(_INDEX_TERM.pack(index, term)))


def check_journal_bytes(data: bytes, source: str, checksums: Checksums | None = None) -> JournalSummary:
    """Walk PySyncObj's journal layout; JournalDamagedError naming `source` and the first fault."""
    if len(data) < FIRST_RECORD_OFFSET:
        raise JournalDamagedError(f"{source} is truncated: {len(data)} bytes, shorter than the {FIRST_RECORD_OFFSET}-byte journal header")
    if data[:NAME_SIZE].rstrip(b"\0") != APP_NAME:
        raise JournalDamagedError(f"{source} is damaged: its header does not start with PySyncObj's journal name")
    (version,) = _U32.unpack_from(data, NAME_SIZE + VERSION_SIZE)
    if version != JOURNAL_FORMAT_VERSION:
        raise JournalDamagedError(f"{source} is journal format {version}; this raftstore reads format {JOURNAL_FORMAT_VERSION}")
    (end,) = _U32.unpack_from(data, LAST_RECORD_OFFSET_OFFSET)
    if end > len(data):
        raise JournalDamagedError(f"{source} is truncated: its header says the records run to byte {end}, the file ends at byte {len(data)}")
    if end < FIRST_RECORD_OFFSET:
        raise JournalDamagedError(f"{source} is damaged: its header says the records end at byte {end}, inside the header")
    offset, count, first, previous = FIRST_RECORD_OFFSET, 0, 0, (0, 0)
    while offset < end:
        if offset + 4 > end:
            raise JournalDamagedError(f"{source} is damaged: a record at byte {offset} is cut off at byte {end}")
        (size,) = _U32.unpack_from(data, offset)
        if size < _INDEX_TERM.size or offset + 8 + size > end:
            raise JournalDamagedError(f"{source} is damaged: the record at byte {offset} announces {size} bytes, past the records' end at byte {end}")
        (trailer,) = _U32.unpack_from(data, offset + 4 + size)
        if trailer != size:
            raise JournalDamagedError(f"{source} is damaged: the record at byte {offset} starts with size {size} and ends with size {trailer}")
        index, term = _INDEX_TERM.unpack_from(data, offset + 4)
        if count and (index != previous[0] + 1 or term < previous[1]):
            raise JournalDamagedError(
                f"{source} is damaged: entry ({index}, term {term}) at byte {offset} follows entry ({previous[0]}, term {previous[1]})"
            )
        expected = checksums.expected(index) if checksums else None
        if expected is not None and zlib.crc32(data[offset + 4 : offset + 4 + size]) != expected:
            raise JournalDamagedError(
                f"{source} is damaged: entry {index} at byte {offset} does not match its checksum in {checksums.source if checksums else ''}"
            )
        _check_command(data[offset + 4 + _INDEX_TERM.size : offset + 4 + size], index, source)
        first = first or index
        previous, count = (index, term), count + 1
        offset += size + 8
    return JournalSummary(count, first, previous[0], previous[1])


def _check_command(command: bytes, index: int, source: str) -> None:
    """A regular entry must still decode to our command text; PySyncObj's own entries are short opaque bytes."""
    try:
        args = compat.regular_command_args(command)
        if args and isinstance(args[0], str):
            json.loads(args[0])
    except Exception as exc:  # noqa: BLE001 - any decoding failure means the same: the bytes changed
        raise JournalDamagedError(f"{source} is damaged: entry {index} no longer decodes ({type(exc).__name__}: {exc})") from None


def check_raft_dir(raft_dir: Path) -> JournalSummary | None:
    """Check a stopped member's journal against its meta file and snapshot before it starts.

    None when the dir holds no journal yet (a new member). Reads only; changes nothing.
    """
    journal, meta, snapshot = raft_dir / JOURNAL, raft_dir / META, raft_dir / SNAPSHOT
    covered = _snapshot_last_index(snapshot)
    commit_index = _meta_commit_index(meta)
    if not journal.is_file():
        if commit_index > max(covered, 1):
            raise JournalDamagedError(f"{journal} is missing, but {meta} records commit index {commit_index}; {REPAIR_HINT}")
        return None
    try:
        data = journal.read_bytes()
    except OSError as exc:
        raise JournalDamagedError(f"cannot read {journal}: {exc.strerror}") from None
    try:
        summary = check_journal_bytes(data, str(journal), _read_checksums(raft_dir / SUMS))
    except JournalDamagedError as exc:
        raise JournalDamagedError(f"{exc}; {REPAIR_HINT}") from None
    if summary.entries and summary.first_index > 1 and covered < summary.first_index - 1:
        raise JournalDamagedError(
            f"{journal} starts at entry {summary.first_index} but "
            + (f"{snapshot} covers only up to entry {covered}" if covered else f"there is no {snapshot}")
            + f": entries are missing; {REPAIR_HINT}"
        )
    if max(summary.last_index, covered) < commit_index:
        raise JournalDamagedError(
            f"{journal} ends at entry {summary.last_index} (snapshot: {covered}), but {meta} records commit index {commit_index}: "
            f"committed entries are missing (truncated journal); {REPAIR_HINT}"
        )
    return summary


def _snapshot_last_index(snapshot: Path) -> int:
    if not snapshot.is_file():
        return 0
    try:
        with open(snapshot, "rb") as f, gzip.GzipFile(fileobj=f) as g:
            _, last, _, _ = pickle_load(g)
        return int(last[1])
    except Exception as exc:  # noqa: BLE001 - any failure means the same to the operator
        raise JournalDamagedError(f"{snapshot} is unreadable ({type(exc).__name__}: {exc}); {REPAIR_HINT}") from None


def _meta_commit_index(meta: Path) -> int:
    """The commit index the member last recorded; 0 if it never wrote one."""
    if not meta.is_file():
        return 0
    try:
        recorded: Any = pickle_loads(meta.read_bytes())
        return int(recorded.get("raftCommitIndex", 0))
    except Exception as exc:  # noqa: BLE001
        raise JournalDamagedError(f"{meta} is unreadable ({type(exc).__name__}: {exc}); {REPAIR_HINT}") from None


def _read_checksums(path: Path) -> Checksums | None:
    """The checksum file's slots; None if there is none (a data dir from before it) or its
    header is unreadable (then nothing is verified against it, the structural checks remain)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalDamagedError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) < _SUMS_HEADER.size or data[:8] != _SUMS_MAGIC:
        return None
    (_, first) = _SUMS_HEADER.unpack_from(data)
    body = data[_SUMS_HEADER.size :]
    return Checksums(str(path), first, body[: len(body) - len(body) % 4])


class JournalChecksums:
    """Writes `raft.journal.sums`: a CRC-32 per journal record, by log index (under the node's tick lock only).

    A slot is written *before* its record, so after a crash a record either is absent or
    matches its slot; slots past the journal's end (entries a conflicting leader replaced) are
    ignored by the check. When PySyncObj rewrites the journal from an empty one (compaction),
    the file starts over at the first re-added index. A failed write (a full disk) cuts the
    file back to the slots before it and stops recording until the next start-over: later
    records go unverified rather than being checked against a hole. Not fsynced: it survives a
    process crash (the page cache); after a power loss it may be shorter than the journal, and
    the records past its end are only checked for structure.
    """

    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        found = _read_checksums(Path(path))
        self._first: int | None = None if found is None else found.first
        self._recording = found is not None

    def rebuild(self, entries: list[tuple[bytes, int, int]]) -> None:
        """Start over from the journal as loaded (checked by check_raft_dir just before), so
        entries PySyncObj wrote before the hooks were in place have their checksums too."""
        if entries:
            self.start_over(entries[0][1])
            for command, index, term in entries:
                self.record(index, term, command)

    def start_over(self, first: int) -> None:
        """The journal was emptied; its next record has index `first`."""
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, _SUMS_HEADER.pack(_SUMS_MAGIC, first), 0)
        except OSError:
            self._first, self._recording = None, False
            return
        self._first, self._recording = first, True

    def record(self, index: int, term: int, command: bytes) -> None:
        """Store the checksum of the record about to be written at `index`."""
        if self._first is None or index < self._first:
            self.start_over(index)
        if not self._recording or self._first is None:
            return
        slot = _SUMS_HEADER.size + 4 * (index - self._first)
        try:
            os.pwrite(self._fd, _U32.pack(record_crc(index, term, to_bytes(command))), slot)
        except OSError:
            self._recording = False
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, slot)

    def close(self) -> None:
        os.close(self._fd)

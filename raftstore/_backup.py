"""The backup file format: a StoreImage as a self-checking byte stream.

Layout (version 1), built to be written while it streams and checked before anything trusts it:

    MAGIC (16 bytes) | header length (u32, big-endian) | header (JSON) | body | TRAILER

- header: `format`, `revision`, `keys`, `leases`, `cluster_id`, `created` (ISO 8601 UTC);
- body: `keys` msgpack arrays [key, value JSON text, create rev, mod rev, version, lease|nil],
  then `leases` arrays [id, ttl, expires_at], then one map {"next_lease_id": n};
- TRAILER: END_MARK (8 bytes) | length of everything before the trailer (u64) | SHA-256 of it.

Reading checks, in order, what each failure means to an operator: not a backup at all (magic),
cut short (no end mark where the file ends, or a length that disagrees with the file),
damaged (checksum), written by a newer contivd (format), inconsistent (counts). Only then is
the body decoded — by msgpack, never pickle. What this module does not do: files, atomic
renames and permissions are the caller's (the CLI writes, `read_backup_file` only reads).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from ._errors import StoreError
from ._image import KeyRecord, LeaseRecord, StoreImage

MAGIC = b"CONTIVD-SNAPSHOT"
END_MARK = b"SNAP-END"
FORMAT_VERSION = 1
_HEADER_LENGTH = struct.Struct(">I")
_TRAILER = struct.Struct(">8sQ32s")
KEYS_PER_CHUNK = 2_000  # records encoded per streamed chunk (~1 MB of endpoints)


class BackupFileError(StoreError):
    """A backup file that must not be restored; the message names what is wrong with it."""


@dataclass(frozen=True)
class BackupHeader:
    format: int
    revision: int
    keys: int
    leases: int
    cluster_id: str | None
    created: str


def encode_image(image: StoreImage, created: str) -> Iterator[bytes]:
    """The backup of `image` as chunks to stream; their concatenation is the whole file."""
    digest = hashlib.sha256()
    length = 0

    def chunk(data: bytes) -> bytes:
        nonlocal length
        digest.update(data)
        length += len(data)
        return data

    header = {
        "format": FORMAT_VERSION,
        "revision": image.revision,
        "keys": len(image.keys),
        "leases": len(image.leases),
        "cluster_id": image.cluster_id,
        "created": created,
    }
    header_bytes = json.dumps(header, sort_keys=True).encode()
    yield chunk(MAGIC + _HEADER_LENGTH.pack(len(header_bytes)) + header_bytes)
    packer = msgpack.Packer(use_bin_type=True)
    keys = image.keys
    for start in range(0, len(keys), KEYS_PER_CHUNK):
        parts = [packer.pack([r.key, r.value, r.create_revision, r.mod_revision, r.version, r.lease]) for r in keys[start : start + KEYS_PER_CHUNK]]
        yield chunk(b"".join(parts))
    tail = b"".join(packer.pack([r.lease_id, r.ttl, r.expires_at]) for r in image.leases)
    yield chunk(tail + packer.pack({"next_lease_id": image.next_lease_id}))
    yield _TRAILER.pack(END_MARK, length, digest.digest())


def check_framing(data: bytes, source: str) -> BackupHeader:
    """The header of a complete, undamaged backup; BackupFileError naming the fault otherwise."""
    if not data:
        raise BackupFileError(f"{source} is truncated: it is empty")
    if MAGIC.startswith(data):
        raise BackupFileError(f"{source} is truncated: {len(data)} bytes, it ends inside the snapshot magic")
    if not data.startswith(MAGIC):
        raise BackupFileError(f"{source} is not a contivd snapshot: it does not start with the contivd snapshot magic")
    if len(data) < len(MAGIC) + _HEADER_LENGTH.size + _TRAILER.size:
        raise BackupFileError(f"{source} is truncated: {len(data)} bytes, too short to hold a header and the end mark")
    mark, length, checksum = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    if mark != END_MARK:
        raise BackupFileError(
            f"{source} is truncated (or was not completely written): no end mark in its last {_TRAILER.size} bytes ({len(data)} bytes in all)"
        )
    if length != len(data) - _TRAILER.size:
        raise BackupFileError(
            f"{source} is truncated or damaged: its end mark says {length} bytes of data, the file holds {len(data) - _TRAILER.size}"
        )
    if hashlib.sha256(memoryview(data)[:length]).digest() != checksum:
        raise BackupFileError(f"{source} is corrupted: SHA-256 checksum mismatch (expected {checksum.hex()})")
    (header_length,) = _HEADER_LENGTH.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _HEADER_LENGTH.size
    try:
        header = json.loads(data[start : start + header_length])
        parsed = BackupHeader(
            int(header["format"]), int(header["revision"]), int(header["keys"]), int(header["leases"]), header["cluster_id"], str(header["created"])
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise BackupFileError(f"{source} has an unreadable header: {exc}") from None
    if parsed.format != FORMAT_VERSION:
        raise BackupFileError(
            f"{source} is snapshot format {parsed.format}; this contivd reads format {FORMAT_VERSION} (use a newer contivd to restore it)"
        )
    return parsed


def decode_backup(data: bytes, source: str) -> tuple[BackupHeader, StoreImage]:
    """Check and decode a whole backup; BackupFileError naming the fault if it is not sound."""
    header = check_framing(data, source)
    (header_length,) = _HEADER_LENGTH.unpack_from(data, len(MAGIC))
    body = memoryview(data)[len(MAGIC) + _HEADER_LENGTH.size + header_length : len(data) - _TRAILER.size]
    unpacker = msgpack.Unpacker(use_list=True, raw=False, max_buffer_size=len(body) + 1)
    unpacker.feed(body)
    try:
        keys = tuple(KeyRecord(*_record(unpacker, 6)) for _ in range(header.keys))
        leases = tuple(LeaseRecord(*_record(unpacker, 3)) for _ in range(header.leases))
        footer = next(unpacker)
        next_lease_id = int(footer["next_lease_id"])
    except (StopIteration, ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
        raise BackupFileError(
            f"{source} does not match its header ({header.keys} keys, {header.leases} leases): {exc or type(exc).__name__}"
        ) from None
    if any(True for _ in unpacker):
        raise BackupFileError(f"{source} holds more records than its header announces ({header.keys} keys, {header.leases} leases)")
    return header, StoreImage(header.revision, keys, leases, next_lease_id, header.cluster_id)


def _record(unpacker: msgpack.Unpacker, size: int) -> list[Any]:
    record = next(unpacker)
    if not isinstance(record, list) or len(record) != size:
        raise ValueError(f"a record is {record!r:.80}, expected a list of {size} fields")
    return record


def read_backup_file(path: Path) -> tuple[BackupHeader, StoreImage]:
    """Read and check a backup file; BackupFileError if it is missing, unreadable or unsound."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BackupFileError(f"cannot read snapshot file {path}: {exc.strerror}") from None
    return decode_backup(data, str(path))

"""raftstore's Raft wire format: framing, version negotiation, sealing and message codecs.

Sans-IO: a `Channel` turns bytes from a socket into Raft messages and messages into bytes;
`_transport.py` owns the sockets. Nothing here unpickles: messages are msgpack, and a peer's
bytes are authenticated (AES-GCM, `_crypto.Sealer`) before msgpack sees them. The Raft log
entries and snapshot chunks inside a message are opaque bytes to this module (PySyncObj's own
log records; it decodes them only when it applies committed entries).

A frame is a 4-byte big-endian length, a kind byte and a body. Each side first sends a HELLO
(magic, the oldest and newest format it speaks, a fresh 16-byte nonce); both then use the
newest format both speak. Every later frame is DATA: a flags byte and a msgpack message,
sealed when the cluster has a secret. The associated data binds a sealed frame to the
negotiated version, the receiver's hello nonce and a per-direction sequence number, so a
frame cannot be replayed, reordered, moved to another connection, or survive a tampered
hello (a downgrade makes the two sides' associated data differ and the first frame fails).

Format versions (WIRE_VERSIONS):
1. messages are msgpack maps, PySyncObj's dicts as they are;
2. messages are msgpack arrays `[code, present-fields bitmap, values...]` by the schema
   below: smaller and cheaper to encode than maps;
3. encoded as 2; a member speaking it applies the log command `lease_keepalive_many`. A
   command op no older release knows may enter the log only once every member can apply it,
   and the negotiated format is what one member sees of its peers' releases: a voter
   proposes such a command only while it links every voter at 3 or more (`_lease_batch.py`).
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Protocol

import msgpack

WIRE_VERSIONS = (1, 2, 3)  # oldest first; a member speaks every version from its configured newest down to 1
CURRENT_VERSION = WIRE_VERSIONS[-1]
MAGIC = b"RSTW"
MAX_FRAME_BYTES = 256 * 1024 * 1024  # a longer announced frame is garbage: drop the connection, buffer nothing
MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # decompressed
COMPRESS_ABOVE = 16 * 1024  # bytes of encoded message; smaller ones travel uncompressed (zlib ~35 µs each)

_LENGTH = struct.Struct(">I")
_HELLO = struct.Struct(">4sBB16s")
_SEQ = struct.Struct(">Q")
HELLO_FRAME_BYTES = _LENGTH.size + 1 + _HELLO.size
KIND_HELLO = 0x48  # "H"
KIND_DATA = 0x44  # "D"
_FLAG_ZLIB = 0x01

# Every message PySyncObj's SyncObj sends (syncobj.py, 0.3.17), plus the transport's own
# handshake: type -> (code, fields). A message with a field outside its list is refused at
# both ends; tests check this list against PySyncObj's source.
SCHEMA: dict[str, tuple[int, tuple[str, ...]]] = {
    "timeout_now": (1, ("term",)),
    "request_vote": (2, ("term", "last_log_index", "last_log_term")),
    "response_vote": (3, ("term",)),
    "append_entries": (4, ("term", "commit_index", "entries", "prevLogIdx", "prevLogTerm", "serialized", "transmission", "data")),
    "apply_command": (5, ("command", "request_id")),
    "apply_command_response": (6, ("request_id", "log_idx", "log_term", "error")),
    "next_node_idx": (7, ("next_node_idx", "reset", "success")),
    "hello_ident": (8, ("node",)),  # transport: the connecting member's address, None when read-only
    "hello_welcome": (9, ()),  # transport: the accepting member authenticated it
    # Followers of the store (`_feed.py`, `_follower.py`; never handed to PySyncObj): the
    # follower's first sealed message instead of hello_ident, then the voter's feed
    # (changes, images, heartbeats) and the follower's requests and their results.
    "hello_follower": (10, ("name", "revision")),
    "feed_changes": (11, ("revision", "changes")),
    "feed_image": (12, ("revision", "image")),
    "feed_heartbeat": (13, ("revision", "serving", "leader")),
    "feed_request": (14, ("request_id", "command")),
    "feed_result": (15, ("request_id", "result", "error", "message")),
}
FOLLOWER_MESSAGES = frozenset(name for name in SCHEMA if name.startswith("feed_")) | {"hello_follower"}
_BY_CODE = {code: (name, fields) for name, (code, fields) in SCHEMA.items()}
_ALLOWED = {name: frozenset(fields) | {"type"} for name, (_, fields) in SCHEMA.items()}


class WireError(Exception):
    """A peer's bytes break the wire format (or fail authentication): drop its connection."""


class Sealer(Protocol):
    def seal(self, plain: bytes, associated: bytes) -> bytes: ...

    def open(self, sealed: bytes, associated: bytes) -> bytes:
        """Raise (any exception) unless `sealed` is authentic for `associated`."""
        ...


def _shape(keys: tuple[str, ...], kind: object) -> tuple[int, int, tuple[str, ...]]:
    """(code, present-fields bitmap, fields in schema order) of a message with these keys."""
    if not isinstance(kind, str) or kind not in SCHEMA:
        raise WireError(f"no wire encoding for raft message type {kind!r}")
    code, fields = SCHEMA[kind]
    extra = set(keys) - _ALLOWED[kind]
    if extra:
        raise WireError(f"raft message {kind!r} has fields outside the wire schema: {sorted(extra)}")
    names = tuple(name for name in fields if name in keys)
    return code, sum(1 << fields.index(name) for name in names), names


# PySyncObj builds each message type at a few call sites with fixed keys, so shapes repeat:
# keyed by type and the message's keys in order, they are computed once (validated once).
_SHAPES: dict[tuple[object, tuple[str, ...]], tuple[int, int, tuple[str, ...]]] = {}
_SHAPES_MAX = 256
# Version 2 decoding: (code, bitmap) -> (type, field names), every valid pair.
_LAYOUTS = {
    (code, present): (name, tuple(f for bit, f in enumerate(fields) if present >> bit & 1))
    for name, (code, fields) in SCHEMA.items()
    for present in range(1 << len(fields))
}


def encode_message(message: dict[str, Any], version: int) -> bytes:
    """A Raft message in the given format version; raises WireError for an unknown type or field."""
    kind, keys = message.get("type"), tuple(message)
    shape = _SHAPES.get((kind, keys)) if isinstance(kind, str) else None
    if shape is None:
        shape = _shape(keys, kind)
        if len(_SHAPES) < _SHAPES_MAX:
            _SHAPES[(kind, keys)] = shape
    if version == 1:
        return bytes(msgpack.packb(message, use_bin_type=True))
    code, present, names = shape
    return bytes(msgpack.packb([code, present, *[message[name] for name in names]], use_bin_type=True))


def decode_message(data: bytes, version: int) -> dict[str, Any]:
    """The inverse of encode_message; raises WireError for anything that is not a schema message."""
    try:
        decoded = msgpack.unpackb(data, raw=False, use_list=True)
    except Exception as exc:
        raise WireError(f"undecodable raft message: {exc}") from None
    if version == 1:
        if not isinstance(decoded, dict) or not isinstance(decoded.get("type"), str) or decoded["type"] not in SCHEMA:
            raise WireError("raft message is not a known message map")
        if not decoded.keys() <= _ALLOWED[decoded["type"]]:
            raise WireError(f"raft message {decoded['type']!r} has unknown fields")
        return decoded
    if not isinstance(decoded, list) or len(decoded) < 2:
        raise WireError("raft message is not a [code, fields, ...] array")
    layout = _LAYOUTS.get((decoded[0], decoded[1])) if type(decoded[0]) is int and type(decoded[1]) is int else None
    if layout is None:
        raise WireError(f"unknown raft message code or field bitmap {decoded[:2]}")
    name, names = layout
    if len(names) != len(decoded) - 2:
        raise WireError(f"raft message {name!r}: field bitmap does not match its values")
    message = dict(zip(names, decoded[2:], strict=True))
    message["type"] = name
    return message


def data_body(message: dict[str, Any], version: int) -> bytes:
    """What a DATA frame carries before sealing: a flags byte and the encoded message,
    compressed when large."""
    encoded = encode_message(message, version)
    if len(encoded) > COMPRESS_ABOVE:
        return bytes([_FLAG_ZLIB]) + zlib.compress(encoded, 1)
    return b"\x00" + encoded


def hello_frame(oldest: int, newest: int, nonce: bytes) -> bytes:
    body = _HELLO.pack(MAGIC, oldest, newest, nonce)
    return _LENGTH.pack(1 + len(body)) + bytes([KIND_HELLO]) + body


def negotiate(ours: tuple[int, int], theirs: tuple[int, int]) -> int:
    """The newest version both ranges (oldest, newest) contain; WireError if none."""
    version = min(ours[1], theirs[1])
    if version < max(ours[0], theirs[0]):
        raise WireError(f"no common wire format: we speak {ours[0]}..{ours[1]}, the peer {theirs[0]}..{theirs[1]}")
    return version


def split_frames(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """(kind, body) of every complete frame at the start of `data`, and the incomplete rest.

    Raises WireError at once for an impossible length (garbage), before buffering its body."""
    frames, offset, size = [], 0, len(data)
    while size - offset >= _LENGTH.size:
        (length,) = _LENGTH.unpack_from(data, offset)
        if not 1 <= length <= MAX_FRAME_BYTES:
            raise WireError(f"frame length {length} out of range")
        end = offset + _LENGTH.size + length
        if size < end:
            break
        frames.append((data[offset + _LENGTH.size], data[offset + _LENGTH.size + 1 : end]))
        offset = end
    return frames, data[offset:]


@dataclass(frozen=True)
class Negotiated:
    """What a completed hello exchange settled for one connection."""

    version: int
    our_nonce: bytes
    peer_nonce: bytes


class Channel:
    """One connection's wire state: hellos, format version, sequence numbers, sealing.

    Not thread-safe; the transport drives it under the node's tick lock only. Any
    WireError it raises means the connection must be closed.
    """

    def __init__(self, sealer: Sealer | None, newest: int = CURRENT_VERSION):
        if newest not in WIRE_VERSIONS:
            raise ValueError(f"wire format {newest} is not one of {WIRE_VERSIONS}")
        self._sealer = sealer
        self._range = (WIRE_VERSIONS[0], newest)
        self._nonce = os.urandom(16)
        self.negotiated: Negotiated | None = None
        self._rest = bytearray()  # the start of an incomplete frame
        self._sent = 0
        self._received = 0
        self._send_ad = self._receive_ad = b""  # associated-data prefixes, set by the hello

    def hello(self) -> bytes:
        """The first frame this side sends."""
        return hello_frame(*self._range, self._nonce)

    @property
    def version(self) -> int:
        """The negotiated format version (after the peer's hello arrived)."""
        if self.negotiated is None:
            raise WireError("cannot send a raft message before the peer's hello")
        return self.negotiated.version

    def frame(self, message: dict[str, Any]) -> bytes:
        """A DATA frame carrying `message` (after the peer's hello arrived)."""
        return self.frame_body(data_body(message, self.version))

    def frame_body(self, body: bytes) -> bytes:
        """A DATA frame carrying a `data_body` encoded for this channel's version: sealing is
        the only per-connection work, so a message sent to many peers is encoded once."""
        if self.negotiated is None:
            raise WireError("cannot send a raft message before the peer's hello")
        if self._sealer is not None:
            body = self._sealer.seal(body, self._send_ad + _SEQ.pack(self._sent))
        self._sent += 1
        return _LENGTH.pack(1 + len(body)) + bytes([KIND_DATA]) + body

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The messages completed by `data`; the peer's hello is consumed here."""
        if self._rest:
            self._rest += data  # amortised: a 64 MiB frame arrives in many reads
            if len(self._rest) < _LENGTH.size or len(self._rest) < _LENGTH.size + _LENGTH.unpack_from(self._rest)[0]:
                return []
            data, self._rest = bytes(self._rest), bytearray()
        frames, rest = split_frames(data)
        self._rest += rest
        messages = []
        for kind, body in frames:
            if self.negotiated is None:
                self.negotiated = negotiated = self._read_hello(kind, body)
                self._send_ad = bytes([KIND_DATA, negotiated.version]) + negotiated.peer_nonce
                self._receive_ad = bytes([KIND_DATA, negotiated.version]) + negotiated.our_nonce
            elif kind == KIND_DATA:
                messages.append(self._open(body))
            else:
                raise WireError(f"unexpected frame kind {kind:#x}")
        return messages

    def _read_hello(self, kind: int, body: bytes) -> Negotiated:
        if kind != KIND_HELLO or len(body) != _HELLO.size:
            raise WireError("the first frame is not a raftstore hello")
        magic, oldest, newest, nonce = _HELLO.unpack(body)
        if magic != MAGIC:
            raise WireError("the first frame is not a raftstore hello")
        return Negotiated(negotiate(self._range, (oldest, newest)), self._nonce, nonce)

    def _open(self, body: bytes) -> dict[str, Any]:
        assert self.negotiated is not None
        if self._sealer is not None:
            try:
                body = self._sealer.open(body, self._receive_ad + _SEQ.pack(self._received))
            except Exception:
                raise WireError("a raft frame failed authentication (wrong cluster secret, or forged)") from None
        self._received += 1
        if not body:
            raise WireError("empty raft frame")
        flags, payload = body[0], body[1:]
        if flags & ~_FLAG_ZLIB:
            raise WireError(f"unknown frame flags {flags:#x}")
        if flags & _FLAG_ZLIB:
            inflater = zlib.decompressobj()
            try:
                payload = inflater.decompress(payload, MAX_MESSAGE_BYTES)
            except zlib.error as exc:
                raise WireError(f"corrupt compressed raft frame: {exc}") from None
            if inflater.unconsumed_tail:
                raise WireError("raft message larger than the limit once decompressed")
        return decode_message(payload, self.negotiated.version)

"""The Raft wire format: every PySyncObj message in every version, negotiation, and what a
hostile or broken peer's bytes can (not) do."""

from __future__ import annotations

import ast
import inspect
import os
import pickle
import struct
import zlib
from typing import Any

import pysyncobj.syncobj
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftstore._crypto import AeadSealer
from raftstore._wire import (
    COMPRESS_ABOVE,
    HELLO_FRAME_BYTES,
    SCHEMA,
    WIRE_VERSIONS,
    Channel,
    WireError,
    decode_message,
    encode_message,
    hello_frame,
    negotiate,
)


def unpickled() -> None:
    raise AssertionError("a peer's bytes reached pickle")


class Exploit:
    def __reduce__(self) -> tuple[Any, ...]:
        return (unpickled, ())


MESSAGES: list[dict[str, Any]] = [
    {"type": "timeout_now", "term": 7},
    {"type": "request_vote", "term": 8, "last_log_index": 120, "last_log_term": 7},
    {"type": "response_vote", "term": 8},
    {
        "type": "append_entries",
        "term": 8,
        "commit_index": 119,
        "entries": [[b"\x00cmd", 120, 8], [b"\x01", 121, 8]],
        "prevLogIdx": 119,
        "prevLogTerm": 7,
    },
    {"type": "append_entries", "term": 8, "commit_index": 119, "entries": [], "prevLogIdx": 119, "prevLogTerm": 7},
    {"type": "append_entries", "term": 8, "commit_index": 3, "transmission": "start", "data": b"chunk", "prevLogIdx": 1, "prevLogTerm": 1},
    {"type": "append_entries", "term": 8, "commit_index": 3, "serialized": [b"snapshot-part", True, False]},
    {"type": "append_entries", "term": 8, "commit_index": 3, "serialized": None},
    {"type": "apply_command", "command": b"\x00payload", "request_id": 5},
    {"type": "apply_command", "command": b"\x00payload"},
    {"type": "apply_command_response", "request_id": 5, "log_idx": 121, "log_term": 8},
    {"type": "apply_command_response", "request_id": 5, "error": 3},
    {"type": "next_node_idx", "next_node_idx": 122, "reset": False, "success": True},
    {"type": "hello_ident", "node": "127.0.0.1:9002"},
    {"type": "hello_ident", "node": None},
    {"type": "hello_welcome"},
    # followers of the store (_feed.py, _follower.py)
    {"type": "hello_follower", "name": "node7", "revision": 0},
    {"type": "feed_changes", "revision": 9, "changes": [[9, "put", "/a", '{"x":1}', 3, 2, None], [9, "delete", "/b", None, 0, 0, None]]},
    {"type": "feed_image", "revision": 9, "image": [4, None, [["/a", "1", 3, 9, 2, 7]]]},
    {"type": "feed_heartbeat", "revision": 9, "serving": True, "leader": "127.0.0.1:9002"},
    {"type": "feed_request", "request_id": 1, "command": None},
    {"type": "feed_result", "request_id": 1, "error": "UnavailableError", "message": "no leader"},
]


@pytest.fixture(scope="module")
def sealers() -> tuple[AeadSealer, AeadSealer, AeadSealer]:
    return AeadSealer("cluster-secret-1"), AeadSealer("cluster-secret-1"), AeadSealer("another-secret")


def connected(a: Channel, b: Channel) -> None:
    assert a.feed(b.hello()) == [] and b.feed(a.hello()) == []


def test_every_message_pysyncobj_sends_is_in_the_schema() -> None:
    """Read SyncObj's source: each `{'type': …}` literal and each field it adds later."""
    tree = ast.parse(inspect.getsource(pysyncobj.syncobj))
    sent: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            kind = next((v.value for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant) and k.value == "type"), None)
            if isinstance(kind, str):
                sent.setdefault(kind, set()).update(keys - {"type"})
    added = {
        node.targets[0].slice.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Subscript)
        and isinstance(node.targets[0].value, ast.Name)
        and node.targets[0].value.id == "message"
        and isinstance(node.targets[0].slice, ast.Constant)
    }
    assert added == {"request_id"}  # apply_command's optional field
    sent["apply_command"].add("request_id")
    assert len(sent) == 7
    for kind, fields in sent.items():
        assert kind in SCHEMA, kind
        assert fields <= set(SCHEMA[kind][1]), (kind, fields - set(SCHEMA[kind][1]))


@pytest.mark.parametrize("version", WIRE_VERSIONS)
@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m["type"])
def test_every_message_round_trips_in_every_version(message: dict[str, Any], version: int) -> None:
    assert decode_message(encode_message(message, version), version) == message


def test_version_2_is_the_smaller_encoding() -> None:
    heartbeat = MESSAGES[4]
    assert len(encode_message(heartbeat, 2)) < len(encode_message(heartbeat, 1)) / 2


def test_messages_outside_the_schema_are_refused_at_both_ends() -> None:
    with pytest.raises(WireError, match="no wire encoding"):
        encode_message({"type": "install_malware"}, 2)
    with pytest.raises(WireError, match="outside the wire schema"):
        encode_message({"type": "response_vote", "term": 1, "extra": 2}, 1)
    for data, version in [
        (b"\xc1", 2),  # never used in msgpack
        (b"\x93\x01", 2),  # truncated array
        (bytes([0x92, 99, 0]), 2),  # unknown code
        (bytes([0x93, 3, 0b11, 1]), 2),  # bitmap names two fields, one value
        (bytes([0x81, 0xA4]) + b"type" + bytes([0xA3]) + b"bad", 1),
        (bytes([0x90]), 1),  # a list where v1 has maps
    ]:
        with pytest.raises(WireError):
            decode_message(data, version)


def test_negotiation_takes_the_newest_common_version() -> None:
    assert negotiate((1, 2), (1, 2)) == 2
    assert negotiate((1, 2), (1, 1)) == 1
    assert negotiate((1, 1), (1, 2)) == 1
    with pytest.raises(WireError, match="no common wire format"):
        negotiate((1, 2), (3, 4))


@pytest.mark.parametrize("newest", [(2, 2), (1, 2), (2, 1), (1, 1)])
def test_members_of_adjacent_versions_talk(sealers: tuple[AeadSealer, AeadSealer, AeadSealer], newest: tuple[int, int]) -> None:
    a, b = Channel(sealers[0], newest[0]), Channel(sealers[1], newest[1])
    connected(a, b)
    assert a.negotiated and b.negotiated and a.negotiated.version == b.negotiated.version == min(newest)
    for message in MESSAGES:
        assert b.feed(a.frame(message)) == [message]
        assert a.feed(b.frame(message)) == [message]


def test_large_messages_are_compressed_small_ones_not(sealers: tuple[AeadSealer, AeadSealer, AeadSealer]) -> None:
    a, b = Channel(None), Channel(None)
    connected(a, b)
    small = {"type": "append_entries", "term": 1, "commit_index": 1, "entries": [[b"x" * 200, 2, 1]], "prevLogIdx": 1, "prevLogTerm": 1}
    large = {**small, "entries": [[b"x" * (4 * COMPRESS_ABOVE), 2, 1]]}
    assert b"x" * 200 in a.frame(small)
    frame = a.frame(large)
    assert len(frame) < COMPRESS_ABOVE
    assert b.feed(a.frame(small)) + b.feed(frame) == [small, large]


def test_frames_arriving_a_byte_at_a_time_decode(sealers: tuple[AeadSealer, AeadSealer, AeadSealer]) -> None:
    a, b = Channel(sealers[0]), Channel(sealers[1])
    a.feed(b.hello())
    stream = a.hello() + b"".join(a.frame(m) for m in MESSAGES[:4])
    received = []
    for i in range(len(stream)):
        received += b.feed(stream[i : i + 1])
    assert received == MESSAGES[:4]


def test_the_old_pickle_format_is_refused_without_unpickling() -> None:
    """What a PySyncObj TcpConnection (or an attacker) sends: never reaches pickle."""

    payload = zlib.compress(pickle.dumps(Exploit()))
    with pytest.raises(WireError, match="out of range|not a raftstore hello"):
        Channel(None).feed(struct.pack("i", len(payload)) + payload)


def test_an_absurd_length_is_refused_before_buffering_a_body() -> None:
    with pytest.raises(WireError, match="frame length"):
        Channel(None).feed(b"\xff\xff\xff\xff")
    with pytest.raises(WireError, match="frame length"):
        Channel(None).feed(b"\x00\x00\x00\x00")


def test_a_truncated_frame_waits_and_a_wrong_kind_is_refused(sealers: tuple[AeadSealer, AeadSealer, AeadSealer]) -> None:
    a, b = Channel(sealers[0]), Channel(sealers[1])
    hello = a.hello()
    assert len(hello) == HELLO_FRAME_BYTES
    assert b.feed(hello[:-1]) == [] and b.negotiated is None
    assert b.feed(hello[-1:]) == [] and b.negotiated is not None
    with pytest.raises(WireError, match="unexpected frame kind"):
        b.feed(hello)  # a second hello


def test_a_wrong_secret_a_replay_and_a_foreign_frame_fail_authentication(sealers: tuple[AeadSealer, AeadSealer, AeadSealer]) -> None:
    ours, same, wrong = sealers
    a, b = Channel(ours), Channel(wrong)
    connected(a, b)
    with pytest.raises(WireError, match="authentication"):
        a.feed(b.frame(MESSAGES[0]))

    a, b = Channel(ours), Channel(same)
    connected(a, b)
    frame = a.frame(MESSAGES[0])
    assert b.feed(frame) == [MESSAGES[0]]
    with pytest.raises(WireError, match="authentication"):
        b.feed(frame)  # replayed on the same connection

    c, d = Channel(ours), Channel(same)
    connected(c, d)
    with pytest.raises(WireError, match="authentication"):
        d.feed(frame)  # a frame of another connection


def test_a_tampered_hello_cannot_downgrade(sealers: tuple[AeadSealer, AeadSealer, AeadSealer]) -> None:
    a, b = Channel(sealers[0]), Channel(sealers[1])
    hello = bytearray(a.hello())
    hello[10] = 1  # the newest version a speaks, rewritten on the way
    b.feed(bytes(hello))
    a.feed(b.hello())
    assert a.negotiated and b.negotiated and (a.negotiated.version, b.negotiated.version) == (WIRE_VERSIONS[-1], 1)
    with pytest.raises(WireError, match="authentication"):
        b.feed(a.frame(MESSAGES[0]))


def test_a_peer_with_no_common_version_is_refused() -> None:
    with pytest.raises(WireError, match="no common wire format"):
        Channel(None).feed(hello_frame(WIRE_VERSIONS[-1] + 1, WIRE_VERSIONS[-1] + 2, b"n" * 16))


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=600))
def test_garbage_after_a_hello_only_ever_raises_wire_error(garbage: bytes) -> None:
    a, b = Channel(None), Channel(None)
    connected(a, b)
    try:
        b.feed(struct.pack(">I", len(garbage) + 1) + b"D" + garbage)
        b.feed(garbage)
    except WireError:
        pass


def test_a_frame_of_many_mebibytes_arrives_in_reads_and_decodes(sealers: tuple[AeadSealer, AeadSealer, AeadSealer]) -> None:
    a, b = Channel(sealers[0]), Channel(sealers[1])
    connected(a, b)
    entries = [[os.urandom(100_000), i, 1] for i in range(100)]  # incompressible: ~10 MiB on the wire
    message = {"type": "append_entries", "term": 1, "commit_index": 1, "entries": entries, "prevLogIdx": 1, "prevLogTerm": 1}
    stream = a.frame(message) + a.frame(MESSAGES[0])
    received = []
    for i in range(0, len(stream), 65536):
        received += b.feed(stream[i : i + 65536])
    assert received == [message, MESSAGES[0]]

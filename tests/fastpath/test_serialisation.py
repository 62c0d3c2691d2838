"""Bitset serialisation: round trips, canonical bytes, corruption, and the v1 fixtures.

The fixtures in fixtures/ were written by format version 1 from the recipes
below and must stay readable, bit for bit, by every later version.  If the
writer's format changes, add new fixtures next to these; never regenerate
the old ones.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpath import Backend, Bitset
from tests.fastpath.helpers import PY, C, outcome

FIXTURES = Path(__file__).parent / "fixtures"


def v1_runs_recipe(backend: Backend) -> Bitset:
    """A /16 pool as Contiv leaves it: reservations, a block of leases, scattered leases."""
    bits = Bitset(65536, backend=backend)
    for i in (0, 1, 65535):
        bits.set(i)
    bits.set_range(2, 100)
    bits.set_range(1000, 1010)
    for i in range(5000, 6000, 7):
        bits.set(i)
    return bits


def v1_raw_recipe(backend: Backend) -> Bitset:
    """A dense, irregular 1000-bit set, for which the raw encoding is shorter."""
    bits = Bitset(1000, backend=backend)
    for i in range(1000):
        if (i * i + 3 * i) % 5 < 2:
            bits.set(i)
    return bits


@pytest.mark.parametrize(
    ("name", "recipe", "encoding"),
    [("bitset_v1_runs.bin", v1_runs_recipe, 1), ("bitset_v1_raw.bin", v1_raw_recipe, 0)],
)
def test_v1_fixture_still_reads(backend: Backend, name: str, recipe: object, encoding: int) -> None:
    data = (FIXTURES / name).read_bytes()
    assert data[:6] == b"FPBS" + bytes([1, encoding])
    expected = recipe(backend)  # type: ignore[operator]
    assert Bitset.from_bytes(data, backend=backend) == expected
    # The writer still produces these exact bytes (canonical encoding is unchanged).
    assert expected.to_bytes() == data


@st.composite
def bitsets(draw: st.DrawFn) -> Bitset:
    nbits = draw(st.one_of(st.integers(1, 2000), st.sampled_from([1, 7, 8, 9, 63, 64, 65])))
    bits = Bitset(nbits, backend=C)
    for start, length in draw(st.lists(st.tuples(st.integers(0, nbits - 1), st.integers(0, 80)))):
        bits.set_range(start, min(nbits, start + length))
    for i in draw(st.lists(st.integers(0, nbits - 1))):
        bits.clear(i)
    return bits


@settings(max_examples=300, deadline=None)
@given(bitsets())
def test_round_trip_is_canonical_and_cross_backend(bits: Bitset) -> None:
    data = bits.to_bytes()
    for backend in (C, PY):
        back = Bitset.from_bytes(data, backend=backend)
        assert back.to_bytes() == data
        assert [back.test(i) for i in range(bits.nbits)] == [bits.test(i) for i in range(bits.nbits)]
    assert Bitset.from_bytes(data, backend=PY).to_bytes() == data


@settings(max_examples=200, deadline=None)
@given(bitsets(), st.data())
def test_any_single_byte_corruption_is_rejected(bits: Bitset, data: st.DataObject) -> None:
    raw = bytearray(bits.to_bytes())
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    got_c = outcome(Bitset.from_bytes, bytes(raw), backend=C)
    got_py = outcome(Bitset.from_bytes, bytes(raw), backend=PY)
    assert got_c[0] == got_py[0] == "error"
    assert got_c == got_py


def frame(nbits: int, encoding: int, payload: bytes, version: int = 1) -> bytes:
    body = struct.pack("<4sBBHII", b"FPBS", version, encoding, 0, nbits, len(payload)) + payload
    return body + struct.pack("<I", zlib.crc32(body))


@settings(max_examples=500, deadline=None)
@given(st.integers(1, 300), st.sampled_from([0, 1]), st.binary(max_size=48))
def test_arbitrary_payloads_decode_identically(nbits: int, encoding: int, payload: bytes) -> None:
    """Well-framed but arbitrary payloads: both backends accept or reject alike, never crash."""
    data = frame(nbits, encoding, payload)
    got_c = outcome(lambda: Bitset.from_bytes(data, backend=C).to_bytes())
    got_py = outcome(lambda: Bitset.from_bytes(data, backend=PY).to_bytes())
    assert got_c == got_py


def test_encoding_choice() -> None:
    empty = Bitset(2**24, backend=C)
    assert len(empty.to_bytes()) == 20  # header + empty runs payload + CRC
    dense = v1_raw_recipe(C).to_bytes()
    assert dense[5] == 0 and len(dense) == 16 + 125 + 4


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "shorter than the header"),
        (frame(8, 0, b"\x00", version=2), "format version 2 is not supported"),
        (b"XXXX" + frame(8, 0, b"\x00")[4:], "bad magic"),
        (frame(8, 0, b"\x00")[:-1], "CRC mismatch|does not match"),
        (frame(8, 2, b"\x00"), "unknown encoding"),
        (frame(7, 0, b"\x80"), "malformed serialised bitset payload"),
        (frame(8, 1, b"\x00\x00"), "malformed serialised bitset payload"),  # empty run
        (frame(8, 1, b"\x00\x09"), "malformed serialised bitset payload"),  # past nbits
        (frame(0, 1, b""), "bitset size"),
    ],
)
def test_bad_input_messages(backend: Backend, data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Bitset.from_bytes(data, backend=backend)

"""Fixed-size bitsets for IPAM, VLAN ids, VNIs and EPG ids.

A :class:`Bitset` owns one word buffer of its backend (C array or Python
list) and nothing else; it has no allocation policy beyond "lowest clear bit
from a cursor", which callers (the raft FSM) drive from replicated state.
Indices are ints in ``range(nbits)``; ranges are half-open ``[start, stop)``
like Python's.  Any invalid argument raises ValueError and leaves the set
unchanged.

Serialised form (version 1, all integers little-endian)::

    0   4  magic b"FPBS"
    4   1  format version (1)
    5   1  payload encoding: 0 raw bits, 1 runs
    6   2  reserved, zero
    8   4  nbits
    12  4  payload length
    16  n  payload
    16+n 4 CRC-32 (zlib) of bytes [0, 16+n)

Raw payload: ceil(nbits/8) bytes, bit i in byte i//8 at position i%8.
Runs payload: LEB128 varint pairs (clear bits since the previous run, run
length) for each run of set bits.  The writer picks runs only when strictly
shorter than raw, so the encoding of a given set is canonical and equal sets
serialise to equal bytes.  Readers must keep accepting every version they
ever wrote; tests/fastpath/fixtures holds one sample per version.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from fastpath._backend import Backend, backend_or_default, error
from fastpath._reference import FP_ERR_INDEX, FP_ERR_SPACE, FP_MAX_BITS, FP_NOT_FOUND

MAGIC = b"FPBS"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<4sBBHII")
_CRC = struct.Struct("<I")
_ENC_RAW = 0
_ENC_RUNS = 1


class Bitset:
    """A fixed-size set of bit indices in ``range(nbits)``, 1 <= nbits <= 2^24."""

    __slots__ = ("_backend", "_lib", "_nbits", "_nwords", "_words")
    __hash__ = None  # type: ignore[assignment]  # mutable

    def __init__(self, nbits: int, *, backend: Backend | None = None) -> None:
        """Create an all-clear set; ``backend`` defaults to CONTIVD_FASTPATH's choice."""
        if not isinstance(nbits, int) or not 1 <= nbits <= FP_MAX_BITS:
            raise ValueError(f"bitset size {nbits!r}: must be 1..{FP_MAX_BITS} bits")
        self._backend = backend_or_default(backend)
        self._lib: Any = self._backend.lib
        self._nbits = nbits
        self._nwords = (nbits + 63) // 64
        self._words: Any = self._backend.new_words(self._nwords)

    @property
    def nbits(self) -> int:
        """Number of bits (the set's capacity)."""
        return self._nbits

    @property
    def backend(self) -> Backend:
        """The implementation this set's buffer belongs to."""
        return self._backend

    def __len__(self) -> int:
        return self._nbits

    def __repr__(self) -> str:
        return f"<Bitset {self.count()}/{self._nbits} set, {self._backend.name}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Bitset):
            return NotImplemented
        return self._nbits == other._nbits and self.to_bytes() == other.to_bytes()

    # cffi raises OverflowError for ints beyond int64; the twin would report
    # those as out of range, so every wrapper maps it to FP_ERR_INDEX.

    def _fail(self, status: int, what: str) -> ValueError:
        return error(status, f"{what} of a {self._nbits}-bit set")

    def _bit_op(self, fn: Any, index: int) -> bool:
        try:
            status = fn(self._words, self._nbits, index)
        except OverflowError:
            status = FP_ERR_INDEX
        if status < 0:
            raise self._fail(status, f"bit {index}")
        return bool(status)

    def test(self, index: int) -> bool:
        """Return whether bit ``index`` is set."""
        return self._bit_op(self._lib.fp_bs_test, index)

    def set(self, index: int) -> bool:
        """Set bit ``index``; return whether it was already set, so callers can detect double use."""
        return self._bit_op(self._lib.fp_bs_set, index)

    def clear(self, index: int) -> bool:
        """Clear bit ``index``; return whether it was set, so callers can detect double release."""
        return self._bit_op(self._lib.fp_bs_clear, index)

    def _range_op(self, fn: Any, start: int, stop: int) -> None:
        try:
            status = fn(self._words, self._nbits, start, stop)
        except OverflowError:
            status = FP_ERR_INDEX
        if status < 0:
            raise self._fail(status, f"range [{start}, {stop})")

    def set_range(self, start: int, stop: int) -> None:
        """Set bits ``[start, stop)``; an empty range is a no-op, a reversed one an error."""
        self._range_op(self._lib.fp_bs_set_range, start, stop)

    def clear_range(self, start: int, stop: int) -> None:
        """Clear bits ``[start, stop)``; an empty range is a no-op, a reversed one an error."""
        self._range_op(self._lib.fp_bs_clear_range, start, stop)

    def next_clear(self, start: int = 0, wrap: bool = False) -> int | None:
        """Return the lowest clear bit at or after ``start``, or None.

        ``start`` may equal ``nbits`` so "last allocated + 1" works as a cursor.
        With ``wrap`` the search continues from bit 0 up to ``start``.  Scans
        whole words (count-trailing-zeros), so cost grows with the distance
        to the answer in words, not bits.
        """
        try:
            found = self._lib.fp_bs_next_clear(self._words, self._nbits, start, wrap)
        except OverflowError:
            found = FP_ERR_INDEX
        if found >= 0:
            return int(found)
        if found == FP_NOT_FOUND:
            return None
        raise self._fail(found, f"start {start}")

    def next_set(self, start: int = 0) -> int | None:
        """Return the lowest set bit at or after ``start`` (0..nbits), or None.

        Walking used ids (listing leases, finding runs) costs one word scan per
        call instead of one test() per bit.
        """
        try:
            found = self._lib.fp_bs_next_set(self._words, self._nbits, start)
        except OverflowError:
            found = FP_ERR_INDEX
        if found >= 0:
            return int(found)
        if found == FP_NOT_FOUND:
            return None
        raise self._fail(found, f"start {start}")

    def alloc(self, count: int, start: int = 0, wrap: bool = False) -> list[int]:
        """Set and return up to ``count`` clear bits, lowest first from ``start``.

        One call into the backend for the whole batch, so allocating many ids
        costs one FFI crossing.  Returns fewer than ``count`` (maybe none)
        when the set fills up; with ``wrap`` the search continues from bit 0.
        """
        # Never more results than bits, so the output buffer stays bounded; any
        # negative count is passed as -1 so both backends reject it the same way.
        want = min(count, self._nbits) if count >= 0 else -1
        out = self._backend.new_u32(max(want, 0))
        try:
            done = self._lib.fp_bs_alloc(self._words, self._nbits, start, wrap, want, out)
        except OverflowError:
            done = FP_ERR_INDEX
        if done < 0:
            raise self._fail(done, f"alloc(count={count}, start={start})")
        return list(out[0:done])

    def count(self) -> int:
        """Return the number of set bits."""
        return int(self._lib.fp_bs_count(self._words, self._nbits))

    def first_set(self) -> int | None:
        """Return the lowest set bit, or None if the set is empty."""
        found = self._lib.fp_bs_first_set(self._words, self._nbits)
        return None if found == FP_NOT_FOUND else int(found)

    def last_set(self) -> int | None:
        """Return the highest set bit, or None if the set is empty."""
        found = self._lib.fp_bs_last_set(self._words, self._nbits)
        return None if found == FP_NOT_FOUND else int(found)

    def copy(self) -> Bitset:
        """Return an independent copy on the same backend."""
        dup = Bitset.__new__(Bitset)
        dup._backend, dup._lib, dup._nbits, dup._nwords = self._backend, self._lib, self._nbits, self._nwords
        dup._words = self._backend.copy_words(self._words, self._nwords)
        return dup

    def to_bytes(self) -> bytes:
        """Serialise to the versioned format in the module docstring (what the store persists)."""
        lib, b = self._lib, self._backend
        raw_len = (self._nbits + 7) // 8
        # Runs win only if strictly shorter than raw, so cap them at raw_len - 1.
        buf = b.new_bytes(raw_len)
        length = lib.fp_bs_encode_runs(self._words, self._nbits, buf, raw_len - 1)
        encoding = _ENC_RUNS
        if length == FP_ERR_SPACE:
            length = lib.fp_bs_encode_raw(self._words, self._nbits, buf, raw_len)
            encoding = _ENC_RAW
        body = _HEADER.pack(MAGIC, FORMAT_VERSION, encoding, 0, self._nbits, length)
        body += b.read_bytes(buf, length)
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes, *, backend: Backend | None = None) -> Bitset:
        """Rebuild a set from :meth:`to_bytes` output of this or any earlier format version.

        Raises ValueError naming the problem for truncated, corrupted
        (CRC mismatch), non-canonical or unknown-version input.
        """
        data = bytes(data)
        if len(data) < _HEADER.size + _CRC.size:
            raise ValueError(f"serialised bitset: {len(data)} bytes is shorter than the header")
        magic, version, encoding, reserved, nbits, length = _HEADER.unpack_from(data)
        if magic != MAGIC:
            raise ValueError(f"serialised bitset: bad magic {magic!r}, expected {MAGIC!r}")
        if version != FORMAT_VERSION:
            raise ValueError(f"serialised bitset: format version {version} is not supported (reads {FORMAT_VERSION})")
        if _HEADER.size + length + _CRC.size != len(data):
            raise ValueError(f"serialised bitset: payload length {length} does not match {len(data)} bytes")
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if crc != zlib.crc32(data[: -_CRC.size]):
            raise ValueError("serialised bitset: CRC mismatch (corrupted data)")
        if encoding not in (_ENC_RAW, _ENC_RUNS) or reserved != 0:
            raise ValueError(f"serialised bitset: unknown encoding {encoding} or flags {reserved}")
        bits = cls(nbits, backend=backend)
        payload = data[_HEADER.size : _HEADER.size + length]
        decode = bits._lib.fp_bs_decode_runs if encoding == _ENC_RUNS else bits._lib.fp_bs_decode_raw
        status = decode(bits._words, nbits, payload, length)
        if status < 0:
            raise bits._fail(status, "serialised payload")
        return bits

"""Contiv's address bitmaps (Go `github.com/jainvipin/bitset`) read into fastpath's encoding.

Go writes a bitset as a JSON string: URL-safe base64 of a big-endian uint64 bit length followed
by big-endian uint64 words, bit i in word i // 64 at position i % 64. contivd stores the same
bits as a fastpath bitset in standard base64 (contiv-api.md Decision 5, contivd.state.usage).
"""

from __future__ import annotations

import base64
import binascii
import struct

from fastpath import Bitset


def go_bitset_indices(encoded: str) -> tuple[int, list[int]]:
    """(bit length, the set indices ascending) of a Go bitset's JSON string; ValueError if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(encoded.encode())
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64: {exc}") from None
    if len(raw) < 8 or len(raw) % 8:
        raise ValueError(f"{len(raw)} bytes is not a length and whole 64-bit words")
    (length,) = struct.unpack(">Q", raw[:8])
    words = struct.unpack(f">{len(raw) // 8 - 1}Q", raw[8:])
    if len(words) * 64 < length:
        raise ValueError(f"length {length} bits but only {len(words)} words")
    found = [w * 64 + b for w, word in enumerate(words) if word for b in range(64) if word >> b & 1]
    return length, found


def to_fastpath(encoded: str, nbits: int) -> str:
    """A Go bitset as a fastpath bitset of `nbits` bits, base64 as contivd stores it; ValueError
    if a set bit lies beyond `nbits` (the map does not fit the subnet it belongs to)."""
    _, indices = go_bitset_indices(encoded)
    bits = Bitset(nbits)
    for index in indices:
        if index >= nbits:
            raise ValueError(f"bit {index} is set but the subnet has only {nbits} addresses")
        bits.set(index)
    return base64.b64encode(bits.to_bytes()).decode()

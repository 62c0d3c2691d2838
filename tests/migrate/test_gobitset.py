"""Contiv's Go bitsets read into fastpath's: the same bits, and clear errors for what is not one."""

from __future__ import annotations

import base64

import pytest

from contivd.migrate.gobitset import go_bitset_indices, to_fastpath
from fastpath import Bitset
from tests.support.contiv_tree import go_bitset


@pytest.mark.parametrize("length, indices", [(0, set()), (8, {0, 7}), (64, {0, 63}), (256, {0, 1, 64, 130, 255}), (65536, {0, 4095, 65535})])
def test_round_trip(length: int, indices: set[int]) -> None:
    encoded = go_bitset(length, indices)
    assert go_bitset_indices(encoded) == (length, sorted(indices))
    if length:
        bits = Bitset.from_bytes(base64.b64decode(to_fastpath(encoded, length)))
        assert {i for i in range(length) if bits.test(i)} == indices


def test_refuses_what_is_not_a_go_bitset() -> None:
    with pytest.raises(ValueError, match="whole 64-bit words"):
        go_bitset_indices(base64.urlsafe_b64encode(b"abc").decode())
    with pytest.raises(ValueError, match="only 8 addresses"):
        to_fastpath(go_bitset(16, {12}), 8)

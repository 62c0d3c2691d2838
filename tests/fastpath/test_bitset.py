"""Bitset: C vs the Python twin vs a plain-set model, on random operation sequences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpath import Backend, Bitset
from fastpath._reference import FP_MAX_BITS
from tests.fastpath.helpers import PY, C, outcome

SIZES = st.one_of(st.sampled_from([1, 2, 63, 64, 65, 127, 128, 129, 640]), st.integers(1, 3000))
HUGE = st.sampled_from([-(2**63), 2**63 - 1, 2**64, -(2**70)])


class Model:
    """The obvious implementation: a Python set of indices."""

    def __init__(self, nbits: int) -> None:
        self.nbits = nbits
        self.bits: set[int] = set()

    def _index(self, i: int) -> None:
        if not 0 <= i < self.nbits:
            raise ValueError

    def _range(self, a: int, b: int) -> range:
        if not (0 <= a <= self.nbits and 0 <= b <= self.nbits and a <= b):
            raise ValueError
        return range(a, b)

    def test(self, i: int) -> bool:
        self._index(i)
        return i in self.bits

    def set(self, i: int) -> bool:
        self._index(i)
        was = i in self.bits
        self.bits.add(i)
        return was

    def clear(self, i: int) -> bool:
        self._index(i)
        was = i in self.bits
        self.bits.discard(i)
        return was

    def set_range(self, a: int, b: int) -> None:
        self.bits.update(self._range(a, b))

    def clear_range(self, a: int, b: int) -> None:
        self.bits.difference_update(self._range(a, b))

    def next_clear(self, start: int, wrap: bool) -> int | None:
        if not 0 <= start <= self.nbits:
            raise ValueError
        order = list(range(start, self.nbits)) + (list(range(start)) if wrap else [])
        return next((i for i in order if i not in self.bits), None)

    def next_set(self, start: int) -> int | None:
        if not 0 <= start <= self.nbits:
            raise ValueError
        return min((i for i in self.bits if i >= start), default=None)

    def alloc(self, count: int, start: int, wrap: bool) -> list[int]:
        if not 0 <= start <= self.nbits or count < 0:
            raise ValueError
        got: list[int] = []
        cursor = self.next_clear(start, wrap)
        while len(got) < count and cursor is not None:
            self.bits.add(cursor)
            got.append(cursor)
            cursor = self.next_clear(cursor + 1, wrap)
        return got

    def count(self) -> int:
        return len(self.bits)

    def first_set(self) -> int | None:
        return min(self.bits, default=None)

    def last_set(self) -> int | None:
        return max(self.bits, default=None)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, list[tuple[Any, ...]]]:
    nbits = draw(SIZES)
    index = st.one_of(st.integers(0, nbits - 1), st.integers(-3, nbits + 3), HUGE)
    bound = st.one_of(st.integers(0, nbits), st.integers(-3, nbits + 3))
    op = st.one_of(
        st.tuples(st.sampled_from(["test", "set", "clear"]), index),
        st.tuples(st.sampled_from(["set_range", "clear_range"]), bound, bound),
        st.tuples(st.just("next_clear"), st.one_of(bound, HUGE), st.booleans()),
        st.tuples(st.just("next_set"), st.one_of(bound, HUGE)),
        st.tuples(st.just("alloc"), st.one_of(st.integers(-2, 70), HUGE), st.one_of(bound, HUGE), st.booleans()),
        st.tuples(st.sampled_from(["count", "first_set", "last_set"])),
    )
    return nbits, draw(st.lists(op, max_size=40))


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_c_twin_and_model_agree(scenario: tuple[int, list[tuple[Any, ...]]]) -> None:
    nbits, ops = scenario
    c, py, model = Bitset(nbits, backend=C), Bitset(nbits, backend=PY), Model(nbits)
    for name, *args in ops:
        got_c = outcome(getattr(c, name), *args)
        got_py = outcome(getattr(py, name), *args)
        assert got_c == got_py, (name, args)
        expected = outcome(getattr(model, name), *args)
        if expected[0] == "error":
            assert got_c[0] == "error", (name, args)
        else:
            assert got_c == expected, (name, args)
    assert c.to_bytes() == py.to_bytes()
    assert {i for i in range(nbits) if c.test(i)} == model.bits


def test_invalid_sizes_rejected(backend: Backend) -> None:
    for nbits in (0, -1, FP_MAX_BITS + 1, 2**70):
        with pytest.raises(ValueError, match="bitset size"):
            Bitset(nbits, backend=backend)


def test_full_size_set_edges(backend: Backend) -> None:
    """2^24 bits, the /8 limit: ends of the set and wrap-around."""
    bits = Bitset(FP_MAX_BITS, backend=backend)
    bits.set_range(0, FP_MAX_BITS - 1)
    assert bits.next_clear(0) == FP_MAX_BITS - 1
    assert bits.alloc(5, start=FP_MAX_BITS - 1, wrap=True) == [FP_MAX_BITS - 1]
    assert bits.next_clear(FP_MAX_BITS, wrap=True) is None
    assert bits.count() == FP_MAX_BITS
    bits.clear(12345)
    assert bits.next_clear(FP_MAX_BITS, wrap=True) == 12345
    assert bits.first_set() == 0 and bits.last_set() == FP_MAX_BITS - 1
    with pytest.raises(ValueError, match="index out of range"):
        bits.set(FP_MAX_BITS)


def test_errors_leave_the_set_unchanged(backend: Backend) -> None:
    bits = Bitset(100, backend=backend)
    bits.set_range(10, 20)
    before = bits.to_bytes()
    for bad in (
        lambda: bits.set_range(20, 10),
        lambda: bits.clear_range(0, 101),
        lambda: bits.alloc(3, start=101),
    ):
        with pytest.raises(ValueError):
            bad()
    assert bits.to_bytes() == before


def test_error_messages_name_the_problem() -> None:
    bits = Bitset(64, backend=C)
    with pytest.raises(ValueError, match=r"bit 64 of a 64-bit set: index out of range"):
        bits.test(64)
    with pytest.raises(ValueError, match=r"range \[9, 3\) of a 64-bit set: range start is after its end"):
        bits.set_range(9, 3)


def test_copy_is_independent(backend: Backend) -> None:
    bits = Bitset(130, backend=backend)
    bits.set(129)
    dup = bits.copy()
    dup.set(0)
    assert bits.count() == 1 and dup.count() == 2
    assert dup != bits and dup.backend is bits.backend

"""IPv4 subnet helpers and IPPool: examples, errors, and C/twin parity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastpath import Backend, Bitset, IPPool, Subnet, apply_pool, format_ipv4, host_to_ip, ip_to_host, reserve
from tests.fastpath.helpers import PY, C, outcome


def test_host_index_round_trip(backend: Backend) -> None:
    assert host_to_ip("198.18.0.0/16", 0, backend=backend) == "198.18.0.0"
    assert host_to_ip("198.18.0.0/16", 258, backend=backend) == "198.18.1.2"
    assert ip_to_host("198.18.0.0/16", "198.18.255.255", backend=backend) == 65535
    assert host_to_ip("255.255.255.255/32", 0, backend=backend) == "255.255.255.255"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda b: host_to_ip("198.18.0.0/16", 65536, backend=b),
            "host index 65536 in 198.18.0.0/16: index out of range",
        ),
        (lambda b: host_to_ip("198.18.0.0/16", -1, backend=b), "index out of range"),
        (lambda b: host_to_ip("198.18.0.0/16", 2**80, backend=b), "index out of range"),
        (
            lambda b: ip_to_host("198.18.0.0/16", "198.19.0.0", backend=b),
            "address 198.19.0.0 in 198.18.0.0/16: address outside",
        ),
        (lambda b: ip_to_host("198.18.0.0/16", "198.18.0.256", backend=b), "198.18.0.256"),
    ],
)
def test_index_and_address_errors(backend: Backend, call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(backend)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("198.18.0.0/33", "prefix length out of range"),
        ("198.0.0.0/7", "prefix length out of range"),  # no host bits (it holds 198.18.0.0/15): only the length is wrong
        ("198.18.0.1/24", "host bits"),
        ("198.18.0.0", "expected a.b.c.d/prefix"),
        ("198.18.0.0/-1", "expected a.b.c.d/prefix"),
        ("198.18.0/24", "198.18.0/24"),
    ],
)
def test_subnet_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Subnet.parse(text)


@pytest.mark.parametrize(("network", "prefix"), [(2**70, 8), (-1, 24), (0, 2**70), (0, -(2**70))])
def test_subnet_out_of_range_ints(network: int, prefix: int) -> None:
    with pytest.raises(ValueError, match="subnet"):
        Subnet(network, prefix)


def test_pool_marks_everything_outside(backend: Backend) -> None:
    bits = Bitset(256, backend=backend)
    apply_pool(bits, "198.18.1.0/24", "198.18.1.10-198.18.1.19")
    assert bits.count() == 246
    assert bits.next_clear() == 10
    assert not bits.test(19) and bits.test(20)


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ("198.18.1.20-198.18.1.10", "range start is after its end"),
        ("198.18.0.255-198.18.1.10", "address outside the subnet"),
        ("198.18.1.10-198.18.2.0", "address outside the subnet"),
        ("198.18.1.10", "expected a.b.c.d-e.f.g.h"),
        ("198.18.1.10-banana", "banana"),
    ],
)
def test_pool_errors_leave_bits_unchanged(backend: Backend, pool: str, message: str) -> None:
    bits = Bitset(256, backend=backend)
    with pytest.raises(ValueError, match=message):
        apply_pool(bits, "198.18.1.0/24", pool)
    assert bits.count() == 0


def test_pool_bitset_must_match_subnet(backend: Backend) -> None:
    with pytest.raises(ValueError, match="match the subnet"):
        apply_pool(Bitset(255, backend=backend), "198.18.1.0/24", "198.18.1.1-198.18.1.2")


def test_reserve(backend: Backend) -> None:
    bits = Bitset(256, backend=backend)
    reserve(bits, "198.18.1.0/24", "198.18.1.1")
    assert [i for i in range(256) if bits.test(i)] == [0, 1, 255]
    with pytest.raises(ValueError, match="outside the subnet"):
        reserve(bits, "198.18.1.0/24", "198.18.2.1")
    for prefix, size in ((31, 2), (32, 1)):
        small = Bitset(size, backend=backend)
        reserve(small, f"198.19.9.0/{prefix}")
        assert small.count() == 0  # RFC 3021: no network/broadcast


def test_slash8_is_the_limit(backend: Backend) -> None:
    # The only /8 around 198.18.0.0/15 (the test range) is 198.0.0.0/8; its pool stays inside 198.18.0.0/15.
    pool = IPPool("198.0.0.0/8", pool="198.19.255.200-198.19.255.254", backend=backend)
    assert pool.free_count() == 55
    assert pool.alloc_lowest() == "198.19.255.200"


def test_ippool_lifecycle(backend: Backend) -> None:
    pool = IPPool("198.18.0.0/29", gateway="198.18.0.1", backend=backend)
    assert [pool.alloc_lowest() for _ in range(6)] == [
        "198.18.0.2", "198.18.0.3", "198.18.0.4", "198.18.0.5", "198.18.0.6", None,
    ]  # fmt: skip
    assert pool.release("198.18.0.4") and not pool.release("198.18.0.4")
    assert pool.alloc("198.18.0.4") and not pool.alloc("198.18.0.4")
    pool.release("198.18.0.3")
    restored = IPPool.from_bytes("198.18.0.0/29", pool.to_bytes(), backend=backend)
    assert restored.alloc_lowest() == "198.18.0.3"
    with pytest.raises(ValueError, match=r"has 8 bits but 198\.18\.1\.0/24 has 256"):
        IPPool.from_bytes("198.18.1.0/24", pool.to_bytes(), backend=backend)
    with pytest.raises(ValueError, match="outside the subnet"):
        pool.alloc("198.18.0.8")


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(16, 32), st.data())
def test_twin_parity(addr: int, prefix: int, data: st.DataObject) -> None:
    """Random subnets, indices and pools (valid or not): identical results and errors."""
    network = addr & ~((1 << (32 - prefix)) - 1) & 0xFFFFFFFF
    subnet = Subnet(network, prefix)
    near = st.integers(-3, subnet.size + 3).map(lambda off: network + off).filter(lambda ip: 0 <= ip < 2**32)
    index, lo, hi = data.draw(st.integers(-3, subnet.size + 3)), data.draw(near), data.draw(near)
    assert outcome(host_to_ip, subnet, index, backend=C) == outcome(host_to_ip, subnet, index, backend=PY)
    ip = format_ipv4(lo)
    assert outcome(ip_to_host, subnet, ip, backend=C) == outcome(ip_to_host, subnet, ip, backend=PY)
    pool = f"{format_ipv4(lo)}-{format_ipv4(hi)}"
    results = []
    for backend in (C, PY):
        bits = Bitset(subnet.size, backend=backend)
        results.append((outcome(apply_pool, bits, subnet, pool), bits.to_bytes()))
    assert results[0] == results[1]

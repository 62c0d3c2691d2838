"""IPv4 subnets as bitsets: host index <-> address, Contiv pool ranges, reservations.

A subnet's bitset has one bit per address; bit 0 is the network address.
This module only parses text (``10.1.0.0/16``, ``10.1.0.10-10.1.0.99``) and
calls the backend's ``fp_addr_*`` functions, which validate prefix, host
bits, range order and membership and mark the bitset.  It holds no state
and does no allocation policy; :class:`IPPool` is the thin convenience the
store's FSM uses for "lowest free address".
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from fastpath._backend import Backend, backend_or_default, error
from fastpath._reference import FP_ERR_INDEX, FP_ERR_SUBNET
from fastpath.bitset import Bitset


def parse_ipv4(text: str) -> int:
    """Return the 32-bit value of a dotted-quad address; ValueError if malformed."""
    return int(ipaddress.IPv4Address(text))


def format_ipv4(value: int) -> str:
    """Return the dotted-quad text of a 32-bit address."""
    return str(ipaddress.IPv4Address(value))


@dataclass(frozen=True)
class Subnet:
    """An IPv4 network of /8 to /32 (a /8 is the 2^24-bit bitset limit)."""

    network: int
    prefix: int

    def __post_init__(self) -> None:
        try:
            status = backend_or_default(None).lib.fp_addr_host_to_ip(self.network, self.prefix, 0)
        except OverflowError:
            status = FP_ERR_SUBNET
        if status < 0:
            raise error(status, f"subnet {self.network:#x}/{self.prefix}")

    @classmethod
    def parse(cls, text: str) -> Subnet:
        """Parse ``a.b.c.d/n``; host bits set in the address are an error, not masked off."""
        addr, sep, prefix = text.partition("/")
        if not sep or not prefix.isdigit():
            raise ValueError(f"subnet {text!r}: expected a.b.c.d/prefix")
        try:
            return cls(parse_ipv4(addr), int(prefix))
        except ValueError as exc:
            raise ValueError(f"subnet {text!r}: {exc}") from None

    @property
    def size(self) -> int:
        """Number of addresses, which is also the subnet bitset's size."""
        return 1 << (32 - self.prefix)

    def __str__(self) -> str:
        return f"{format_ipv4(self.network)}/{self.prefix}"


def _subnet(subnet: str | Subnet) -> Subnet:
    return subnet if isinstance(subnet, Subnet) else Subnet.parse(subnet)


def host_to_ip(subnet: str | Subnet, index: int, *, backend: Backend | None = None) -> str:
    """Return the address of host ``index`` (0 is the network address)."""
    net = _subnet(subnet)
    try:
        ip = backend_or_default(backend).lib.fp_addr_host_to_ip(net.network, net.prefix, index)
    except OverflowError:
        ip = FP_ERR_INDEX
    if ip < 0:
        raise error(ip, f"host index {index} in {net}")
    return format_ipv4(ip)


def ip_to_host(subnet: str | Subnet, ip: str, *, backend: Backend | None = None) -> int:
    """Return the host index of ``ip`` in ``subnet``; ValueError if outside it."""
    net = _subnet(subnet)
    index = backend_or_default(backend).lib.fp_addr_ip_to_host(net.network, net.prefix, parse_ipv4(ip))
    if index < 0:
        raise error(index, f"address {ip} in {net}")
    return int(index)


def parse_pool(text: str) -> tuple[int, int]:
    """Parse Contiv's ``a.b.c.d-e.f.g.h`` pool syntax into (first, last) addresses."""
    first, sep, last = text.partition("-")
    if not sep:
        raise ValueError(f"pool {text!r}: expected a.b.c.d-e.f.g.h")
    try:
        return parse_ipv4(first.strip()), parse_ipv4(last.strip())
    except ValueError as exc:
        raise ValueError(f"pool {text!r}: {exc}") from None


def apply_pool(bits: Bitset, subnet: str | Subnet, pool: str) -> None:
    """Mark every address outside ``pool`` as used, as Contiv does for EPG pools.

    The range is inclusive and must lie inside the subnet with first <= last;
    ``bits`` must be the subnet's bitset (``subnet.size`` bits).
    """
    net = _subnet(subnet)
    first, last = parse_pool(pool)
    status = bits.backend.lib.fp_addr_apply_pool(bits._words, bits.nbits, net.network, net.prefix, first, last)
    if status < 0:
        raise error(status, f"pool {pool} in {net}")


def reserve(bits: Bitset, subnet: str | Subnet, gateway: str | None = None) -> None:
    """Mark the network and broadcast addresses and the gateway (if any) as used.

    /31 and /32 subnets have no network or broadcast address (RFC 3021), so
    only the gateway is marked there.
    """
    net = _subnet(subnet)
    gw = 0 if gateway is None else parse_ipv4(gateway)
    status = bits.backend.lib.fp_addr_reserve(bits._words, bits.nbits, net.network, net.prefix, gateway is not None, gw)
    if status < 0:
        raise error(status, f"reserving network, broadcast and gateway {gateway} in {net}")


class IPPool:
    """A subnet's address bitset with Contiv's reservations, allocating lowest-first.

    Owns its :class:`Bitset`; persists through :meth:`to_bytes`.  Not
    thread-safe and not replicated: the raft FSM owns instances and applies
    commands to them in log order.
    """

    __slots__ = ("bits", "subnet")

    def __init__(
        self,
        subnet: str | Subnet,
        *,
        pool: str | None = None,
        gateway: str | None = None,
        backend: Backend | None = None,
    ) -> None:
        """Create the pool with network, broadcast and gateway reserved and ``pool`` applied."""
        self.subnet = _subnet(subnet)
        self.bits = Bitset(self.subnet.size, backend=backend)
        reserve(self.bits, self.subnet, gateway)
        if pool is not None:
            apply_pool(self.bits, self.subnet, pool)

    def alloc_lowest(self) -> str | None:
        """Allocate and return the lowest free address, or None if the pool is exhausted."""
        got = self.bits.alloc(1)
        return format_ipv4(self.subnet.network + got[0]) if got else None

    def alloc(self, ip: str) -> bool:
        """Allocate a specific address; return False if it was already in use."""
        return not self.bits.set(ip_to_host(self.subnet, ip, backend=self.bits.backend))

    def release(self, ip: str) -> bool:
        """Free an address; return False if it was not allocated."""
        return self.bits.clear(ip_to_host(self.subnet, ip, backend=self.bits.backend))

    def free_count(self) -> int:
        """Return how many addresses are still free."""
        return self.bits.nbits - self.bits.count()

    def to_bytes(self) -> bytes:
        """Serialise the allocation state (the subnet is stored by the caller)."""
        return self.bits.to_bytes()

    @classmethod
    def from_bytes(cls, subnet: str | Subnet, data: bytes, *, backend: Backend | None = None) -> IPPool:
        """Restore a pool saved with :meth:`to_bytes`; the sizes must agree."""
        net = _subnet(subnet)
        bits = Bitset.from_bytes(data, backend=backend)
        if bits.nbits != net.size:
            raise ValueError(f"pool state has {bits.nbits} bits but {net} has {net.size} addresses")
        pool = cls.__new__(cls)
        pool.subnet, pool.bits = net, bits
        return pool

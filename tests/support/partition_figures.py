"""Pure figures of a partition run: from acknowledged writes and the cut/heal times, how long the
majority side was unavailable, how long after the heal every node served again, and whether
the store kept every acknowledged endpoint once. Shared by the partition tests and
benchmarks/fault_bench.py; the driver that collects the records is partition_driver.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Ack:
    """One acknowledged create: which node answered, when it was sent and answered (monotonic s)."""

    endpoint: str
    address: str
    node: str
    sent: float
    answered: float


@dataclass(frozen=True)
class Window:
    """One partition: the node cut off, when the cut was in place and when it was lifted."""

    isolated: str
    mode: str  # "both" or "outbound"
    cut: float
    healed: float


def unavailable_seconds(acks: Iterable[Ack], window: Window) -> float:
    """The longest stretch inside the window with no write acknowledged by a majority-side node,
    counting only writes sent after the cut (one in flight at the cut may have committed before)."""
    times = sorted(a.answered for a in acks if a.node != window.isolated and window.cut <= a.sent and a.answered <= window.healed)
    edges = [window.cut, *times, window.healed]
    return max(later - earlier for earlier, later in zip(edges, edges[1:], strict=False))


def recovery_seconds(acks: Iterable[Ack], window: Window, nodes: Iterable[str]) -> float | None:
    """Heal → every node has acknowledged a write sent to it after the heal; None if one never did."""
    first: dict[str, float] = {}
    for ack in acks:
        if ack.sent >= window.healed:
            first[ack.node] = min(first.get(ack.node, ack.answered), ack.answered)
    names = list(nodes)
    if any(name not in first for name in names):
        return None
    return max(first[name] for name in names) - window.healed


def isolated_acks(acks: Iterable[Ack], window: Window) -> list[Ack]:
    """Writes the cut-off node acknowledged although they were sent after the cut: must be none."""
    return [a for a in acks if a.node == window.isolated and a.sent >= window.cut and a.answered <= window.healed]


@dataclass(frozen=True)
class Integrity:
    lost: list[str]  # acknowledged, but missing from the store or stored with another address
    duplicates: int  # addresses held by more than one endpoint
    leaked: int  # addresses allocated in IPAM beyond the endpoints that hold one
    unknown: list[str]  # stored endpoints no client ever asked for


def integrity(acks: Iterable[Ack], stored: Mapping[str, str], allocated: int, attempted: set[str]) -> Integrity:
    """Compare what clients were told with what the store holds (`stored`: endpoint → address)."""
    lost = sorted(a.endpoint for a in acks if stored.get(a.endpoint) != a.address)
    duplicates = sum(count - 1 for count in Counter(stored.values()).values() if count > 1)
    return Integrity(lost, duplicates, allocated - len(stored), sorted(set(stored) - attempted))


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]

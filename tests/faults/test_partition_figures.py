"""The partition driver's figures (tests/support/partition_figures.py), on hand-made timelines."""

from __future__ import annotations

from tests.support.partition_figures import Ack, Window, integrity, isolated_acks, percentile, recovery_seconds, unavailable_seconds

WINDOW = Window("n1", "both", cut=10.0, healed=20.0)


def ack(node: str, sent: float, answered: float, endpoint: str = "e", address: str = "a") -> Ack:
    return Ack(endpoint, address, node, sent, answered)


def test_unavailability_is_the_longest_gap_without_a_majority_ack_counting_only_writes_sent_after_the_cut() -> None:
    acks = [ack("n2", 9.9, 10.2), ack("n2", 10.1, 12.5), ack("n3", 12.6, 13.0), ack("n1", 14.0, 14.1), ack("n3", 19.0, 19.5)]
    # n2's first ack was sent before the cut and n1 is the cut-off node: gaps 2.5, 0.5, 6.5, 0.5
    assert unavailable_seconds(acks, WINDOW) == 6.5
    assert unavailable_seconds([], WINDOW) == 10.0


def test_recovery_waits_for_every_node_to_acknowledge_a_write_sent_after_the_heal() -> None:
    acks = [ack("n1", 19.0, 20.5), ack("n2", 20.1, 20.4), ack("n3", 20.2, 21.5), ack("n1", 20.5, 22.0)]
    assert recovery_seconds(acks, WINDOW, ["n2", "n3"]) == 1.5
    assert recovery_seconds(acks, WINDOW, ["n1", "n2", "n3"]) == 2.0
    assert recovery_seconds(acks[:2], WINDOW, ["n1", "n2", "n3"]) is None


def test_the_cut_off_node_must_not_acknowledge_writes_sent_during_the_partition() -> None:
    before, during = ack("n1", 9.9, 10.1), ack("n1", 11.0, 11.2)
    assert isolated_acks([before, during, ack("n2", 11.0, 11.5)], WINDOW) == [during]


def test_integrity_counts_lost_duplicate_leaked_and_unknown_endpoints() -> None:
    acks = [ack("n2", 1, 2, "e1", "198.19.0.1"), ack("n2", 1, 2, "e2", "198.19.0.2"), ack("n3", 1, 2, "e3", "198.19.0.3")]
    stored = {"e1": "198.19.0.1", "e2": "198.19.0.9", "e4": "198.19.0.1"}
    result = integrity(acks, stored, allocated=4, attempted={"e1", "e2", "e3"})
    assert result.lost == ["e2", "e3"] and result.duplicates == 1 and result.leaked == 1 and result.unknown == ["e4"]


def test_percentile_is_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([5.0], 0.99) == 5.0

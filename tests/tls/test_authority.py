"""The cluster CA record (contivd.state.ca) and rotation rules (contivd.tls.authority), as pure functions."""

from __future__ import annotations

import pytest

from contivd.state.ca import CaRecord, RetiredCa
from contivd.tls.authority import MIN_GRACE_SECONDS, RotationRefusedError, bundle, rotated


def test_a_record_written_before_rotation_existed_reads_as_one_trusted_ca() -> None:
    record = CaRecord.from_json({"certificate": "OLD", "sealedKey": "k", "createdBy": "n1"})
    assert record.trusted(0.0) == ("OLD",) and record.next_change(0.0) is None
    assert record.to_json() == {"certificate": "OLD", "sealedKey": "k", "createdBy": "n1"}


def test_a_rotation_trusts_old_and_new_for_the_grace_period_then_the_new_only() -> None:
    record = rotated(CaRecord("OLD", "k1", "n1"), "NEW", "k2", "n2", grace=60.0, now=1000.0)
    assert record.trusted(1000.0) == ("NEW", "OLD") and record.next_change(1000.0) == 1060.0
    assert record.trusted(1060.0) == ("NEW",) and record.next_change(1060.0) is None
    assert CaRecord.from_json(record.to_json()) == record
    assert record.retired == (RetiredCa("OLD", 1060.0),)


def test_a_second_rotation_waits_for_the_first_ones_grace_period() -> None:
    rotated_once = rotated(CaRecord("OLD", "k1", "n1"), "NEW", "k2", "n2", grace=60.0, now=1000.0)
    with pytest.raises(RotationRefusedError, match="grace period runs until 1060"):
        rotated(rotated_once, "NEWER", "k3", "n3", grace=60.0, now=1030.0)
    assert rotated(rotated_once, "NEWER", "k3", "n3", grace=60.0, now=1061.0).trusted(1061.0) == ("NEWER", "NEW")


@pytest.mark.parametrize("grace", [0.0, MIN_GRACE_SECONDS - 1, 31 * 86400.0])
def test_a_grace_period_out_of_bounds_is_refused(grace: float) -> None:
    with pytest.raises(RotationRefusedError, match="grace must be between"):
        rotated(CaRecord("OLD", "k", "n"), "NEW", "k2", "n", grace=grace, now=0.0)


def test_the_bundle_keeps_the_order_and_ends_every_certificate_with_a_newline() -> None:
    assert bundle(("A\n", "B")) == "A\nB\n"

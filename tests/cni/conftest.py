"""Fixtures the CNI tests share (helpers live in tests/support/cni_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cni_harness import Pod


@pytest.fixture
def pods() -> Iterator[list[Pod]]:
    """Pod namespaces made by the test (cni_harness.new_pod); removed afterwards, even on failure."""
    made: list[Pod] = []
    try:
        yield made
    finally:
        for pod in made:
            pod.remove()

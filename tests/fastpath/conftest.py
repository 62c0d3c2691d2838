"""Shared fixtures for fastpath tests."""

from __future__ import annotations

import pytest

from fastpath import Backend
from tests.fastpath.helpers import PY, C


@pytest.fixture(params=[C, PY], ids=["c", "python"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Run a test once per backend."""
    backend: Backend = request.param
    return backend

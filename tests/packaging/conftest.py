from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from contivd import __version__

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def built() -> Iterator[tuple[Path, Path]]:
    """dist/contivd and the .deb, built once per session from this tree (both test modules use them)."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    subprocess.run(["bash", str(ROOT / "packaging" / "build-binary")], cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
    subprocess.run(["bash", str(ROOT / "packaging" / "build-deb")], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    yield ROOT / "dist" / "contivd", ROOT / "dist" / f"contivd_{__version__}_{arch}.deb"

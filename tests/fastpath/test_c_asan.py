"""Compile the C library with AddressSanitizer + UBSan and run the edge-case driver.

The driver (c/test_main.c) hands the library exact-size heap buffers, so
any out-of-bounds read or write, or undefined behaviour, aborts the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import fastpath

CSRC = Path(fastpath.__file__).parent / "csrc"
DRIVER = Path(__file__).parent / "c" / "test_main.c"
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed, cannot build the sanitizer driver")
def test_c_library_under_asan_and_ubsan(tmp_path: Path) -> None:
    exe = tmp_path / "fastpath_asan"
    sources = [str(p) for p in sorted(CSRC.glob("*.c"))] + [str(DRIVER)]
    build = subprocess.run(
        [
            "gcc",
            "-std=c99",
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            *SANITIZE,
            f"-I{CSRC}",
            *sources,
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run(
        [str(exe)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "fastpath C tests passed" in run.stdout

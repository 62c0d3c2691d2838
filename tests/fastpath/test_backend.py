"""Backend selection through CONTIVD_FASTPATH, in fresh interpreters."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "CONTIVD_FASTPATH"} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, check=False)


def test_default_is_c() -> None:
    assert run("import fastpath; print(fastpath.DEFAULT.name)").stdout.strip() == "c"


def test_python_selected_by_env() -> None:
    code = "import fastpath; print(fastpath.DEFAULT.name, fastpath.Bitset(8).backend.name)"
    assert run(code, CONTIVD_FASTPATH="python").stdout.strip() == "python python"


def test_unknown_value_fails_loudly() -> None:
    result = run("import fastpath", CONTIVD_FASTPATH="fortran")
    assert result.returncode != 0 and "expected 'c' or 'python'" in result.stderr


# Simulate an install without the compiled extension.
HIDE_NATIVE = "import sys; sys.modules['fastpath._native'] = None; "


@pytest.mark.parametrize(("env", "ok"), [({}, False), ({"CONTIVD_FASTPATH": "c"}, False), ({"CONTIVD_FASTPATH": "python"}, True)])
def test_missing_extension(env: dict[str, str], ok: bool) -> None:
    result = run(HIDE_NATIVE + "import fastpath; print(fastpath.DEFAULT.name, fastpath.C)", **env)
    if ok:
        assert result.stdout.strip() == "python None"
    else:
        assert result.returncode != 0 and "fastpath._native is not built" in result.stderr

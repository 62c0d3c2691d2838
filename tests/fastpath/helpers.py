"""The two backends under comparison and a helper to compare their outcomes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fastpath
from fastpath import Backend

if fastpath.C is None:  # pragma: no cover - only when the extension was not built
    raise RuntimeError("fastpath._native is not built; run `pip install -e '.[test]'` first")

C: Backend = fastpath.C
PY: Backend = fastpath.PYTHON


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """Return ("ok", fn(*args, **kwargs)) or ("error", "<type>: <message>"), comparable with ==."""
    try:
        return "ok", fn(*args, **kwargs)
    except ValueError as exc:
        return "error", f"{type(exc).__name__}: {exc}"

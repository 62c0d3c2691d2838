"""Backend selection: the compiled C library or its pure-Python twin.

Owns the ``CONTIVD_FASTPATH`` environment variable (read once, at import)
and the small buffer adapters that let one wrapper drive either backend:
the C functions want cffi arrays, the twin wants lists and bytearrays.
It also owns the mapping from the shared FP_* status codes to ValueError
messages, so both backends fail with identical text.

Not responsible for validation beyond that mapping: the C functions and
their twins check every argument themselves.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fastpath import _reference

ENV_VAR = "CONTIVD_FASTPATH"
"""Environment variable choosing the backend: ``c`` (default) or ``python``."""


@dataclass(frozen=True)
class Backend:
    """One implementation of the ``fp_*`` functions plus its buffer adapters."""

    name: str
    lib: Any
    new_words: Callable[[int], Any]
    copy_words: Callable[[Any, int], Any]
    new_u32: Callable[[int], Any]
    new_u16: Callable[[int], Any]
    new_bytes: Callable[[int], Any]
    read_bytes: Callable[[Any, int], bytes]
    new_count: Callable[[], Any]
    null: Any


PYTHON = Backend(
    name="python",
    lib=_reference,
    new_words=lambda n: [0] * n,
    copy_words=lambda words, n: list(words),
    new_u32=lambda n: [0] * n,
    new_u16=lambda n: [0] * n,
    new_bytes=bytearray,
    read_bytes=lambda buf, n: bytes(buf[:n]),
    new_count=lambda: [0],
    null=None,
)


def _c_backend(native: ModuleType) -> Backend:
    ffi = native.ffi

    def copy_words(words: Any, n: int) -> Any:
        dup = ffi.new("uint64_t[]", n)
        ffi.memmove(dup, words, n * 8)
        return dup

    return Backend(
        name="c",
        lib=native.lib,
        new_words=lambda n: ffi.new("uint64_t[]", n),
        copy_words=copy_words,
        new_u32=lambda n: ffi.new("uint32_t[]", n),
        new_u16=lambda n: ffi.new("uint16_t[]", n),
        new_bytes=lambda n: ffi.new("uint8_t[]", n),
        read_bytes=lambda buf, n: ffi.buffer(buf, n)[:],
        new_count=lambda: ffi.new("uint32_t *"),
        null=ffi.NULL,
    )


def _load_c() -> Backend | None:
    try:
        from fastpath import _native  # type: ignore[attr-defined]
    except ImportError:
        return None
    c = _c_backend(_native)
    # The twin hard-codes the C constants; catch a header edit that forgot it.
    for name in dir(_reference):
        if name.startswith("FP_") and getattr(c.lib, name) != getattr(_reference, name):
            raise ImportError(f"fastpath._native and fastpath._reference disagree on {name}")
    return c


C: Backend | None = _load_c()
"""The compiled backend, or None when fastpath._native was not built."""


def _select() -> Backend:
    choice = os.environ.get(ENV_VAR, "c").strip().lower()
    if choice == "python":
        return PYTHON
    if choice != "c":
        raise ImportError(f"{ENV_VAR}={choice!r}: expected 'c' or 'python'")
    if C is None:
        raise ImportError(
            "fastpath._native is not built (reinstall with `pip install -e .`, which "
            f"compiles fastpath/csrc), or set {ENV_VAR}=python for the slow pure-Python twin"
        )
    return C


DEFAULT: Backend = _select()
"""The backend public functions use unless given one explicitly."""


def backend_or_default(backend: Backend | None) -> Backend:
    """Return ``backend`` if given, else the one chosen by CONTIVD_FASTPATH."""
    return DEFAULT if backend is None else backend


_REASONS = {
    _reference.FP_ERR_INDEX: "index out of range",
    _reference.FP_ERR_ORDER: "range start is after its end",
    _reference.FP_ERR_SIZE: f"size must be 1..{_reference.FP_MAX_BITS} bits and match the subnet",
    _reference.FP_ERR_FORMAT: "malformed serialised bitset payload",
    _reference.FP_ERR_SPACE: "output buffer too small",
    _reference.FP_ERR_PREFIX: "prefix length out of range (IPv4 pools /8../32, matches /0../32)",
    _reference.FP_ERR_SUBNET: "address outside the subnet or network address has host bits",
    _reference.FP_ERR_PORT: "port must be 0..65535",
    _reference.FP_ERR_RECORD: "malformed flow record",
    _reference.FP_ERR_COMMAND: "command must be ADD, MODIFY_STRICT or DELETE_STRICT",
    _reference.FP_ERR_ARG: "argument out of range",
}


def error(status: int, what: str) -> ValueError:
    """Build the ValueError for a negative FP_* status; ``what`` names the input."""
    return ValueError(f"{what}: {_REASONS.get(status, f'status {status}')}")

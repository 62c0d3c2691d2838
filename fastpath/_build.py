"""cffi API-mode, out-of-line builder for ``fastpath._native``.

Build-time only: setup.py names ``ffibuilder`` in ``cffi_modules``, so
``pip install`` compiles csrc/*.c into the extension.  The cffi declarations
are the marked block of csrc/fastpath.h, so the header stays the single
source of truth for the C API.  Running this file directly builds the
extension in place (handy for a checkout without pip).
"""

from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = sorted(CSRC.glob("*.c"))


def _cdef() -> str:
    """Return the declarations between the cdef markers of fastpath.h."""
    header = (CSRC / "fastpath.h").read_text()
    start = header.index("/* cdef-begin */") + len("/* cdef-begin */")
    return header[start : header.index("/* cdef-end */")]


ffibuilder = FFI()
ffibuilder.cdef(_cdef())
ffibuilder.set_source(
    "fastpath._native",
    '#include "fastpath.h"',
    # Relative paths: setuptools rejects absolute source paths in wheels.
    sources=[str(p.relative_to(CSRC.parent.parent)) for p in SOURCES],
    include_dirs=[str(CSRC.relative_to(CSRC.parent.parent))],
    extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra"],
)

if __name__ == "__main__":
    ffibuilder.compile(tmpdir=str(CSRC.parent.parent), verbose=True)

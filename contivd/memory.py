"""Giving back to the kernel what a node's start-up freed.

Starting a node allocates far more than it keeps: module code being compiled and loaded, the
store image a follower decodes, TLS material, the first state snapshot. glibc's malloc keeps
freed heap pages for reuse instead of returning them, so a node's resident memory stays at its
start-up peak. On a cluster of a thousand followers that is ~1 MB per node for nothing
(docs/performance.md, "Memory per node"); one `malloc_trim(0)` once the node is ready returns it.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("contivd.memory")


def release_freed_memory() -> bool:
    """Return freed heap pages to the kernel; False where the C library has no malloc_trim (musl)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library the interpreter itself is linked with
    except (OSError, AttributeError):
        trim = None
    if trim is None:
        log.debug("malloc_trim is not available: start-up memory stays with the process")
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True

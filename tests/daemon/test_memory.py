"""contivd.memory: start-up garbage goes back to the kernel (a fresh interpreter, so that the
measure is this process's heap and not pytest's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import re
from contivd.memory import release_freed_memory

def rss_kb():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1))

garbage = [bytes(1000) for _ in range(50_000)]  # past pymalloc (512 bytes), below mmap: malloc's heap
keep = bytes(1000)  # allocated last: the heap's top stays in use, so only a trim frees the rest
del garbage
before = rss_kb()
assert release_freed_memory()
print(before - rss_kb())
"""


def test_memory_freed_at_start_up_is_returned_to_the_kernel() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True)
    assert int(done.stdout.strip()) > 20_000  # kB: most of the ~50 MB of freed blocks

"""Stopping the contivd processes tests start: SIGTERM, and SIGKILL when it is not heeded."""

from __future__ import annotations

import signal
import subprocess


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 20) -> None:
    """Stop `proc` if it still runs: SIGTERM (a clean shutdown), then SIGKILL after `timeout`."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

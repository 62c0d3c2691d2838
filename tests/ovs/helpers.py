"""Shared pieces of the real-OVS tests: running a ManagedOvs, host commands, polling."""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Callable

import trio

from contivd.ovs import ManagedOvs

POLL_S = 0.02


def sh(*argv: str) -> str:
    """Run a host command; raise with its stderr on failure."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def vsctl(ovs: ManagedOvs, *args: str) -> str:
    return sh("ovs-vsctl", f"--db={ovs.db_socket}", "--timeout=10", *args)


def pids(ovs: ManagedOvs) -> dict[str, int | None]:
    return {d.name: d.pid for d in ovs.statistics().daemons}


def exited(pid: int) -> bool:
    """True once `pid` has ended (zombies included: nothing here reaps detached daemons)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 0)[0])
    finally:
        os.close(fd)


async def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    """Poll `condition` until true; fail naming `what` after timeout_s."""
    with trio.move_on_after(timeout_s):
        while not condition():
            await trio.sleep(POLL_S)
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

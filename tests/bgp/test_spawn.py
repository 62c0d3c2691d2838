"""ExaBGP's process outlives trio's idle worker threads (PR_SET_PDEATHSIG follows the thread
that forked it: forked from a trio worker, ExaBGP got SIGTERM ~10 s into every session), and a
cancelled run stops it."""

from __future__ import annotations

import sys

import trio

from contivd.bgp.speaker import _exited, _stop, spawn_tied

TRIO_IDLE_THREAD_SECONDS = 10  # trio ends a worker thread idle this long


def test_a_spawned_child_outlives_idle_worker_threads_and_stops_on_request() -> None:
    async def main() -> None:
        popen = await spawn_tied([sys.executable, "-c", "import time; time.sleep(120)"])
        try:
            await trio.sleep(TRIO_IDLE_THREAD_SECONDS + 3)  # every worker thread used so far has ended
            assert popen.poll() is None, "the child died with an idle worker thread"
        finally:
            await _stop(popen)
        assert popen.returncode is not None

    trio.run(main)


def test_exited_waits_for_a_child_that_ends_by_itself() -> None:
    async def main() -> None:
        popen = await spawn_tied([sys.executable, "-c", "raise SystemExit(3)"])
        with trio.fail_after(60):
            await _exited(popen)
        assert popen.returncode == 3

    trio.run(main)

"""The systemd notify protocol, for real: `contivd run` with NOTIFY_SOCKET set to a datagram
socket this test owns, and WATCHDOG_USEC set."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.waiting import free_ports, receive_until

pytestmark = pytest.mark.systemd


def test_ready_after_the_api_answers_watchdog_keeps_coming_stopping_on_sigterm(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    api, raft = free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
    env.update(NOTIFY_SOCKET=path, WATCHDOG_USEC="400000")
    args = [sys.executable, "-m", "contivd", "run", "--data-dir", str(tmp_path / "d"),
            "--api-listen", f"127.0.0.1:{api}", "--raft-listen", f"127.0.0.1:{raft}", "--datapath", "none", "--api-socket", "run/api.sock"]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        before_ready = receive_until(sock, "READY=1")
        assert httpx.get(f"http://127.0.0.1:{api}/version", timeout=5).status_code == 200, "READY=1 only once the API answers"
        status = before_ready[-1]
        for part in ("STATUS=leader (term ", "leader 127.0.0.1:", "1 voters (1 up)", "0 endpoints on this node"):
            assert part in status, status
        watchdogs = [m for m in receive_until(sock, "WATCHDOG=1") + receive_until(sock, "WATCHDOG=1") if "WATCHDOG=1" in m]
        assert len(watchdogs) >= 2
        proc.send_signal(signal.SIGHUP)  # reload: must not stop the node
        receive_until(sock, "WATCHDOG=1")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        stopping = time.monotonic()
        receive_until(sock, "STOPPING=1")
        assert proc.wait(timeout=10) == 0
        print(f"shutdown took {time.monotonic() - stopping:.2f}s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()


def test_missing_open_vswitch_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    api, raft = free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
    env["PATH"] = str(tmp_path)  # no OVS tools on it
    args = [sys.executable, "-m", "contivd", "run", "--data-dir", str(tmp_path / "d"), "--ovs", "managed",
            "--api-listen", f"127.0.0.1:{api}", "--raft-listen", f"127.0.0.1:{raft}"]  # fmt: skip
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Open vSwitch is not installed" in done.stderr and "--datapath none" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr

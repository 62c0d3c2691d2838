"""Polling helpers for tests and benchmarks: loopback ports, wait-until-true and receive-until with a timeout."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TransientError(Exception):
    """A harness call failed in a way a retry may cure (no leader yet, a member still starting):
    `wait_for` polls on through it and names the last one if time runs out."""


def free_ports(count: int) -> list[int]:
    """Loopback ports the kernel just handed out (bound and released together)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except (TransientError, TimeoutError) as exc:
            last_exc = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last_exc})")


def receive_until(sock: socket.socket, wanted: str, timeout: float = 20) -> list[str]:
    """Every datagram received on `sock` until one contains `wanted` (the sd_notify messages a test reads)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            message = sock.recv(4096).decode()
        except TimeoutError:
            break
        seen.append(message)
        if wanted in message:
            return seen
    raise AssertionError(f"no {wanted!r} within {timeout}s; got {seen}")

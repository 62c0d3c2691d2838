"""systemd's notify protocol (sd_notify) without libsystemd: datagrams to $NOTIFY_SOCKET.

contivd runs as `Type=notify`: READY=1 is sent only when the node is usable (API listening,
store leader known), STATUS= lines say what an operator wants in `systemctl status`,
WATCHDOG=1 is sent from the trio event loop itself so a stuck loop gets restarted, and
STOPPING=1 announces a shutdown. Without $NOTIFY_SOCKET every call is a no-op.
"""

from __future__ import annotations

import logging
import os
import socket

import trio

log = logging.getLogger("contivd.systemd")


class Notifier:
    def __init__(self, environ: dict[str, str] | None = None):
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        self._address = "\0" + address[1:] if address.startswith("@") else address
        usec = env.get("WATCHDOG_USEC", "")
        self.watchdog_interval = int(usec) / 1e6 / 2 if usec.isdigit() and int(usec) > 0 else None
        self._socket: socket.socket | None = None
        if self._address:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        return self._socket is not None

    def notify(self, *fields: str) -> None:
        """Send `KEY=value` lines; a failure is logged, never raised (systemd may be gone)."""
        if self._socket is None:
            return
        try:
            self._socket.sendto("\n".join(fields).encode(), self._address)
        except OSError as exc:
            log.warning("sd_notify to %s failed: %s", self._address, exc)

    async def watchdog(self) -> None:
        """Ping systemd's watchdog from this loop for as long as the loop runs."""
        if self.watchdog_interval is None:
            return
        while True:
            self.notify("WATCHDOG=1")
            await trio.sleep(self.watchdog_interval)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

"""A top-of-rack router for BGP tests: Debian's FRR bgpd in a network namespace of the test's.

bgpd runs without zebra (`-Z`: routes stay in its RIB, nothing touches a kernel) and without a
vty TCP port; vtysh reaches it through the test's own socket directory. Stopped by PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

BGPD = "/usr/lib/frr/bgpd"
VTYSH = "/usr/bin/vtysh"


def frr_missing() -> str | None:
    """Why FRR cannot run here, or None."""
    if not (os.path.exists(BGPD) and os.path.exists(VTYSH)):
        return "Debian's frr is not installed (apt install frr)"
    return None


class TorRouter:
    """bgpd in namespace `ns`, configured from `config` (FRR's own syntax)."""

    def __init__(self, ns: str, directory: Path):
        self.ns, self.dir = ns, directory
        self.pid: int | None = None

    def start(self, config: str) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o777)  # bgpd's vty socket, created as root without runas (-S)
        (self.dir / "bgpd.conf").write_text(config)
        pidfile = self.dir / "bgpd.pid"
        argv = ["ip", "netns", "exec", self.ns, BGPD, "-d", "-S", "-Z", "-n", "-P", "0",
                "-f", str(self.dir / "bgpd.conf"), "-i", str(pidfile), "--vty_socket", str(self.dir),
                "--log", f"file:{self.dir / 'bgpd.log'}"]  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True, timeout=30)
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.pid = int(pidfile.read_text().strip())

    def vtysh(self, command: str) -> str:
        done = subprocess.run([VTYSH, "--vty_socket", str(self.dir), "-c", command], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def routes(self) -> dict[str, Any]:
        """`show ip bgp json`'s routes: prefix → paths."""
        routes: dict[str, Any] = json.loads(self.vtysh("show ip bgp json")).get("routes", {})
        return routes

    def peer_state(self, neighbor: str) -> str:
        peers = json.loads(self.vtysh("show bgp summary json")).get("ipv4Unicast", {}).get("peers", {})
        return str(peers.get(neighbor, {}).get("state", ""))

    def stop(self) -> None:
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.pid = None

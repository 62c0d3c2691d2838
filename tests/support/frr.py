"""A top-of-rack router for BGP tests: Debian's FRR bgpd in a network namespace of the test's.

By default bgpd runs without zebra (`-Z`: routes stay in its RIB, nothing touches a kernel);
with `zebra=True` zebra runs too and installs the best routes into the namespace's kernel,
which forwards between the nodes' links (routing-mode tests). No vty TCP port; vtysh reaches
the daemons through the test's own socket directory. Stopped by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BGPD = "/usr/lib/frr/bgpd"
ZEBRA = "/usr/lib/frr/zebra"
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
        self.zebra_pid: int | None = None
        self._own_dir: Path | None = None

    def start(self, config: str, zebra: bool = False) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o777)  # the daemons' vty sockets, created as root without runas (-S)
        (self.dir / "bgpd.conf").write_text(config)
        zserv = str(self.dir / "zserv.api")
        if zebra:  # zebra drops to Debian's frr user: its files go in a directory that user can reach
            self._own_dir = Path(tempfile.mkdtemp(prefix="cdt-frr-"))
            os.chmod(self._own_dir, 0o777)
            shutil.copy(self.dir / "bgpd.conf", self._own_dir / "bgpd.conf")
            self.dir = self._own_dir
            zserv = str(self.dir / "zserv.api")
            (self.dir / "zebra.conf").write_text("")
            argv = ["ip", "netns", "exec", self.ns, ZEBRA, "-d", "-P", "0", "-z", zserv,  # runs as Debian's frr user
                    "-f", str(self.dir / "zebra.conf"), "-i", str(self.dir / "zebra.pid"), "--vty_socket", str(self.dir),
                    "--log", f"file:{self.dir / 'zebra.log'}"]  # fmt: skip
            self.zebra_pid = self._run(argv, self.dir / "zebra.pid")
        kernel = ["-z", zserv] if zebra else ["-Z", "-n"]
        pidfile = self.dir / "bgpd.pid"
        argv = ["ip", "netns", "exec", self.ns, BGPD, "-d", "-S", *kernel, "-P", "0",
                "-f", str(self.dir / "bgpd.conf"), "-i", str(pidfile), "--vty_socket", str(self.dir),
                "--log", f"file:{self.dir / 'bgpd.log'}"]  # fmt: skip
        self.pid = self._run(argv, pidfile)

    @staticmethod
    def _run(argv: list[str], pidfile: Path) -> int:
        subprocess.run(argv, check=True, capture_output=True, timeout=30)
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return int(pidfile.read_text().strip())

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
        for pid in (self.pid, self.zebra_pid):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.pid = self.zebra_pid = None
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

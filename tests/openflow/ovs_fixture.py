"""A private Open vSwitch (userspace datapath) per test module, after shared/ovs-userspace.md.

Each module gets its own run dir and database, each test uniquely named
bridges, so tests survive a crashed earlier run; daemons are stopped by the
PIDs in their pidfiles on every path.  Skips (with the reason) only when not
root or the OVS binaries are missing.

One deviation from the recipe: ovs-vswitchd runs with
``--enable-dummy=override``.  The bridges are still ``datapath_type=netdev``
(the real dpif-netdev datapath and the real OpenFlow stack), but their
network devices are in-memory dummies.  Without it every netdev OVS in the
root network namespace fights over the one ``ovs-netdev`` tap device
("Device or resource busy"), so these tests would break, or break
engineers' OVS instances running at the same time, and bridge taps would
leak.  The channel tests need no packets to flow, so nothing is lost.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
BINARIES = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")
STOP_TIMEOUT_S = 5.0


def skip_reason() -> str | None:
    """Why real-OVS tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root to run ovs-vswitchd"
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing or not SCHEMA.exists():
        return f"Open vSwitch not installed (missing: {', '.join(missing) or SCHEMA})"
    return None


class Ovs:
    """One ovsdb-server + ovs-vswitchd pair living in ``rundir``."""

    def __init__(self, rundir: Path) -> None:
        self.rundir = rundir
        self.bridges: list[str] = []
        self.env = {**os.environ, "OVS_RUNDIR": str(rundir), "OVS_DBDIR": str(rundir), "OVS_LOGDIR": str(rundir)}

    def run(self, *cmd: str) -> str:
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=20, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def vsctl(self, *args: str) -> str:
        return self.run("ovs-vsctl", f"--db=unix:{self.rundir}/db.sock", "--timeout=15", *args).strip()

    def ofctl(self, *args: str) -> str:
        return self.run("ovs-ofctl", "-O", "OpenFlow13", *args)

    def mgmt(self, bridge: str) -> str:
        """The bridge's management socket, for ovs-ofctl."""
        return f"unix:{self.rundir}/{bridge}.mgmt"

    def start_db(self) -> None:
        db = self.rundir / "conf.db"
        self.run("ovsdb-tool", "create", str(db), str(SCHEMA))
        self.run(
            "ovsdb-server", str(db), f"--remote=punix:{self.rundir}/db.sock",
            f"--pidfile={self.rundir}/ovsdb-server.pid", "--detach",
            f"--log-file={self.rundir}/ovsdb-server.log",
        )  # fmt: skip
        self.vsctl("--no-wait", "init")

    def start_vswitchd(self) -> None:
        self.run(
            "ovs-vswitchd", "--enable-dummy=override", f"unix:{self.rundir}/db.sock",
            f"--pidfile={self.rundir}/ovs-vswitchd.pid", "--detach",
            f"--log-file={self.rundir}/ovs-vswitchd.log",
        )  # fmt: skip

    def stop(self, *daemons: str, sig: signal.Signals = signal.SIGTERM) -> None:
        """Signal ``daemons`` by their pidfiles, then wait until all are gone (SIGKILL after a grace period).

        Signalling first and waiting once matters: ovs-vswitchd takes ~2 s to exit.
        """
        pids = []
        for daemon in daemons:
            pidfile = self.rundir / f"{daemon}.pid"
            try:
                pids.append(int(pidfile.read_text().strip()))
            except (FileNotFoundError, ValueError):
                continue
            pidfile.unlink(missing_ok=True)
        for pid in pids:
            _signal(pid, sig)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if _signal(pid, 0)]
            time.sleep(0.02)
        for pid in pids:
            _signal(pid, signal.SIGKILL)

    def add_bridge(self, controller_port: int) -> str:
        """A netdev bridge, fail_mode secure, OpenFlow 1.3, pointed at 127.0.0.1:``controller_port``."""
        name = f"bof{secrets.token_hex(3)}"
        self.vsctl(
            "add-br", name, "--", "set", "bridge", name, "datapath_type=netdev", "fail_mode=secure",
            "protocols=OpenFlow13", "--", "set-controller", name, f"tcp:127.0.0.1:{controller_port}",
            "--", "set", "controller", name, "max_backoff=1000",
        )  # fmt: skip
        self.bridges.append(name)
        return name

    def delete_bridges(self) -> None:
        """Delete the bridges this test added (see the ``ovs`` fixture for why)."""
        while self.bridges:
            self.vsctl("--if-exists", "del-br", self.bridges.pop())

    def datapath_id(self, bridge: str) -> int:
        """The bridge's datapath id as ovs-vsctl reports it (polled: vswitchd fills it in)."""
        deadline = time.monotonic() + 10
        while True:
            value = self.vsctl("get", "bridge", bridge, "datapath_id").strip('"')
            if value and value != "[]":
                return int(value, 16)
            if time.monotonic() > deadline:
                raise TimeoutError(f"bridge {bridge} has no datapath_id")
            time.sleep(0.02)


def _signal(pid: int, sig: int) -> bool:
    """Send ``sig``; False if the process is gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module", name="ovs_instance")
def fixture_ovs_instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ovs]:
    """One private OVS per test module (starting and stopping one costs ~2 s); stopped by PID on every path."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    instance = Ovs(tmp_path_factory.mktemp("ovs"))
    try:
        instance.start_db()
        instance.start_vswitchd()
        yield instance
    finally:
        try:
            instance.delete_bridges()
        finally:
            instance.stop("ovs-vswitchd", "ovsdb-server")


@pytest.fixture(name="ovs")
def fixture_ovs(ovs_instance: Ovs) -> Iterator[Ovs]:
    """The module's OVS, with ovs-vswitchd running and the bridges a test added deleted after it.

    Deleting them matters: a bridge left pointing at a closed ephemeral port
    would connect to a later test's controller that happens to get that port.
    """
    if not (ovs_instance.rundir / "ovs-vswitchd.pid").exists():
        ovs_instance.start_vswitchd()
    try:
        yield ovs_instance
    finally:
        ovs_instance.delete_bridges()

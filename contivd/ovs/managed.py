"""contivd's own Open vSwitch: ovsdb-server and ovs-vswitchd started and supervised per node.

Used when the machine runs no system OVS (no `/run/openvswitch/db.sock`). Everything lives in
`<data_dir>/ovs` — database, sockets, pidfiles, logs, bridge management sockets — and the
daemons get `OVS_RUNDIR`/`OVS_DBDIR`/`OVS_LOGDIR` pointing there, so several contivd on one
machine (one per node network namespace) never share a file. With `netns` the daemons run under
`ip netns exec <netns>`, which execs in place, so the pidfile PID is the daemon's.

Daemons are started with OVS's own `--detach`: it returns only once the daemon is serving
(ovsdb-server has bound its socket, ovs-vswitchd has read its first configuration), and the
daemons are not children of contivd, so a crashed contivd leaves the datapath forwarding. A
later `run()` adopts daemons that are still alive (found by pidfile, checked against their
command line) instead of starting new ones. The database is kept across restarts, so bridges,
ports and their external_ids survive.

Not responsible for: what is in the database (see `bridge.py`), the system OVS (never touched).
"""

from __future__ import annotations

import logging
import os
import select
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from .errors import OvsError

log = logging.getLogger(__name__)

SYSTEM_DB_SOCKET = Path("/run/openvswitch/db.sock")
# The run directory distributions build ovs-vswitchd with: it connects only to controller sockets
# under it, comparing the path as text (so /var/run, not its /run target).
SYSTEM_RUN_DIR = Path("/var/run/openvswitch")
VSWITCH_SCHEMA = Path(os.environ.get("OVS_PKGDATADIR", "/usr/share/openvswitch")) / "vswitch.ovsschema"
KERNEL_MODULE = Path("/sys/module/openvswitch")

READY_POLL_S = 0.05
STOP_GRACE_S = 5.0
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 5.0
# A daemon that stayed up this long is considered healthy again: its next crash restarts fast.
STABLE_AFTER_S = 30.0


def system_db_socket() -> str | None:
    """`unix:` target of the system OVS database if one runs on this machine, else None."""
    return f"unix:{SYSTEM_DB_SOCKET}" if SYSTEM_DB_SOCKET.is_socket() else None


def kernel_datapath_available() -> bool:
    """Whether the openvswitch kernel module is loaded; without it bridges need `netdev`."""
    return KERNEL_MODULE.is_dir()


@dataclass(frozen=True)
class DaemonStatistics:
    name: str
    pid: int | None
    restarts: int
    uptime_s: float


OVS_TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl")


@dataclass(frozen=True)
class ManagedOvsStatistics:
    run_dir: str
    db_socket: str
    netns: str | None
    datapath_type: str
    daemons: tuple[DaemonStatistics, ...]


class _Daemon:
    """One OVS daemon identified by its pidfile; knows how to start, watch and stop it."""

    def __init__(self, name: str, run_dir: Path, args: Sequence[str]) -> None:
        self.name = name
        self.pidfile = run_dir / f"{name}.pid"
        self.ctl = run_dir / f"{name}.ctl"
        self.log_file = run_dir / f"{name}.log"
        self.argv = [
            name,
            *args,
            f"--pidfile={self.pidfile}",
            f"--unixctl={self.ctl}",
            f"--log-file={self.log_file}",
            "--detach",
            "--no-chdir",
        ]
        self.run_dir = run_dir
        self.pid: int | None = None
        self.started_at = 0.0
        self.restarts = 0

    def adopt(self) -> bool:
        """Take over a live daemon of this run dir left by an earlier contivd (True if found)."""
        try:
            pid = int(self.pidfile.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return False
        if not cmdline or Path(os.fsdecode(cmdline[0])).name != self.name:
            return False
        if f"--pidfile={self.pidfile}".encode() not in cmdline or not _alive(pid):
            return False
        self.pid, self.started_at = pid, time.monotonic()
        return True

    async def wait_exited(self) -> None:
        """Return when the daemon's process has ended."""
        assert self.pid is not None
        await _wait_pid(self.pid)

    async def stop(self) -> None:
        """SIGTERM by PID, SIGKILL after STOP_GRACE_S; leaves pid None.

        A start interrupted by cancellation may have left a detached daemon whose PID we never
        recorded; its pidfile still names it, so look there before giving up."""
        if self.pid is None:
            self.adopt()
        pid, self.pid = self.pid, None
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        with trio.move_on_after(STOP_GRACE_S) as scope:
            await _wait_pid(pid)
        if scope.cancelled_caught:
            log.warning("%s (pid %d) ignored SIGTERM; killing it", self.name, pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _alive(pid: int) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    try:
        # A pidfd polls readable once the process has exited (also while it is a zombie).
        return not select.select([fd], [], [], 0)[0]
    finally:
        os.close(fd)


async def _wait_pid(pid: int) -> None:
    """Return when `pid` has exited; a pidfd works for processes that are not our children."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


class ManagedOvs:
    """Owns the lifetime of one node's private ovsdb-server + ovs-vswitchd.

    `run()` creates the database if missing, starts (or adopts) both daemons, waits until
    vswitchd answers, reports started, then restarts whichever daemon dies, with exponential
    backoff. On cancellation both are stopped by PID (vswitchd first) unless `leave_running`,
    which lets a restarting contivd keep traffic flowing and adopt them again.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        netns: str | None = None,
        ready_timeout_s: float = 15.0,
        leave_running: bool = False,
    ) -> None:
        self.run_dir = Path(data_dir).absolute() / "ovs"
        self.netns = netns
        self.ready_timeout_s = ready_timeout_s
        self.leave_running = leave_running
        self.db_path = self.run_dir / "conf.db"
        self.socket_path = self.run_dir / "db.sock"
        self.datapath_type = "system" if kernel_datapath_available() else "netdev"
        self._ovsdb = _Daemon("ovsdb-server", self.run_dir, [str(self.db_path), f"--remote=punix:{self.socket_path}"])
        self._vswitchd = _Daemon("ovs-vswitchd", self.run_dir, [self.db_socket])

    @property
    def db_socket(self) -> str:
        """OVSDB target for ovsdbapp / ovs-vsctl --db."""
        return f"unix:{self.socket_path}"

    def env(self) -> dict[str, str]:
        """Environment that points OVS tools (ovs-appctl, ovs-ofctl) at this instance's run dir."""
        rundir = str(self.run_dir)
        return {**os.environ, "OVS_RUNDIR": rundir, "OVS_DBDIR": rundir, "OVS_LOGDIR": rundir}

    @property
    def vswitchd_control(self) -> str:
        """ovs-vswitchd's unixctl socket: the `ovs-appctl -t` target (ofproto/trace, ...)."""
        return str(self._vswitchd.ctl)

    def management_socket(self, bridge: str) -> str:
        """OpenFlow management target of `bridge` for ovs-ofctl (`unix:<run_dir>/<bridge>.mgmt`)."""
        return f"unix:{self.run_dir / bridge}.mgmt"

    def statistics(self) -> ManagedOvsStatistics:
        """Pids, restart counts and uptimes (since started or adopted by this supervisor)."""
        now = time.monotonic()
        return ManagedOvsStatistics(
            run_dir=str(self.run_dir),
            db_socket=self.db_socket,
            netns=self.netns,
            datapath_type=self.datapath_type,
            daemons=tuple(DaemonStatistics(d.name, d.pid, d.restarts, now - d.started_at if d.pid else 0.0) for d in (self._ovsdb, self._vswitchd)),
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        missing = [tool for tool in OVS_TOOLS if shutil.which(tool) is None]
        if missing:
            raise OvsError(
                f"Open vSwitch is not installed ({', '.join(missing)} not found): install openvswitch-switch, or run without a datapath (--datapath none)"
            )
        try:
            await self._prepare_db()
            await self._ensure_running(self._ovsdb)
            await self._ovs_command(["ovs-vsctl", f"--db={self.db_socket}", "--no-wait", "init"])
            await self._ensure_running(self._vswitchd)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._supervise, self._ovsdb)
                nursery.start_soon(self._supervise, self._vswitchd)
                task_status.started()
        finally:
            if not self.leave_running:
                with trio.CancelScope(shield=True):
                    await self._vswitchd.stop()
                    await self._ovsdb.stop()

    async def _prepare_db(self) -> None:
        """Create the database on first start; convert it after an OVS upgrade; never recreate it."""
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        if not self.db_path.exists():
            await self._ovs_command(["ovsdb-tool", "create", str(self.db_path), str(VSWITCH_SCHEMA)])
            log.info("created OVS database %s", self.db_path)
            return
        needs = await self._ovs_command(["ovsdb-tool", "needs-conversion", str(self.db_path), str(VSWITCH_SCHEMA)])
        if needs.strip() == "yes":
            await self._ovs_command(["ovsdb-tool", "convert", str(self.db_path), str(VSWITCH_SCHEMA)])
            log.info("converted OVS database %s to the installed schema", self.db_path)

    async def _ensure_running(self, daemon: _Daemon) -> None:
        if daemon.adopt():
            log.info("adopted running %s (pid %d) in %s", daemon.name, daemon.pid, self.run_dir)
        else:
            await self._start(daemon)
        await self._wait_answers(daemon)

    async def _start(self, daemon: _Daemon) -> None:
        argv = ["ip", "netns", "exec", self.netns, *daemon.argv] if self.netns else daemon.argv
        await self._ovs_command(argv)
        try:
            daemon.pid = int(daemon.pidfile.read_text().strip())
        except (OSError, ValueError) as exc:
            raise OvsError(f"{daemon.name} in {self.run_dir} started but left no pidfile: {exc}") from None
        daemon.started_at = time.monotonic()
        log.info("started %s (pid %d) in %s%s", daemon.name, daemon.pid, self.run_dir, f" (netns {self.netns})" if self.netns else "")

    async def _wait_answers(self, daemon: _Daemon) -> None:
        """Poll the daemon's control socket until it answers, up to ready_timeout_s."""
        argv = ["ovs-appctl", "-T", "1", "-t", str(daemon.ctl), "version"]
        last = ""
        with trio.move_on_after(self.ready_timeout_s):
            while True:
                result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
                if result.returncode == 0:
                    return
                last = result.stderr.decode(errors="replace").strip()
                await trio.sleep(READY_POLL_S)
        raise OvsError(f"{daemon.name} in {self.run_dir} did not answer within {self.ready_timeout_s} s: {last}")

    async def _supervise(self, daemon: _Daemon) -> None:
        """Restart `daemon` whenever it exits, backing off while it keeps crashing."""
        backoff = BACKOFF_MIN_S
        while True:
            await daemon.wait_exited()
            uptime = time.monotonic() - daemon.started_at
            log.warning("%s (pid %s) in %s exited after %.1f s; restarting", daemon.name, daemon.pid, self.run_dir, uptime)
            daemon.pid = None
            if uptime >= STABLE_AFTER_S:
                backoff = BACKOFF_MIN_S
            while True:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                try:
                    await self._start(daemon)
                    await self._wait_answers(daemon)
                    break
                except OvsError as exc:
                    log.error("restarting %s failed, retrying in %.1f s: %s", daemon.name, backoff, exc)
                    await daemon.stop()  # one that started but never answered would block the retry
            daemon.restarts += 1

    async def _ovs_command(self, argv: list[str]) -> str:
        """Run an OVS tool with this instance's environment; OvsError with its stderr on failure."""
        with trio.move_on_after(self.ready_timeout_s) as scope:
            result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, env=self.env())
        if scope.cancelled_caught:
            raise OvsError(f"{' '.join(argv)} (run dir {self.run_dir}) timed out after {self.ready_timeout_s} s")
        if result.returncode != 0:
            stderr = result.stderr.decode(errors="replace").strip()
            raise OvsError(f"{' '.join(argv)} (run dir {self.run_dir}) failed with exit code {result.returncode}: {stderr}")
        return result.stdout.decode(errors="replace")

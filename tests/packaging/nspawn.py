"""A Debian bookworm system booted by a real systemd in a container, for the .deb's tests.

The root file system (debootstrap minbase with systemd, systemd-sysv and dbus, its apt lists,
and the .debs the package depends on) is made once and cached; each container runs on an
overlay of it, so a test changes nothing there. The container boots with
`systemd-nspawn -b --private-network` (no network: what the package needs is fetched into
the overlay beforehand) and commands run in it through `nsenter` into its PID 1's namespaces:
the host's PID 1 is no systemd, so there is no machined to ask. Everything is undone by PID
and by path, even when a step fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE = Path(os.environ.get("CONTIVD_NSPAWN_CACHE", "/var/cache/contivd-tests/bookworm-systemd"))
SUITE = "bookworm"
CAPABILITIES = "CAP_NET_ADMIN,CAP_SYS_ADMIN,CAP_NET_RAW"
BOOT_SECONDS = 180.0


class CannotBoot(Exception):
    """This machine cannot run the container (no nspawn, no overlayfs, systemd never came up)."""


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt uses here: the first `deb` URI of the main archive (deb822 or
    one-line sources), so the container is built from what this machine already reaches."""
    texts = [p.read_text() for p in sorted(sources.glob("sources.list.d/*.sources"))]
    for text in texts:
        for stanza in text.split("\n\n"):
            uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
            if uris and suites and SUITE in suites.group(1).split():
                return uris.group(1)
    lists = [sources / "sources.list", *sorted(sources.glob("sources.list.d/*.list"))]
    for path in lists:
        for line in path.read_text().splitlines() if path.exists() else []:
            found = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+" + SUITE + r"\s", line + " ")
            if found:
                return found.group(1)
    return "http://deb.debian.org/debian"


def _run(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=check)


def ensure_rootfs(cache: Path = CACHE) -> Path:
    """The cached bookworm root with systemd (made here, ~3 minutes, the first time)."""
    if (cache / "usr" / "lib" / "systemd" / "systemd").exists():
        return cache
    building = Path(f"{cache}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    try:
        _run("debootstrap", "--variant=minbase", "--include=systemd,systemd-sysv,dbus", SUITE, str(building), debian_mirror(), timeout=1200)
        shutil.copy("/etc/resolv.conf", building / "etc" / "resolv.conf")
        _run("chroot", str(building), "apt-get", "update", "-qq", timeout=600)
        building.rename(cache)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return cache


def in_chroot(root: Path, command: str, timeout: float = 900) -> None:
    """Run a shell command in a chroot of `root`, with the host's network (before the boot)."""
    _run("chroot", str(root), "/bin/sh", "-c", command, timeout=timeout)


class Container:
    """One booted container; `sh` runs a shell command inside it."""

    def __init__(self, root: Path, nspawn: subprocess.Popen[bytes], console: Path):
        self.root, self.nspawn, self.console = root, nspawn, console
        self.leader = 0  # the container's PID 1, as the host sees it

    def sh(self, command: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = _run("nsenter", "-t", str(self.leader), "-a", "/bin/sh", "-c", command, timeout=timeout, check=False)
        if check and done.returncode:
            raise AssertionError(f"in the container, {command!r} exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done

    def wait(self, command: str, expected: str, timeout: float, what: str) -> str:
        """Poll `command` until its stripped output equals `expected`."""
        deadline, out = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            out = self.sh(command, check=False).stdout.strip()
            if out == expected:
                return out
            time.sleep(1)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}: {command!r} said {out!r}")

    def _find_leader(self) -> None:
        deadline = time.monotonic() + BOOT_SECONDS
        while time.monotonic() < deadline and self.nspawn.poll() is None:
            children = Path(f"/proc/{self.nspawn.pid}/task/{self.nspawn.pid}/children")
            pids = children.read_text().split() if children.exists() else []
            if pids:
                self.leader = int(pids[0])
                return
            time.sleep(0.2)
        raise CannotBoot(f"systemd-nspawn did not start the container: {self.console_tail()}")

    def wait_booted(self) -> None:
        self._find_leader()
        deadline, state = time.monotonic() + BOOT_SECONDS, ""
        while time.monotonic() < deadline and self.nspawn.poll() is None:
            state = self.sh("systemctl is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                return
            time.sleep(1)
        raise CannotBoot(f"systemd in the container did not finish booting (state {state!r}): {self.console_tail()}")

    def console_tail(self) -> str:
        return self.console.read_text(errors="replace")[-1500:] if self.console.exists() else ""


def _stop(nspawn: subprocess.Popen[bytes]) -> None:
    """SIGTERM asks nspawn to power the container off; SIGKILL if it does not within 60 s."""
    if nspawn.poll() is None:
        nspawn.send_signal(signal.SIGTERM)
        try:
            nspawn.wait(timeout=60)
        except subprocess.TimeoutExpired:
            nspawn.kill()
            nspawn.wait()


@contextmanager
def booted(base: Path, prepare: Callable[[Path], None] | None = None) -> Iterator[Container]:
    """Boot `base` (read-only, under an overlay) after `prepare(root)` has changed the overlay
    from the host (copied files in, fetched what an install will need with `in_chroot`)."""
    for tool in ("systemd-nspawn", "nsenter", "debootstrap"):
        if shutil.which(tool) is None:
            raise CannotBoot(f"{tool} is not installed (packaging/deps.sh installs debootstrap and systemd-container)")
    work = Path(tempfile.mkdtemp(prefix="cdt-nspawn-"))
    merged = work / "root"
    for part in ("upper", "work", "root"):
        (work / part).mkdir()
    overlay = f"lowerdir={base},upperdir={work / 'upper'},workdir={work / 'work'}"
    mounted = _run("mount", "-t", "overlay", "overlay", "-o", overlay, str(merged), check=False)
    nspawn: subprocess.Popen[bytes] | None = None
    try:
        if mounted.returncode:
            raise CannotBoot(f"cannot mount an overlay of {base}: {mounted.stderr.strip()}")
        if prepare is not None:
            prepare(merged)
        console = work / "console.log"
        with open(console, "wb") as log:
            # --keep-unit --register=no: no systemd and no machined on the host to allocate a scope.
            args = ["systemd-nspawn", "-q", "-b", "--keep-unit", "--register=no", "--private-network", f"--capability={CAPABILITIES}",
                    "-D", str(merged), "-M", f"cdt{os.getpid()}"]  # fmt: skip
            nspawn = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        container = Container(merged, nspawn, console)
        container.wait_booted()
        yield container
    finally:
        if nspawn is not None:
            _stop(nspawn)
        if mounted.returncode == 0 and _run("umount", str(merged), check=False).returncode:
            _run("umount", "-l", str(merged), check=False)  # still busy: detach, so rmtree below cannot reach the lower layer
        shutil.rmtree(work, ignore_errors=True)

"""The original Contiv netmaster on loopback, as a Docker host ran it, for side-by-side runs.

The binary comes from tests/support/netctl_build.py (`python3 -m tests.support.netctl_build
netmaster OUT`): its ofnet RPC listens on 127.0.0.1:OFNET_MASTER_PORT, not on every interface at
9001. It keeps its state in its own etcd 3.4 (v2 API, tests/support/etcd.py) and runs as
`--mode docker --netmode vlan --fwdmode bridge`, in which each network it creates is also
created in Docker through /var/run/docker.sock. No Docker runs here: netmaster and
tests/support/fake_docker.py share a private mount namespace with its own tmpfs on /run
(`unshare --mount`), where the fake's socket is /run/docker.sock; the machine's /run is not
touched. Every process is killed by PID on close, whatever happened.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.etcd import Etcd
from tests.support.netctl_build import OFNET_MASTER_PORT
from tests.support.waiting import free_ports, wait_for

FAKE_DOCKER = Path(__file__).with_name("fake_docker.py")
# In the new mount namespace: /run on a tmpfs of its own, the fake Docker started there (its PID
# written to $1), then netmaster ("$@") in place of the shell, so that Popen's PID is netmaster's.
IN_NAMESPACE = 'mount -t tmpfs tmpfs /run && { "$2" "$3" /run/docker.sock & echo $! > "$1"; } && shift 3 && exec "$@"'


class OriginalNetmaster:
    """netmaster `binary` + its etcd + the fake Docker, data and logs under `root`; `url` its REST API."""

    def __init__(self, binary: Path, root: Path):
        _require_free(OFNET_MASTER_PORT)
        root.mkdir(parents=True, exist_ok=True)
        self.etcd = Etcd(root)
        self.docker_pid_file = root / "fake-docker.pid"
        self.proc: subprocess.Popen[bytes] | None = None
        api, control = free_ports(2)
        self.url = f"http://127.0.0.1:{api}"
        args = [
            "unshare", "--mount", "--propagation", "private", "sh", "-c", IN_NAMESPACE, "sh", str(self.docker_pid_file), sys.executable, str(FAKE_DOCKER),
            str(binary), "--etcd", self.etcd.url, "--listen-url", f"127.0.0.1:{api}", "--control-url", f"127.0.0.1:{control}",
            "--mode", "docker", "--netmode", "vlan", "--fwdmode", "bridge",
        ]  # fmt: skip
        self.log = open(root / "netmaster.log", "ab")
        try:
            self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
            wait_for(self._docker_listens, 30, "the fake Docker's socket in netmaster's namespace")
            wait_for(self._up, 60, "the original netmaster to answer")
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        """The server's processes (etcd, netmaster): whose CPU a call costs. The fake Docker is
        left out: createEndpoint never calls it."""
        assert self.proc is not None
        return [self.etcd.proc.pid, self.proc.pid]

    def _docker_listens(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"netmaster exited with {self.proc.returncode}: {self.log_text()}")
        return self._fake_docker_pid() is not None and Path(f"/proc/{self.proc.pid}/root/run/docker.sock").exists()

    def _fake_docker_pid(self) -> int | None:
        text = self.docker_pid_file.read_text().strip() if self.docker_pid_file.exists() else ""
        return int(text) if text else None

    def _up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"netmaster exited with {self.proc.returncode}: {self.log_text()}")
        try:
            return httpx.get(self.url + "/version", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def log_text(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def close(self) -> None:
        """Kill netmaster, the fake Docker and etcd (each by its PID); the namespace goes with them."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        docker = self._fake_docker_pid()
        if docker is not None:
            try:
                os.kill(docker, signal.SIGKILL)  # not our child: netmaster took the shell's place
            except ProcessLookupError:
                pass
        self.etcd.close()
        self.log.close()


def _require_free(port: int) -> None:
    """Refuse to start when another netmaster built here (or anything) holds ofnet's RPC port."""
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listener: TIME_WAIT left by a previous run is no obstacle
    try:
        probe.bind(("127.0.0.1", port))
    except OSError:
        raise RuntimeError(
            f"127.0.0.1:{port} (ofnet's RPC port in the netmaster built here) is taken: is another original netmaster running?"
        ) from None
    finally:
        probe.close()

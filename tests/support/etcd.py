"""One etcd member (Debian's etcd-server 3.4) on loopback: what the original Contiv netmaster keeps
its state in, for the migration tests and the side-by-side benchmark."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.support.waiting import free_ports, wait_for

ETCD = "/usr/bin/etcd"


class Etcd:
    """One etcd member on loopback ports, data in `root` (the caller's temporary directory), killed by PID."""

    def __init__(self, root: Path, enable_v2: bool = True):
        client, peer = free_ports(2)
        self.url = f"http://127.0.0.1:{client}"
        args = [
            ETCD, "--name", "contiv", "--data-dir", str(root / "etcd-data"), "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"contiv=http://127.0.0.1:{peer}",
        ]  # fmt: skip
        if enable_v2:
            args.append("--enable-v2")
        self.log = open(root / "etcd.log", "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for(self._up, 30, "etcd to answer")
        except BaseException:
            self.close()
            raise

    def _up(self) -> bool:
        try:
            return httpx.get(self.url + "/version", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def load(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            assert httpx.put(f"{self.url}/v2/keys{key}", data={"value": value}, timeout=10).status_code in (200, 201)

    def dump(self) -> Any:
        return httpx.get(f"{self.url}/v2/keys/contiv.io", params={"recursive": "true", "sorted": "true"}, timeout=10).json()["node"]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.log.close()

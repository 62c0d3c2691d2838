"""Test and benchmark harness: store members as real OS processes (`python -m raftstore serve`) driven over JSON lines."""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.waiting import TransientError, free_ports, wait_for

SECRET = "test-cluster-secret"


class RemoteError(TransientError):
    """A member answered `ok: false`; `wait_for` retries through it (an election in progress)."""

    def __init__(self, error: str, message: str):
        super().__init__(f"{error}: {message}")
        self.error = error


class StoreProcess:
    """One member. `call()` is thread-safe; watch events arrive on `watch()` queues."""

    def __init__(
        self,
        listen: str | None,
        peers: list[str],
        data_dir: Path,
        secret: str | None = SECRET,
        extra: tuple[str, ...] = (),
        log_dir: Path | None = None,
        follow: str | None = None,
    ):
        self.follow = follow  # a follower of the store's name (not a Raft member)
        self.listen, self.peers, self.data_dir, self.secret, self.extra = listen, peers, data_dir, secret, extra
        self.log_dir = log_dir or data_dir  # elsewhere when the data dir's filesystem is filled on purpose
        self.proc: subprocess.Popen[bytes] | None = None
        self._ids = itertools.count(1)
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def start(self, wait_ready: bool = True) -> StoreProcess:
        args = [sys.executable, "-m", "raftstore", "serve", "--data-dir", str(self.data_dir), "--request-timeout", "5"]
        if self.follow is not None:
            args += ["--follow", "--name", self.follow]
        else:
            args += ["--readonly"] if self.listen is None else ["--listen", self.listen]
        if self.peers:
            args += ["--peers", ",".join(self.peers)]
        args += list(self.extra)
        env = dict(os.environ)
        env.pop("CONTIVD_CLUSTER_SECRET", None)
        if self.secret:
            env["CONTIVD_CLUSTER_SECRET"] = self.secret
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr = open(self.log_dir / "stderr.log", "ab")
        self._ready: queue.Queue[dict[str, Any]] = queue.Queue()
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        if wait_ready:
            try:
                self._ready.get(timeout=20)
            except queue.Empty:
                raise AssertionError(f"store process did not start: {self.stderr_text()}") from None
        return self

    def stderr_text(self) -> str:
        return (self.log_dir / "stderr.log").read_text(errors="replace")[-3000:]

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            message = json.loads(line)
            if message.get("ready"):
                self._ready.put(message)
                continue
            with self._lock:
                q = self._replies.get(message.get("id"))
            if q is not None:
                q.put(message)

    def _send(self, request: dict[str, Any]) -> queue.Queue[dict[str, Any]]:
        assert self.proc is not None and self.proc.stdin is not None
        request_id = next(self._ids)
        q: queue.Queue[dict[str, Any]] = queue.Queue()
        with self._lock:
            self._replies[request_id] = q
            self.proc.stdin.write(json.dumps({"id": request_id, **request}).encode() + b"\n")
            self.proc.stdin.flush()
        return q

    def call(self, op: str, timeout: float = 20, **kwargs: Any) -> Any:
        try:
            reply = self._send({"op": op, **kwargs}).get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{op} got no answer within {timeout}s from {self.listen}") from None
        if not reply["ok"]:
            raise RemoteError(reply["error"], reply["message"])
        return reply["result"]

    def watch(self, prefix: str, start_revision: int | None = None) -> queue.Queue[dict[str, Any]]:
        q = self._send({"op": "watch", "prefix": prefix, "start_revision": start_revision})
        ack = q.get(timeout=10)
        assert ack["ok"], ack
        return q

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.call("status", timeout=10)
        return status

    def is_leader(self) -> bool:
        return bool(self.status()["role"] == "leader")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> int:
        """SIGTERM and wait: the clean shutdown path."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("store process ignored SIGTERM for 15 s") from None
        return self.proc.returncode


class Cluster:
    """N voters (and optional read-only members) on loopback, each a separate process."""

    def __init__(self, root: Path, voters: int, secret: str | None = SECRET):
        ports = free_ports(voters)
        self.addresses = [f"127.0.0.1:{p}" for p in ports]
        self.members = [StoreProcess(a, [b for b in self.addresses if b != a], root / f"node{i}", secret) for i, a in enumerate(self.addresses)]
        self.extra: list[StoreProcess] = []
        self.root, self.secret = root, secret

    def start(self) -> Cluster:
        for m in self.members:
            m.start(wait_ready=False)
        for m in self.members:
            try:
                m._ready.get(timeout=20)
            except queue.Empty:
                raise AssertionError(f"member {m.listen} did not start: {m.stderr_text()}") from None
        self.leader()
        return self

    def add_readonly(self, name: str) -> StoreProcess:
        member = StoreProcess(None, self.addresses, self.root / name, self.secret).start()
        self.extra.append(member)
        return member

    def add_follower(self, name: str, extra: tuple[str, ...] = ()) -> StoreProcess:
        """A follower of the store (`serve --follow`): fed by a voter, not a Raft member."""
        member = StoreProcess(None, self.addresses, self.root / name, self.secret, extra, follow=name).start()
        self.extra.append(member)
        return member

    def alive(self) -> list[StoreProcess]:
        return [m for m in self.members if m.proc is not None and m.proc.poll() is None]

    def leader(self, timeout: float = 15) -> StoreProcess:
        def find() -> StoreProcess | None:
            leaders = [m for m in self.alive() if m.is_leader()]
            return leaders[0] if len(leaders) == 1 else None

        return wait_for(find, timeout, "a single leader")

    def close(self) -> None:
        for m in self.members + self.extra:
            m.kill()
            if getattr(m, "stderr", None):
                m.stderr.close()

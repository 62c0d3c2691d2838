"""How fast can a replicated write be here, in Python, without PySyncObj's replication core?

issue 15 asks raftstore (3 voters) for ≥ 1.5× etcd on sequential puts and ≥ 2× on 10-key
transactions. raftstore's message path is its own (`_wire`, `_crypto`, `_transport`), but
appending, replicating, committing and applying go through PySyncObj's SyncObj and its tick.
This benchmark separates the two: a *floor* write path that does every step a replicated,
durable, authenticated write needs, with raftstore's own parts where it has them, and
nothing else:

- leader (this process, driven from trio like contivd's netmaster): the command encoded by
  `raftstore._commands`, one AppendEntries per follower framed and sealed by
  `raftstore._wire.Channel` with `AeadSealer` (AES-GCM, as raftstore's transport), its own
  journal record written and fdatasynced, then the first follower's answer awaited on the
  sockets, the entry applied to a `raftstore._fsm.StateMachine` and the result returned;
- two followers (separate processes): read and authenticate the frame, write the record,
  fdatasync, answer, then apply the entries the leader's commit index covers, to their own
  StateMachine, as raftstore's followers do.

No elections, no catch-up, no membership: it measures the steady state only, which is what
store_bench measures. Run side by side in one run with raftstore (store_bench's code) and
etcd, on the same loopback and disk, it says how much of the gap to the targets is Python
and this machine, and how much is the replication core.

    python3 benchmarks/write_floor.py [--quick]

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: benchmarks, tests.support

import trio  # noqa: E402

from benchmarks import store_bench  # noqa: E402
from raftstore import Put  # noqa: E402
from raftstore._commands import encode, txn_command  # noqa: E402
from raftstore._crypto import AeadSealer  # noqa: E402
from raftstore._fsm import StateMachine  # noqa: E402
from raftstore._wire import Channel  # noqa: E402
from tests.support.raft_processes import SECRET  # noqa: E402
from tests.support.waiting import free_ports  # noqa: E402

JOURNAL_BYTES = 256 * 1024 * 1024  # preallocated, as raftstore's journal is
RECV_BYTES = 256 * 1024


class Journal:
    """Append-only records in a preallocated file, each made durable by fdatasync."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.posix_fallocate(self.fd, 0, JOURNAL_BYTES)
        os.fsync(self.fd)
        self.end = 0

    def append(self, record: bytes) -> None:
        os.pwrite(self.fd, len(record).to_bytes(4, "big") + record, self.end)
        self.end += 4 + len(record)

    def sync(self) -> None:
        os.fdatasync(self.fd)


def handshake(sock: socket.socket, channel: Channel) -> None:
    """Exchange hellos on a blocking socket (the peer's hello is a frame of its own)."""
    sock.sendall(channel.hello())
    while channel.negotiated is None:
        data = sock.recv(RECV_BYTES)
        if not data:
            raise ConnectionError("peer closed during the hello")
        channel.feed(data)


# ---- follower (a process of its own) -------------------------------------------------------


def follower(port: int, data_dir: Path) -> None:
    journal = Journal(data_dir / "journal")
    fsm = StateMachine(history_limit=10_000)
    entries: dict[int, str] = {}
    applied = 0
    server = socket.create_server(("127.0.0.1", port))
    print("ready", flush=True)
    sock, _ = server.accept()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    channel = Channel(AeadSealer(SECRET))
    handshake(sock, channel)
    while True:
        data = sock.recv(RECV_BYTES)
        if not data:
            return
        for message in channel.feed(data):
            for command, index, _term in message["entries"]:
                journal.append(command)
                entries[index] = command.decode()
            journal.sync()  # durable before the answer, as raftstore's followers
            last = message["entries"][-1][1]
            sock.sendall(channel.frame({"type": "next_node_idx", "next_node_idx": last + 1, "success": True}))
            while applied < message["commit_index"]:
                applied += 1
                fsm.apply(entries.pop(applied))


# ---- leader (this process, in trio) --------------------------------------------------------


class FloorLeader:
    """Sends each write to both followers, syncs its own copy, commits on the first answer."""

    def __init__(self, socks: list[socket.socket], channels: list[Channel], journal: Journal):
        self.socks, self.channels, self.journal = socks, channels, journal
        self.fsm = StateMachine(history_limit=10_000)
        self.index = 0
        self.acked = [0 for _ in socks]
        self.sockets_ready = select.epoll()  # readable while any follower's socket is
        for sock in socks:
            self.sockets_ready.register(sock.fileno(), select.EPOLLIN)

    async def propose(self, command: dict[str, Any]) -> Any:
        text = encode(command)
        self.index += 1
        record = text.encode()
        message = {"type": "append_entries", "term": 1, "commit_index": self.index - 1, "entries": [(record, self.index, 1)]}
        for sock, channel in zip(self.socks, self.channels, strict=True):
            sock.sendall(channel.frame(message))
        self.journal.append(record)
        self.journal.sync()  # inline: the loop would only wait for the answers meanwhile
        while max(self.acked) < self.index:
            await self._read_answers()
        return self.fsm.apply(text)

    async def _read_answers(self) -> None:
        """Read whatever answers have arrived; if none, wait until a socket has some."""
        arrived = False
        for i, sock in enumerate(self.socks):
            try:
                data = sock.recv(RECV_BYTES, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError("a follower closed its connection")
            arrived = True
            for answer in self.channels[i].feed(data):
                self.acked[i] = max(self.acked[i], answer["next_node_idx"] - 1)
        if not arrived:
            await trio.lowlevel.wait_readable(self.sockets_ready.fileno())


async def bench_floor_async(root: Path, n: int) -> store_bench.Results:
    ports = free_ports(2)
    followers = []
    socks: list[socket.socket] = []
    try:
        for i, port in enumerate(ports):
            (root / f"floor-{i}").mkdir()
            process = subprocess.Popen([sys.executable, __file__, "--follower", str(port), str(root / f"floor-{i}")], stdout=subprocess.PIPE)
            followers.append(process)
            assert process.stdout is not None and process.stdout.readline().strip() == b"ready"
        channels = [Channel(AeadSealer(SECRET)) for _ in ports]
        for port, channel in zip(ports, channels, strict=True):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handshake(sock, channel)
            socks.append(sock)
        (root / "floor-leader").mkdir()
        leader = FloorLeader(socks, channels, Journal(root / "floor-leader" / "journal"))

        def put(key: str) -> Any:
            return leader.propose(txn_command((), [Put(key, store_bench.VALUE)], ()))

        def txn(i: int) -> Any:
            return leader.propose(txn_command((), [Put(f"/bench/floor/txn/{i}/{k}", store_bench.VALUE) for k in range(store_bench.TXN_KEYS)], ()))

        return {
            "seq": await store_bench.measure_async(lambda i: put(f"/bench/floor/seq/{i}"), n, 1),
            "txn": await store_bench.measure_async(txn, max(n // 4, 50), 1),
        }
    finally:
        for sock in socks:
            sock.close()
        for process in followers:  # they exit when their connection closes; one that never got it is killed
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer operations: finishes in under a minute")
    parser.add_argument("--follower", nargs=2, metavar=("PORT", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.follower:
        follower(int(args.follower[0]), Path(args.follower[1]))
        return
    if shutil.which("etcd") is None:
        sys.exit("etcd is not installed: apt-get install etcd-server (packaging/deps.sh does)")
    n = 400 if args.quick else 3000
    root = Path(tempfile.mkdtemp(prefix="write-floor-"))
    figures: dict[str, float | bool] = {}
    try:
        runs = (
            ("floor", lambda: trio.run(bench_floor_async, root, n)),
            ("raftstore", lambda: store_bench.bench_raftstore(root, 3, n)),
            ("etcd", lambda: store_bench.bench_etcd(root, 3, n)),
        )
        for system, run in runs:
            result = run()
            for kind, label in (("seq", "put"), ("txn", "txn")):
                r = result[kind]
                print(f"{system:9} voters=3 {label:4} {r['per_s']:9.1f}/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms")
                for stat in ("per_s", "p50_ms", "p99_ms"):
                    figures[f"{system}_{label}_{stat}"] = r[stat]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for label in ("put", "txn"):
        for ours in ("floor", "raftstore"):
            figures[f"ratio_{ours}_{label}"] = round(float(figures[f"{ours}_{label}_per_s"]) / float(figures[f"etcd_{label}_per_s"]), 2)
    figures["quick"] = args.quick
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

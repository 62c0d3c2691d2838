"""CPU cost of one Raft message through the message path, old and new, without sockets.

One replicated write on 3 voters moves four messages on the critical path: the leader's
AppendEntries to each follower and each follower's answer (next_node_idx). Each is encoded
and sealed by its sender and opened and decoded by its receiver. This measures that round
(sender + receiver CPU, microseconds, the minimum over repeats so that other processes on a
busy machine count as little as possible) for:

- `pickle`: the path before raftstore's transport — PySyncObj's pickle (protocol 2) of
  `(randkey, message)`, sealed with AES-256-GCM and an 8-byte timestamp header, as
  raftstore's encryptor did inside PySyncObj's TcpConnection (no zlib: below 16 KiB);
- `wire1`, `wire2`: `raftstore._wire.Channel` frames of format version 1 and 2.

The messages are those of a put of a 100-byte value (a ~300-byte log entry) and of a
10-key transaction (a ~1.6 KiB entry). The last line printed is one JSON object.

    python3 benchmarks/wire_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: E402
from pysyncobj import pickle as pysyncobj_pickle  # noqa: E402

from raftstore._crypto import AeadSealer  # noqa: E402
from raftstore._wire import Channel  # noqa: E402

_HEADER = struct.Struct(">Q")


def cpu_us(fn: Callable[[], object], number: int) -> float:
    """Mean CPU time of `fn` across `number` calls, in microseconds."""
    start = time.process_time_ns()
    for _ in range(number):
        fn()
    return (time.process_time_ns() - start) / number / 1000


def pickle_round(aead: AESGCM, randkey: bytes, message: dict[str, Any]) -> None:
    data = pysyncobj_pickle.dumps((randkey, message))
    header, nonce = _HEADER.pack(12345), os.urandom(12)
    frame = struct.pack("i", len(data) + 44) + header + nonce + aead.encrypt(nonce, data, header)
    token = frame[4:]
    pysyncobj_pickle.loads(aead.decrypt(token[8:20], token[20:], token[:8]))


def messages(entry_bytes: int) -> list[dict[str, Any]]:
    entry = [b"\x00" + os.urandom(entry_bytes), 1001, 3]
    append = {"type": "append_entries", "term": 3, "commit_index": 1000, "entries": [entry], "prevLogIdx": 1000, "prevLogTerm": 3}
    answer = {"type": "next_node_idx", "next_node_idx": 1002, "reset": False, "success": True}
    return [append, answer]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    number, repeat = (300, 5) if args.quick else (2000, 15)
    sealer = AeadSealer("wire-bench-secret")
    aead = AESGCM(os.urandom(32))
    rounds: dict[tuple[str, str, str], Callable[[], object]] = {}
    for workload, entry_bytes in (("put", 300), ("txn", 1600)):
        for message in messages(entry_bytes):
            key = message["type"]
            randkey = os.urandom(32)
            rounds[("pickle", key, workload)] = lambda m=message, k=randkey: pickle_round(aead, k, m)  # type: ignore[misc]
            for version in (1, 2):
                a, b = Channel(sealer, version), Channel(sealer, version)
                a.feed(b.hello())
                b.feed(a.hello())
                rounds[(f"wire{version}", key, workload)] = lambda m=message, a=a, b=b: b.feed(a.frame(m))  # type: ignore[misc]
    # Interleaved, and the minimum per case over the repeats: drift and other processes on a
    # busy machine then weigh on every codec alike and as little as possible.
    best: dict[tuple[str, str, str], float] = {}
    for _ in range(repeat):
        for case, fn in rounds.items():
            best[case] = min(best.get(case, float("inf")), cpu_us(fn, number))
    figures: dict[str, float | bool] = {f"{codec}_{kind}_{workload}_us": round(us, 2) for (codec, kind, workload), us in best.items()}
    for workload in ("put", "txn"):
        for codec in ("pickle", "wire1", "wire2"):
            # four messages per write on 3 voters: two AppendEntries, two answers
            per_write = 2 * sum(us for (c, _, w), us in best.items() if c == codec and w == workload)
            figures[f"{codec}_per_write_{workload}_us"] = round(per_write, 1)
            print(f"{workload:3} {codec:6} {per_write:7.1f} µs of message-path CPU per write (3 voters)")
    figures["quick"] = args.quick
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

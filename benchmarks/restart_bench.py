"""A planned stop of the Raft leader (SIGTERM: `systemctl restart`, a rolling upgrade) against a
crash (SIGKILL), under a stream of writes.

Each round starts three `contivd run --datapath none` voters on loopback, creates endpoints
one after another through a follower that is not stopped (a failed create is retried at once
with the next id), and after 2 s stops the leader: SIGTERM and SIGKILL rounds alternate. The
figure per round is the longest gap between two acknowledged creates around the stop: with
SIGTERM the leader first hands the leadership to the most caught-up voter (contivd/main.py),
with SIGKILL the others wait for an election timeout. Every acknowledged endpoint must still be
there afterwards (`lost`).

    python3 benchmarks/restart_bench.py [--quick]

The last line is one JSON object: term_gap_s_p50/max, kill_gap_s_p50/max, handed_over (SIGTERM
rounds whose leader logged the hand-over), acked, lost.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

from tests.support.contivd_nodes import ContivdCluster, ContivdProcess  # noqa: E402
from tests.support.partition_figures import percentile  # noqa: E402

NET = {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": "198.18.0.0/16", "gateway": "198.18.255.254"}
WRITE_BEFORE_S = 2.0
WRITE_AFTER_S = 4.0


def create(node: ContivdProcess, ep: str) -> bool:
    try:
        return node.post_endpoint(ep).status_code == 200
    except Exception:  # noqa: BLE001 - a refused or dropped connection while the leadership moves
        return False


def one_round(root: Path, signal_name: str) -> dict[str, object]:
    cluster = ContivdCluster(root, 3)
    try:
        cluster.start(90)
        leader = cluster.leader()
        assert leader.post("/api/v1/networks/default:pods/", NET).status_code == 200
        via = next(node for node in cluster.nodes if node is not leader)
        acked: list[tuple[float, str]] = []
        done = threading.Event()

        def stream() -> None:
            i = 0
            while not done.is_set():
                i += 1
                if create(via, f"ep{i}"):
                    acked.append((time.monotonic(), f"ep{i}"))

        writer = threading.Thread(target=stream)
        writer.start()
        time.sleep(WRITE_BEFORE_S)
        stopped_at = time.monotonic()
        if signal_name == "TERM":
            leader.stop()
        else:
            leader.kill()
        time.sleep(WRITE_AFTER_S)
        done.set()
        writer.join()
        around = [at for at, _ in acked if at > stopped_at - 1.0]
        present = via.endpoint_addresses()
        return {
            "gap_s": round(max(b - a for a, b in zip(around, around[1:], strict=False)), 3),
            "handed_over": "handed the Raft leadership to" in leader.log_text(),
            "acked": len(acked),
            "lost": sum(1 for _, ep in acked if ep not in present),
        }
    finally:
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two rounds of each kind instead of five")
    args = parser.parse_args()
    rounds = 2 if args.quick else 5
    results: dict[str, list[dict[str, object]]] = {"TERM": [], "KILL": []}
    with tempfile.TemporaryDirectory(prefix="restart-bench-") as tmp:
        for i in range(rounds):
            for signal_name in ("TERM", "KILL"):
                result = one_round(Path(tmp) / f"{signal_name}{i}", signal_name)
                results[signal_name].append(result)
                print(
                    f"SIG{signal_name} round {i}: longest gap between acknowledged creates {result['gap_s']} s, handed over: {result['handed_over']}",
                    flush=True,
                )
    term = [float(str(r["gap_s"])) for r in results["TERM"]]
    kill = [float(str(r["gap_s"])) for r in results["KILL"]]
    every = results["TERM"] + results["KILL"]
    figures = {
        "term_gap_s_p50": percentile(term, 0.5),
        "term_gap_s_max": max(term),
        "kill_gap_s_p50": percentile(kill, 0.5),
        "kill_gap_s_max": max(kill),
        "ratio_kill_to_term_p50": round(percentile(kill, 0.5) / percentile(term, 0.5), 1),
        "handed_over": f"{sum(1 for r in results['TERM'] if r['handed_over'])}/{rounds}",
        "acked": sum(int(str(r["acked"])) for r in every),
        "lost": sum(int(str(r["lost"])) for r in every),
        "quick": args.quick,
    }
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

"""The Raft leader partitioned away under load, and a 100 000-endpoint snapshot restored.

Three `contivd run` voters, each in its own network namespace on one bridge
(tests/support/netns_cluster.py, addresses in 198.18.77.0/24 inside the namespaces). Six
clients create endpoints round-robin over every node (4 s client timeout, a failed create is
retried on the next node). Each round cuts the current leader off from its peers with iptables
inside its namespace for 10 s — three rounds both ways, three outbound only — and heals it
(tests/support/partition_driver.py). Figures:

- unavailable_s_p50 / unavailable_s_max: per round, the longest stretch during the partition
  without an acknowledged create (sent after the cut) from a node of the majority side;
- recovery_s_max: heal → every node has acknowledged a create sent to it after the heal;
- stepdown_s_max: cut → the isolated leader's /info no longer says `leader`;
- acked / lost / duplicates / leaked: acknowledged creates, those missing or changed in the
  store afterwards, addresses held twice, addresses allocated without an endpoint;
- isolated_acks: creates the cut-off leader acknowledged during its partition (must be 0);
- restore_s_100k: benchmarks/restore_bench.py's restore of a 100 000-endpoint backup (its
  `run`, not a copy; 10 000 with --quick, key restore_s_10k).

--quick: one round each way, 5 s, and the 10 000-endpoint restore. Needs root and iptables.
The last line is one JSON object.

    python3 benchmarks/fault_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.restore_bench import run as restore_run  # noqa: E402
from tests.support.netns_cluster import netns_cluster  # noqa: E402
from tests.support.partition_figures import percentile  # noqa: E402


def partitions(root: Path, rounds: list[tuple[str, float]]) -> dict[str, Any]:
    with netns_cluster(root) as cluster:
        figures = cluster.partition_rounds(rounds)
    per_round = figures["rounds"]
    unavailable = [r["unavailable_s"] for r in per_round]
    recovery = [r["recovery_s"] for r in per_round if r["recovery_s"] is not None]
    stepdown = [r["stepdown_s"] for r in per_round]
    return {
        "rounds": len(per_round),
        "partition_s": max(seconds for _, seconds in rounds),
        "acked": figures["acked"],
        "lost": figures["lost"],
        "duplicates": figures["duplicates"],
        "leaked": figures["leaked"],
        "isolated_acks": sum(len(r["isolated_acks"]) for r in per_round),
        "unavailable_s_p50": percentile(unavailable, 0.5),
        "unavailable_s_max": max(unavailable),
        "recovery_s_max": max(recovery) if len(recovery) == len(per_round) else None,
        "stepdown_s_max": None if None in stepdown else max(stepdown),
        "per_round": [
            {k: r[k] for k in ("mode", "unavailable_s", "stepdown_s", "readyz_down_s", "status_down_s", "recovery_s", "majority_acks")}
            for r in per_round
        ],
        "client_failures": figures["failures"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one 5 s round each way and a 10 000-endpoint restore")
    args = parser.parse_args()
    rounds = [("both", 5.0), ("outbound", 5.0)] if args.quick else [("both", 10.0)] * 3 + [("outbound", 10.0)] * 3
    with tempfile.TemporaryDirectory(prefix="fault-bench-") as tmp:
        figures = partitions(Path(tmp) / "partitions", rounds)
        restore = restore_run(Path(tmp), 10_000 if args.quick else 100_000)
    figures.update({k: v for k, v in restore.items() if k.startswith("restore_s_")})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

"""The Raft leader cut off from its peers by iptables inside its network namespace, both ways
and outbound only, while clients create endpoints round-robin over every node (issue 15 item 4).

Three voters in their own namespaces on one bridge (tests/support/netns_cluster.py); the
driver (tests/support/partition_driver.py) runs on the clients' side of the bridge. Rounds are
6 s here (10 s in benchmarks/fault_bench.py, which records the figures). The measured
unavailability, step-down and recovery times are printed (`pytest -s`); the assertions are on
outcomes, not on times: the machine is shared.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support.netns_cluster import netns_cluster

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("iptables") is None, reason="needs root and iptables (network namespaces)"),
]


def test_leader_partitions_under_load_lose_nothing_and_the_old_leader_steps_down(tmp_path: Path) -> None:
    with netns_cluster(tmp_path) as cluster:
        figures = cluster.partition_rounds([("both", 6.0), ("outbound", 6.0), ("both", 6.0)])
    print("partition figures:", json.dumps(figures))
    for round_ in figures["rounds"]:
        assert round_["isolated_acks"] == [], f"the cut-off leader acknowledged writes: {round_}"
        assert round_["stepdown_s"] is not None, f"the cut-off leader still said 'leader' in /info when the partition healed: {round_}"
        assert round_["readyz_down_s"] is not None, f"the cut-off leader's /readyz stayed 200: {round_}"
        assert round_["status_down_s"] is not None, f"the cut-off leader's status page named it leader throughout: {round_}"
        assert round_["majority_acks"] > 0, f"the majority side acknowledged nothing during the partition: {round_}"
        assert round_["recovery_s"] is not None, round_
    assert figures["acked"] > 0 and figures["stored"] >= figures["acked"]
    assert figures["lost"] == 0, f"acknowledged endpoints missing or changed: {figures['lost_examples']}"
    assert figures["duplicates"] == 0, "an address is held by two endpoints"
    assert figures["leaked"] == 0, "an address is allocated without an endpoint"
    assert figures["unknown"] == [], "endpoints no client asked for"
    assert figures["replicas_agree"], "the nodes answered different endpoint sets after the heal"

"""Orphaned endpoints on a real node: a pod whose network namespace vanished without a CNI DEL
(while contivd ran, or while it was stopped) loses its endpoint, address and bridge port after
the grace period; a pod whose interface merely moved to another live namespace, and pods whose
ADD runs while the node scans, keep theirs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from contivd.cni_server.resolve import Attachment
from tests.support.cni_harness import ROOT, Pod, api_gets, cni_node, create_network, holdings, netconf, new_pod, run_plugin
from tests.support.contivd_nodes import CHROMIUM
from tests.support.nodes import Node, reaches, sh, wait_until

pytestmark = [
    pytest.mark.cni,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

GRACE = ("--orphan-grace", "5")  # long enough to see an orphan's state before it is reclaimed on a loaded machine
NETWORKS = ("pods",)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with cni_node(Node(tmp_path), *GRACE) as n:
        create_network(n, "pods", "198.18.30.0/24", "198.18.30.254")
        yield n


def endpoint_id(pod: Pod) -> str:
    return f"pods.default-{pod.container}-eth0"


def reclaimed_count(node: Node) -> float:
    status, metrics = node.api_call("GET", "/metrics")
    assert status == 200
    found = re.search(r'^contivd_cni_orphans_reclaimed_total\{network="default/pods"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def datapath_of(node: Node) -> dict[str, Any]:
    (report,) = api_gets(node, "/status/api/node")
    states: dict[str, Any] = report["datapath"]
    return states


# The status page in Debian's chromium, run inside the node's namespace (where its API listens):
# prints {endpoint name: [datapath cell text, its class]} for the endpoint table's first page.
PAGE_CELLS = """
import json, sys
from playwright.sync_api import sync_playwright
from tests.support.contivd_nodes import CHROMIUM, CHROMIUM_ARGS
CELLS = "[...document.querySelectorAll('#endpoints tbody tr')].map((tr) => [tr.querySelector('td.name')?.textContent, " \\
        "tr.querySelector('td.datapath')?.textContent, tr.querySelector('td.datapath')?.className])"
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
    page = browser.new_page(ignore_https_errors=True)  # the node's cluster CA is not chromium's; TLS itself is tests/tls' part
    page.goto(sys.argv[1])
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    page.wait_for_function(f"{CELLS}.some(([name, text]) => name === {json.dumps(sys.argv[2])} && text === {json.dumps(sys.argv[3])})", timeout=15000)
    print(json.dumps({name: [text, kind] for name, text, kind in page.evaluate(CELLS)}))
    browser.close()
"""


def page_datapath_cells(node: Node, name: str, text: str) -> dict[str, list[str]]:
    """The datapath cells once the row `name` shows `text` (the page updates live)."""
    done = subprocess.run(
        ["ip", "netns", "exec", node.ns, sys.executable, "-c", PAGE_CELLS, node.url() + "/", name, text],
        capture_output=True, text=True, timeout=90, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    cells: dict[str, list[str]] = json.loads(done.stdout)
    return cells


def test_a_vanished_pod_is_reclaimed_and_live_or_moved_or_adding_pods_are_kept(node: Node, pods: list[Pod]) -> None:
    before = holdings(node, NETWORKS)
    orphan, moved, kept = new_pod(pods), new_pod(pods), new_pod(pods)
    for pod in (orphan, moved, kept):
        assert pod.add(node, network="pods").status == 0
    with_three = holdings(node, NETWORKS)
    wait_until(lambda: datapath_of(node).get(endpoint_id(kept)) == ["port, link up", True], 20, "the kept pod's datapath state", node)
    (snapshot,) = api_gets(node, "/status/api/snapshot")  # the page model: rows carry the id the cluster part's datapath is keyed by
    row = next(r for r in snapshot["store"]["endpoints"]["rows"] if r[0] == f"{kept.container}-eth0")
    assert snapshot["cluster"]["datapath"][row[8]] == ["port, link up", True]

    # The moved pod's interface goes to another namespace that stays alive: its veth lives on.
    elsewhere = new_pod(pods)
    sh("ip", "-n", moved.name, "link", "set", "eth0", "netns", elsewhere.name)
    orphan.remove()  # the runtime removed the container and never called DEL
    # The view lags the namespace's removal by one link-event round: wait for the change, not the
    # row; the grace leaves several seconds to see it before the endpoint is reclaimed.
    state = wait_until(
        lambda: (s := datapath_of(node).get(endpoint_id(orphan))) and "veth gone" in s[0] and s,
        20,
        "the orphan's veth gone in the datapath view",
        node,
    )
    assert state[1] is False, state

    # ADDs while the node scans every 1.25 s with a 5 s grace: their endpoints exist before their
    # veths do, and none of them may be taken for an orphan.
    adding = [new_pod(pods) for _ in range(12)]
    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(lambda p: p.add(node, network="pods"), adding))
    assert all(o.status == 0 for o in outcomes), [o.output for o in outcomes if o.status]

    after_orphan = with_three.endpoints - {endpoint_id(orphan)}
    wait_until(lambda: endpoint_id(orphan) not in holdings(node, NETWORKS).endpoints, 30, "the orphan's endpoint to be reclaimed", node)
    held = holdings(node, NETWORKS)
    assert held.endpoints == after_orphan | {endpoint_id(p) for p in adding}
    assert Attachment(orphan.container, "eth0").host_ifname not in held.ports, "its bridge port went with it"
    assert len(held.ports) == len(held.endpoints) == 14
    assert reclaimed_count(node) == 1.0
    assert f"orphaned endpoint {endpoint_id(orphan)} reclaimed (container {orphan.container}" in node.log_text()

    # A second orphan made after every ADD returned: once it is reclaimed, a full grace period
    # has passed in which any wrongly timed endpoint (moved, adding) would have gone too.
    witness = new_pod(pods)
    assert witness.add(node, network="pods").status == 0
    witness.remove()
    wait_until(lambda: holdings(node, NETWORKS).endpoints == held.endpoints, 30, "the second orphan to be reclaimed", node)
    assert reclaimed_count(node) == 2.0
    assert datapath_of(node)[endpoint_id(moved)] == ["port, link down", False], "the moved pod end is down in its new namespace"
    if os.path.exists(CHROMIUM):  # what an operator sees: the status page's endpoint table
        cells = page_datapath_cells(node, f"{moved.container}-eth0", "port, link down")
        assert cells[f"{moved.container}-eth0"] == ["port, link down", "datapath bad"], cells
        assert cells[f"{kept.container}-eth0"] == ["port, link up", "datapath ok"], cells
    for pod in adding:
        assert sh("ip", "-n", pod.name, "-o", "addr", "show", "eth0").stdout.count("198.18.30.") == 1, "pods keep their interfaces"
    address = outcomes[0].output["ips"][0]["address"].split("/")[0]
    wait_until(lambda: reaches(kept.name, address), 20, "the kept pod to reach a pod added during the scans", node)
    for pod in (moved, kept, *adding):
        assert pod.delete(node).status == 0
    assert holdings(node, NETWORKS) == before


def test_a_pod_removed_while_contivd_was_stopped_is_reclaimed_after_the_restart(node: Node, pods: list[Pod]) -> None:
    before = holdings(node, NETWORKS)
    pod = new_pod(pods)
    assert pod.add(node, network="pods").status == 0
    assert endpoint_id(pod) in holdings(node, NETWORKS).endpoints
    assert node.proc is not None
    node.proc.send_signal(signal.SIGTERM)
    assert node.proc.wait(timeout=20) == 0
    node.log.close()
    pod.remove()
    failed = pod.delete(node)  # what the runtime's DEL gets while contivd is down; it forgets the container anyway
    assert failed.status != 0 and failed.code == 11, failed.output  # CNI "try again later": no socket
    node.start(*GRACE)
    wait_until(lambda: run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0, 40, "the restarted node's CNI server", node)
    wait_until(lambda: holdings(node, NETWORKS) == before, 30, "the endpoint, its address and its bridge port to be reclaimed", node)
    assert reclaimed_count(node) == 1.0
    assert f"orphaned endpoint {endpoint_id(pod)} reclaimed" in node.log_text()

"""Operability figures: start-up to READY=1, /metrics and the status page at 10,000 endpoints,
the CNI plugin's VERSION round trip, size and start-up of dist/contivd.

- ready_s_1 / ready_s_3: from starting `contivd run` (1 node; 3 nodes started together) to
  READY=1 on a NOTIFY_SOCKET this script owns (median of the runs; for 3 nodes, the last
  node's READY=1).
- metrics_scrape_ms_10k: GET /metrics with 10,000 endpoints in the store, right after a write
  (the store summary is recomputed: the worst case); metrics_scrape_cached_ms_10k without one.
- status_page_ms_10k: Debian's chromium through Playwright loads `/` until the page sets
  `document.body.dataset.ready = "true"`; null without the page, Playwright or chromium.
- cni_version_ms: the CNI plugin as the .deb installs it (packaging/build-cni-plugin.sh) with CNI_COMMAND=VERSION.
- binary_start_ms / binary_mb: `dist/contivd --version` once unpacked (median of 5); null if not built.

    python3 benchmarks/ops_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as `python3 benchmarks/ops_bench.py` from anywhere

import httpx  # noqa: E402
import trio  # noqa: E402

from benchmarks.api_bench import create_endpoints  # noqa: E402
from benchmarks.cni_bench import contiv_plugin  # noqa: E402
from tests.support.contivd_nodes import CHROMIUM, CHROMIUM_ARGS, ContivdCluster, ContivdProcess  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

ENDPOINTS = 10_000
NETWORK = {"tenantName": "default", "networkName": "bench", "encap": "vxlan", "subnet": "198.18.0.0/16", "gateway": "198.18.255.254"}


def wait_ready(sock: socket.socket, deadline: float) -> float:
    """Seconds since the epoch of perf_counter when READY=1 arrived."""
    while True:
        sock.settimeout(max(0.01, deadline - time.perf_counter()))
        if b"READY=1" in sock.recv(4096):
            return time.perf_counter()


def time_to_ready(root: Path, size: int) -> float:
    root.mkdir(parents=True)
    cluster = ContivdCluster(root, size)
    sockets = []
    try:
        started = time.perf_counter()
        for index, node in enumerate(cluster.nodes):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(str(root / f"notify{index}.sock"))
            sockets.append(sock)
            os.environ["NOTIFY_SOCKET"] = str(root / f"notify{index}.sock")
            node.start()  # copies os.environ
        readies = [wait_ready(sock, started + 60) for sock in sockets]
        return max(readies) - started
    finally:
        os.environ.pop("NOTIFY_SOCKET", None)
        cluster.close()
        for sock in sockets:
            sock.close()


def scrape_ms(node: ContivdProcess, after_write: bool, runs: int) -> float:
    """Median GET /metrics on a kept-alive connection (as Prometheus scrapes)."""
    samples = []
    with httpx.Client(base_url=node.url, timeout=30) as client, node.socket_client(timeout=30) as writer:  # writes: root's socket
        client.get("/healthz")
        for index in range(runs):
            if after_write:
                assert writer.post("/plugin/createEndpoint", json=endpoint_request(f"scrape{index}")).status_code == 200
            started = time.perf_counter()
            answer = client.get("/metrics")
            samples.append(time.perf_counter() - started)
            assert answer.status_code == 200 and "contivd_endpoints" in answer.text
    return round(statistics.median(samples) * 1000, 1)


def endpoint_request(name: str) -> dict[str, Any]:
    return {"TenantName": "default", "NetworkName": "bench", "EndpointID": name, "ConfigEP": {"Container": name}}


def status_page_ms(url: str) -> float | None:
    if not Path(CHROMIUM).exists():
        return None
    try:
        page_answer = httpx.get(url + "/", timeout=10)
        if page_answer.status_code != 200 or "html" not in page_answer.headers.get("content-type", ""):
            return None
        from playwright.sync_api import sync_playwright

        from benchmarks.status_bench import first_renders_ms
    except (ImportError, httpx.HTTPError):
        return None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            return round(statistics.median(first_renders_ms(browser, url)), 1)
        finally:
            browser.close()


def at_10k(root: Path, quick: bool) -> dict[str, Any]:
    cluster = ContivdCluster(root, 1)
    try:
        node = cluster.start().nodes[0]
        assert node.post("/api/v1/networks/default:bench/", NETWORK).status_code == 200
        started = time.perf_counter()
        trio.run(create_endpoints, [f"unix:{node.socket}"], [f"ep{i}" for i in range(ENDPOINTS)], 32)
        created_s = time.perf_counter() - started
        wait_for(
            lambda: f'contivd_endpoints{{node="{node.name}"}} {ENDPOINTS}.0' in node.get("/metrics").text or None, 30, "the endpoints in /metrics"
        )
        runs = 5 if quick else 20
        return {
            "endpoints_created_s": round(created_s, 1),
            "metrics_scrape_ms_10k": scrape_ms(node, after_write=True, runs=runs),
            "metrics_scrape_cached_ms_10k": scrape_ms(node, after_write=False, runs=runs),
            "status_page_ms_10k": status_page_ms(node.url),
        }
    finally:
        cluster.close()


def median_run_ms(command: list[str], env: dict[str, str] | None = None, runs: int = 5) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=60)
        samples.append(time.perf_counter() - started)
    return round(statistics.median(samples) * 1000, 1)


def cni_version_ms(root: Path) -> float:
    """The plugin as the .deb installs it (a plain `python3 -IS` script), answering VERSION."""
    return median_run_ms([str(contiv_plugin(root))], {**os.environ, "CNI_COMMAND": "VERSION"}, runs=10)


def binary_figures(root: Path) -> dict[str, Any]:
    binary = ROOT / "dist" / "contivd"
    if not binary.exists():
        return {"binary_start_ms": None, "binary_first_start_ms": None, "binary_mb": None}
    env = {**os.environ, "SHIV_ROOT": str(root / "shiv")}
    return {
        "binary_first_start_ms": median_run_ms([str(binary), "--version"], env, runs=1),
        "binary_start_ms": median_run_ms([str(binary), "--version"], env),
        "binary_mb": round(binary.stat().st_size / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions: finishes well under 180 s")
    args = parser.parse_args()
    runs = 2 if args.quick else 5
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ops-bench-") as tmp:
        root = Path(tmp)
        for size in (1, 3):
            times = [time_to_ready(root / f"ready{size}-{i}", size) for i in range(runs)]
            figures[f"ready_s_{size}"] = round(statistics.median(times), 2)
            print(f"READY=1 on {size} node(s): {', '.join(f'{t:.2f}' for t in times)} s", flush=True)
        figures.update(at_10k(root / "10k", args.quick))
        print(
            f"/metrics at {ENDPOINTS} endpoints: {figures['metrics_scrape_ms_10k']} ms after a write, {figures['metrics_scrape_cached_ms_10k']} ms cached",
            flush=True,
        )
        figures["cni_version_ms"] = cni_version_ms(root / "cni")
        figures.update(binary_figures(root))
        shutil.rmtree(root / "shiv", ignore_errors=True)
    figures["quick"] = args.quick
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

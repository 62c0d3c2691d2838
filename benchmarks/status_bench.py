"""The status page with many endpoints: snapshot build, first render in Chromium, filtering,
live update latency, and how many refreshes a burst of writes causes.

One `contivd run --datapath none` node on loopback; one /16 network; N endpoints created
through /plugin/createEndpoint (32 concurrent clients). Then: the snapshot's build time
(uncached: first request after the writes; cached: same revision again) and size; Debian's
chromium (Playwright) from navigation to `body[data-ready]` (median of 3 fresh pages); one
filter keystroke's filter + render in the page; an endpoint created → its row on screen; and a
burst of writes while the page is open → snapshot fetches the page made. The last line
printed is one JSON object with every figure.

    python3 benchmarks/status_bench.py [--quick] [--endpoints N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio
from playwright.sync_api import Browser, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: benchmarks, tests.support
from benchmarks.api_bench import NETWORK, create_endpoints  # noqa: E402
from tests.support.contivd_nodes import CHROMIUM, CHROMIUM_ARGS, ContivdCluster  # noqa: E402


def first_renders_ms(browser: Browser, url: str, runs: int = 3) -> list[float]:
    """Navigation to `/` until the page marks its first full render (`body[data-ready]`), in ms."""
    renders = []
    for _ in range(runs):
        page = browser.new_page()
        started = time.perf_counter()
        page.goto(url + "/")
        page.wait_for_selector("body[data-ready=true]", state="attached", timeout=60000)  # the page's CSP forbids eval
        renders.append((time.perf_counter() - started) * 1000)
        page.close()
    return renders


BURST = 1000


def timed_get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    answer = httpx.get(url, timeout=60)
    answer.raise_for_status()
    return (time.perf_counter() - started) * 1000, len(answer.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 endpoints: finishes in well under a minute")
    parser.add_argument("--endpoints", type=int, default=None)
    args = parser.parse_args()
    count = args.endpoints or (2000 if args.quick else 10000)
    figures: dict[str, float | int | bool] = {"endpoints": count, "quick": args.quick}
    with tempfile.TemporaryDirectory(prefix="status-bench-") as tmp:
        cluster = ContivdCluster(Path(tmp), 1)
        try:
            cluster.start(timeout=60)
            node = cluster.nodes[0]
            assert node.post("/api/v1/networks/default:bench/", NETWORK).status_code == 200
            trio.run(create_endpoints, [f"unix:{node.socket}"], [f"ep{i}" for i in range(count)], 32)
            uncached, size = timed_get(node.url + "/status/api/snapshot")
            cached, _ = timed_get(node.url + "/status/api/snapshot")
            figures.update(snapshot_ms_uncached=round(uncached, 1), snapshot_ms_cached=round(cached, 1), snapshot_kb=round(size / 1024))
            print(f"snapshot with {count} endpoints: {uncached:.1f} ms uncached, {cached:.1f} ms cached, {size / 1024:.0f} KiB")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
                try:
                    renders = first_renders_ms(browser, node.url)
                    figures["first_render_ms"] = round(statistics.median(renders), 1)
                    print(f"first full render: median {statistics.median(renders):.0f} ms of {', '.join(f'{r:.0f}' for r in renders)}")

                    page = browser.new_page()
                    fetches: list[float] = []
                    page.on("request", lambda req: fetches.append(time.perf_counter()) if "/status/api/snapshot" in req.url else None)
                    page.goto(node.url + "/")
                    page.wait_for_selector("body[data-ready=true]", timeout=60000)
                    page.wait_for_selector("#live.on", timeout=10000)
                    filter_ms = page.evaluate(
                        "() => { const t = performance.now(); state.filter = 'ep99'; state.page = 0; applyFilter(); renderEndpoints(); return performance.now() - t; }"
                    )
                    figures["filter_ms"] = round(filter_ms, 1)
                    print(f"filter + render over {count} endpoints: {filter_ms:.1f} ms")

                    page.fill("#ep-search", "live-probe")
                    page.wait_for_selector("#endpoints td:has-text('no endpoint matches')")
                    started = time.perf_counter()
                    trio.run(create_endpoints, [f"unix:{node.socket}"], ["live-probe"], 1)
                    page.wait_for_selector("#endpoints td.name:has-text('live-probe')", timeout=10000)
                    figures["live_ms"] = round((time.perf_counter() - started) * 1000, 1)
                    print(f"endpoint created → row on screen: {figures['live_ms']:.0f} ms")

                    before = len(fetches)
                    started = time.perf_counter()
                    trio.run(create_endpoints, [f"unix:{node.socket}"], [f"burst{i}" for i in range(BURST)], 32)
                    burst_s = time.perf_counter() - started
                    page.fill("#ep-search", f"burst{BURST - 1}")
                    page.wait_for_selector(f"#endpoints td.name:has-text('burst{BURST - 1}')", timeout=20000)
                    figures["burst_refreshes"] = len(fetches) - before
                    print(f"{BURST} endpoint writes in {burst_s:.1f} s → {figures['burst_refreshes']} snapshot fetches by the page")
                finally:
                    browser.close()
        finally:
            cluster.close()
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

"""CNI ADD and DEL as a container runtime sees them: contiv beside the reference `bridge` plugin.

One driver execs each plugin as a runtime does (CNI_* environment, network config on stdin,
pod namespaces given by path) and times the process's wall time. Plugins compared in the same
run: the reference `bridge` + `host-local` (Debian's containernetworking-plugins, installed by
packaging/deps.sh; run from the host namespace on a Linux bridge with no address of its own,
pods in 198.19.0.0/16, host-local's data in the run's temporary directory), and contiv (the
plugin as the .deb installs it: packaging/build-cni-plugin.sh for /usr/bin/python3, its code
byte-compiled as postinst does, here under the run's temporary directory; one real node, `contivd run --datapath
ovs --ovs managed` in its own network namespace as the CNI tests run it, pods in 198.18.0.0/16).

For each pod count (`--pods`, default 100 and 250; `--quick`: 40) and each plugin: ADD to every
pod one after another (the last ADD finds count-1 pods on the node), DEL them one after
another, then ADD and DEL all of them again from 8 concurrent callers (pods/s). For contiv the
sequential ADD/DEL are repeated by writing the plugin's request straight to contivd's socket
(`server_*`: contivd's share). VERSION (the plugin's start-up alone, answered without contivd)
is timed over many runs. Prints a table; the last line is one JSON object: figures per pod
count under `by_pods`, and at the top level those of the largest pod count. Needs root, Open
vSwitch and containernetworking-plugins. Removes what it creates (pod namespaces, the node and
its OVS by PID, the bridge, host-local's data) also on failure.

    python3 benchmarks/cni_bench.py [--quick] [--pods 100 250]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cni.plugin import exchange  # noqa: E402
from cni.protocol import Request  # noqa: E402
from tests.support.cni_harness import Pod, create_network, netconf, run_plugin, socket_of  # noqa: E402
from tests.support.nodes import Node, sh, wait_until  # noqa: E402

CONCURRENCY = 8
REFERENCE_PLUGINS = Path("/usr/lib/cni")  # containernetworking-plugins
INTERPRETER = "/usr/bin/python3"  # the one the .deb's plugin runs with
EDGE = 20  # add_p50_ms_first20 / _last20: does the node's size slow its next ADD?


@dataclass(frozen=True)
class Plugin:
    """One CNI plugin as a runtime knows it: the executable, CNI_PATH and the network config."""

    name: str
    executable: Path
    cni_path: Path
    config: dict[str, Any]

    def call(self, command: str, pod: Pod) -> float:
        """Exec the plugin once for `pod`; its wall time in seconds. A failed call stops the benchmark."""
        env = {"CNI_CONTAINERID": pod.container, "CNI_NETNS": pod.netns, "CNI_IFNAME": "eth0", "CNI_ARGS": "", "CNI_PATH": str(self.cni_path)}
        return self._exec(command, env, json.dumps(self.config).encode())

    def version(self) -> float:
        return self._exec("VERSION", {}, b'{"cniVersion": "1.0.0"}')

    def _exec(self, command: str, env: dict[str, str], stdin: bytes) -> float:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CNI_COMMAND": command, **env}
        started = time.perf_counter()
        done = subprocess.run([str(self.executable)], input=stdin, env=env, capture_output=True, timeout=150)
        elapsed = time.perf_counter() - started
        if done.returncode:
            raise RuntimeError(f"{self.name} {command} {env.get('CNI_NETNS', '')} failed: {done.stdout.decode()} {done.stderr.decode()}")
        return elapsed


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def concurrently(call: Callable[[Pod], float], pods: list[Pod]) -> float:
    """All pods from CONCURRENCY callers; pods per second."""
    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(call, pods))
    return round(len(pods) / (time.perf_counter() - started), 1)


def measure(plugin: Plugin, pods: list[Pod]) -> dict[str, float]:
    """Sequential ADDs then DELs, then the same from concurrent callers."""
    adds = [plugin.call("ADD", pod) for pod in pods]
    dels = [plugin.call("DEL", pod) for pod in pods]
    pods_per_s = concurrently(lambda pod: plugin.call("ADD", pod), pods)
    dels_per_s = concurrently(lambda pod: plugin.call("DEL", pod), pods)
    return {
        "add_p50_ms": ms(percentile(adds, 0.5)),
        "add_p99_ms": ms(percentile(adds, 0.99)),
        "del_p50_ms": ms(percentile(dels, 0.5)),
        "del_p99_ms": ms(percentile(dels, 0.99)),
        "add_p50_ms_first20": ms(percentile(adds[:EDGE], 0.5)),
        "add_p50_ms_last20": ms(percentile(adds[-EDGE:], 0.5)),
        "sequential_pods_per_s": round(len(pods) / sum(adds), 1),
        "pods_per_s": pods_per_s,
        "concurrent_dels_per_s": dels_per_s,
    }


def server_share(node: Node, config: dict[str, Any], pods: list[Pod]) -> dict[str, float]:
    """contivd's share: the plugin's requests written straight to its socket (no plugin process)."""

    def direct(command: str, pod: Pod) -> float:
        started = time.perf_counter()
        exchange(str(socket_of(node)), Request(command, config, pod.container, pod.netns, "eth0"))  # raises CniError on failure
        return time.perf_counter() - started

    adds = [direct("ADD", pod) for pod in pods]
    dels = [direct("DEL", pod) for pod in pods]
    return {
        "server_add_p50_ms": ms(percentile(adds, 0.5)),
        "server_add_p99_ms": ms(percentile(adds, 0.99)),
        "server_del_p50_ms": ms(percentile(dels, 0.5)),
        "server_del_p99_ms": ms(percentile(dels, 0.99)),
    }


def bridge_plugin(root: Path, bridge: str) -> Plugin:
    config = {
        "cniVersion": "1.0.0",
        "name": "bench-bridge",
        "type": "bridge",
        "bridge": bridge,
        "isGateway": False,  # the bridge keeps no address in the host namespace
        "ipMasq": False,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.19.0.0/16"}]], "dataDir": str(root / "host-local")},
    }
    return Plugin("bridge", REFERENCE_PLUGINS / "bridge", REFERENCE_PLUGINS, config)


def contiv_plugin(root: Path) -> Path:
    """Built and byte-compiled as packaging/build-deb and the .deb's postinst do, under `root`."""
    plugin, libdir = root / "bin" / "contiv", root / "lib"
    subprocess.run(["bash", str(ROOT / "packaging" / "build-cni-plugin.sh"), str(plugin), str(libdir), INTERPRETER], check=True, timeout=60)
    subprocess.run([INTERPRETER, "-I", "-m", "compileall", "-q", str(libdir)], check=True, timeout=60)
    return plugin


def start_contiv(node: Node, executable: Path) -> Plugin:
    node.create_namespace()
    node.start("--cni-socket", "cni.sock", "--log-level", "warning")
    wait_until(lambda: node.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 60, "the node's API", node)
    create_network(node, "bench", "198.18.0.0/16", "198.18.255.254")
    wait_until(lambda: run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0, 60, "the CNI server", node)
    return Plugin("contiv", executable, Path("/opt/cni/bin"), netconf(node, network="bench"))


def figures_for(count: int, bridge: Plugin, contiv: Plugin, node: Node, created: list[Pod]) -> dict[str, float]:
    pods = [Pod().create() for _ in range(count)]
    created.extend(pods)
    reference = measure(bridge, pods)
    ours = measure(contiv, pods)
    figures: dict[str, float] = {"pods": count, **ours, **server_share(node, contiv.config, pods)}
    figures.update({f"bridge_{key}": value for key, value in reference.items()})
    figures["ratio_add_vs_bridge"] = round(ours["add_p50_ms"] / reference["add_p50_ms"], 2)
    for pod in pods:
        pod.remove()
        created.remove(pod)
    return figures


def table(results: Iterable[dict[str, float]]) -> str:
    columns = ("ADD p50", "ADD p99", "DEL p50", "DEL p99", "first20", "last20", "pods/s", "DELs/s", "contivd ADD p50", "contivd DEL p50")
    lines = [f"{'plugin':<8}{'pods':>6}" + "".join(f"{c:>16}" for c in columns)]
    for figures in results:
        for prefix, name in (("bridge_", "bridge"), ("", "contiv")):
            keys = (
                "add_p50_ms",
                "add_p99_ms",
                "del_p50_ms",
                "del_p99_ms",
                "add_p50_ms_first20",
                "add_p50_ms_last20",
                "pods_per_s",
                "concurrent_dels_per_s",
            )
            values = [figures[prefix + key] for key in keys] + [
                figures.get(f"{prefix}server_add_p50_ms", "-"),
                figures.get(f"{prefix}server_del_p50_ms", "-"),
            ]
            lines.append(f"{name:<8}{int(figures['pods']):>6}" + "".join(f"{value:>16}" for value in values))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run of 40 pods and fewer VERSION calls: about a minute")
    parser.add_argument("--pods", type=int, nargs="+", help="pod counts, each run from an empty node (default: 100 250)")
    options = parser.parse_args()
    counts = options.pods or ([2 * EDGE] if options.quick else [100, 250])
    if min(counts) < EDGE:
        parser.error(f"--pods: each count must be at least {EDGE}")
    if not (REFERENCE_PLUGINS / "bridge").exists():
        sys.exit(f"cni_bench: {REFERENCE_PLUGINS / 'bridge'} is missing: install containernetworking-plugins (packaging/deps.sh)")
    root = Path(tempfile.mkdtemp(prefix="cni-bench-"))
    bridge_name = f"cbr{uuid.uuid4().hex[:8]}"
    node = Node(root)
    created: list[Pod] = []
    try:
        bridge = bridge_plugin(root, bridge_name)
        contiv_executable = contiv_plugin(root)
        runs = 30 if options.quick else 200
        # Before contivd starts (VERSION does not need it), so that its start-up does not load the machine.
        versions = {
            "bridge": [bridge.version() for _ in range(runs)],
            "contiv": [Plugin("contiv", contiv_executable, Path("/opt/cni/bin"), {}).version() for _ in range(runs)],
        }
        contiv = start_contiv(node, contiv_executable)
        results = [figures_for(count, bridge, contiv, node, created) for count in counts]
    finally:
        for pod in created:
            pod.remove()
        node.stop()
        sh("ip", "link", "del", bridge_name, check=False)
        shutil.rmtree(root, ignore_errors=True)
    version = {"plugin_version_ms": ms(percentile(versions["contiv"], 0.5)), "bridge_version_ms": ms(percentile(versions["bridge"], 0.5))}
    largest = max(results, key=lambda figures: figures["pods"])
    summary = {
        **largest,
        **version,
        "plugin_startup_p50_ms": version["plugin_version_ms"],
        "concurrency": CONCURRENCY,
        "by_pods": {str(int(figures["pods"])): figures for figures in results},
    }
    print(table(results))
    print(f"plugin VERSION p50: contiv {version['plugin_version_ms']} ms, bridge {version['bridge_version_ms']} ms ({runs} runs each)")
    print(f"contiv ADD p50 / bridge ADD p50 at {int(largest['pods'])} pods: {largest['ratio_add_vs_bridge']}x")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

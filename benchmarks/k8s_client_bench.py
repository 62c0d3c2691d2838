"""Compare Kubernetes clients for the leader's watch: the official `kubernetes` client in
threads (what contivd used until issue 25), lightkube's async client with its typed models, and
raw httpx2 requests (lightkube's kubeconfig loader and transport; contivd.k8s.client) on trio.

Each candidate runs in a fresh process that first imports what a leader holds anyway (trio,
contivd.main), then: imports the client (``<name>_import_s``), lists five kinds (N Services, N
EndpointSlices, N Pods, N/10 Namespaces, 10 NetworkPolicies), watches all five from the lists'
resourceVersions (``<name>_listed_s``: from the start of the import until the five lists are
in: the cold start of a new leader's watch) (five threads for the official client, five trio tasks otherwise), receives
100 changes, and reports its resident memory (``<name>_rss_mb``, and ``<name>_rss_added_mb`` over
the baseline process). ``<name>_code_mb`` is the installed size of the client package and every
package it pulls in that contivd does not already depend on.

The API server is the project's test server (tests/support/k8s_apiserver.py) in this process.

Usage: python3 benchmarks/k8s_client_bench.py [--quick] [--objects N]
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.k8s_apiserver import KubeApiServer, pod  # noqa: E402
from tests.support.kube_objects import endpoint_slice, service  # noqa: E402

CANDIDATES = {"official": "kubernetes", "lightkube_models": "lightkube", "raw_httpx2": "lightkube"}
CHANGES = 100
PATHS = {
    "services": "/api/v1/services",
    "endpointslices": "/apis/discovery.k8s.io/v1/endpointslices",
    "pods": "/api/v1/pods",
    "namespaces": "/api/v1/namespaces",
    "networkpolicies": "/apis/networking.k8s.io/v1/networkpolicies",
}

# The child: one candidate, timed and measured. Prints one JSON line.
CHILD = r"""
import json, sys, threading, time
import trio
import contivd.main  # what a leader process holds anyway
candidate, kubeconfig, changes = sys.argv[1], sys.argv[2], int(sys.argv[3])
PATHS = json.loads(sys.argv[4])

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
baseline = rss_mb()
received = 0
listed = []  # seconds from the start of the import to each kind's list being in
started = time.perf_counter()

if candidate == "official":
    from kubernetes import client, config
    from kubernetes.watch.watch import iter_resp_lines
    imported = time.perf_counter() - started
    api = config.new_client_from_config(config_file=kubeconfig)
    core, discovery, networking = client.CoreV1Api(api), client.DiscoveryV1Api(api), client.NetworkingV1Api(api)
    calls = [core.list_service_for_all_namespaces, discovery.list_endpoint_slice_for_all_namespaces, core.list_pod_for_all_namespaces,
             core.list_namespace, networking.list_network_policy_for_all_namespaces]
    lock = threading.Lock()
    def run(call):
        global received
        rv = json.loads(call(_preload_content=False).data)["metadata"]["resourceVersion"]
        listed.append(time.perf_counter() - started)
        response = call(watch=True, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=8, _preload_content=False)
        for line in iter_resp_lines(response):
            if line.strip() and json.loads(line)["type"] != "BOOKMARK":
                with lock:
                    received += 1
    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads: t.start()
    time.sleep(1.5)
    print("watching", flush=True)
    for t in threads: t.join()
elif candidate == "lightkube_models":
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.core_v1 import Service, Pod, Namespace
    from lightkube.resources.discovery_v1 import EndpointSlice
    from lightkube.resources.networking_v1 import NetworkPolicy
    imported = time.perf_counter() - started
    async def main():
        client = AsyncClient(KubeConfig.from_file(kubeconfig))
        async def run(res, namespaced):
            global received
            ns = {"namespace": "*"} if namespaced else {}
            listing = client.list(res, **ns)
            items = [o async for o in listing]
            listed.append(time.perf_counter() - started)
            with trio.move_on_after(8):
                async for _type, _obj in client.watch(res, resource_version=listing.resourceVersion, **ns):
                    received += 1
        async with trio.open_nursery() as nursery:
            for res, namespaced in ((Service, True), (EndpointSlice, True), (Pod, True), (Namespace, False), (NetworkPolicy, True)):
                nursery.start_soon(run, res, namespaced)
            await trio.sleep(1.5)
            print("watching", flush=True)
    trio.run(main)
else:
    import httpx2
    from lightkube.config.client_adapter import AsyncClient, ConnectionParams
    from lightkube.config.kubeconfig import KubeConfig
    imported = time.perf_counter() - started
    async def main():
        client = AsyncClient(KubeConfig.from_file(kubeconfig).get(), ConnectionParams(timeout=httpx2.Timeout(5, read=120), trust_env=False))
        async def run(path):
            global received
            answer = await client.get(path)
            rv = json.loads(answer.content)["metadata"]["resourceVersion"]
            listed.append(time.perf_counter() - started)
            params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "8"}
            async with client.stream("GET", path, params=params) as response:
                async for line in response.aiter_lines():
                    if line.strip() and json.loads(line)["type"] != "BOOKMARK":
                        received += 1
        async with trio.open_nursery() as nursery:
            for path in PATHS.values():
                nursery.start_soon(run, path)
            await trio.sleep(1.5)
            print("watching", flush=True)
    trio.run(main)
print(json.dumps({"import_s": imported, "listed_s": max(listed), "rss_mb": rss_mb(), "baseline_mb": baseline, "received": received}), flush=True)
"""


def code_mb(client: str) -> float:
    """Installed size of `client` and the packages it needs beyond contivd's own dependencies."""

    def closure(name: str, seen: set[str]) -> set[str]:
        key = name.lower().replace("_", "-")
        if key in seen:
            return seen
        seen.add(key)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            return seen
        for requirement in requires:
            if "extra ==" in requirement:
                continue
            dep = requirement.split(";")[0].split("[")[0]
            for stop in "<>=!~ (":
                dep = dep.split(stop)[0]
            closure(dep.strip(), seen)
        return seen

    base: set[str] = set()
    for requirement in metadata.requires("contivd") or []:
        if "extra ==" not in requirement:
            closure(requirement.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip(), base)
    base.discard(client)  # the client itself always counts
    total = 0
    for name in closure(client, set()) - base:
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            continue
        total += sum(f.size or 0 for f in files)
    return total / 1e6


def load(server: KubeApiServer, count: int) -> None:
    for k in range(count):
        namespace = f"ns{k % max(1, count // 10)}"
        server.apply(service(namespace, f"svc{k}", f"198.19.{112 + k // 250}.{k % 250 + 1}"))
        server.apply(endpoint_slice(namespace, f"svc{k}-a", f"svc{k}", [f"198.18.{k // 250}.{k % 250 + 1}"], 8080))
        server.apply(pod(namespace, f"pod{k}", {"app": f"svc{k}"}))
    for k in range(max(1, count // 10)):
        server.apply({"kind": "Namespace", "metadata": {"name": f"ns{k}"}})
    for k in range(10):
        server.apply({"kind": "NetworkPolicy", "metadata": {"namespace": "ns0", "name": f"np{k}"}, "spec": {"podSelector": {}}})


def measure(candidate: str, server: KubeApiServer, kubeconfig: Path) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, candidate, str(kubeconfig), str(CHANGES), json.dumps(PATHS)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "watching"
    time.sleep(0.5)
    for k in range(CHANGES):
        server.apply(service("ns0", f"svc{k}", f"198.19.{112 + k // 250}.{k % 250 + 1}", port=81))
    figures = json.loads(child.stdout.readline())
    child.wait(30)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 objects of each kind instead of 1000")
    parser.add_argument("--objects", type=int, help="Services (and as many EndpointSlices and Pods) the server holds")
    args = parser.parse_args()
    count = args.objects if args.objects is not None else (100 if args.quick else 1000)
    result: dict[str, Any] = {"objects": count}
    with KubeApiServer(bookmark_seconds=1.0).start() as server, tempfile.TemporaryDirectory() as tmp:
        load(server, count)
        kubeconfig = server.kubeconfig(Path(tmp) / "kubeconfig")
        for candidate, package in CANDIDATES.items():
            figures = measure(candidate, server, kubeconfig)
            result[f"{candidate}_import_s"] = round(figures["import_s"], 3)
            result[f"{candidate}_listed_s"] = round(figures["listed_s"], 3)
            result[f"{candidate}_rss_mb"] = round(figures["rss_mb"], 1)
            result[f"{candidate}_rss_added_mb"] = round(figures["rss_mb"] - figures["baseline_mb"], 1)
            result[f"{candidate}_code_mb"] = round(code_mb(package), 1)
            result[f"{candidate}_changes_seen"] = figures["received"]
    print(f"{'client':<18}{'import s':>10}{'listed s':>10}{'RSS MB':>10}{'added MB':>10}{'code MB':>10}{'changes':>9}")
    for candidate in CANDIDATES:
        print(
            f"{candidate:<18}{result[f'{candidate}_import_s']:>10}{result[f'{candidate}_listed_s']:>10}{result[f'{candidate}_rss_mb']:>10}"
            f"{result[f'{candidate}_rss_added_mb']:>10}{result[f'{candidate}_code_mb']:>10}{result[f'{candidate}_changes_seen']:>9}"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()

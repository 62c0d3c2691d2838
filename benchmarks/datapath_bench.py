"""Benchmark the node agent's datapath programming on real Open vSwitch (userspace datapath).

* ``flows_per_s_bundle``: N policy flows sent as one atomic ONF bundle (what the agent does),
  encoding included, until OVS has committed them; ``flows_per_s_single``: the same flows one
  flow-mod at a time, each waited for (a barrier), as a naive controller programs a switch;
  ``flows_per_s_pipelined``: one flow-mod per flow but a single barrier at the end. Each run
  starts from an empty bridge and is checked by dumping the flows back. Runs inside a
  private network namespace with contivd's managed OVS.
* ``rule_to_flows_p50_ms`` / ``_p99_ms``: three contivd nodes (each in its namespace with its
  own OVS, joined by a fabric namespace, as in tests/support/nodes.py), each holding
  ``--endpoints-per-node`` endpoints (default 250; ``--quick``: 20) in the group the policy
  applies to, added through each node's CNI socket as the plugin would (a pod namespace each,
  8 concurrent requests per node); a policy rule is POSTed to the leader's API and the time
  until its flow shows up on all three bridges is taken from ``ovs-ofctl monitor`` on each
  bridge (events, no polling).

Usage: python3 benchmarks/datapath_bench.py [--quick] [--endpoints-per-node N]   (root; Open vSwitch installed)
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import trio  # noqa: E402

import fastpath  # noqa: E402
from cni.plugin import exchange  # noqa: E402
from cni.protocol import Request  # noqa: E402
from contivd.agent.datapath import bridge_spec  # noqa: E402
from contivd.ovs import ManagedOvs, open_ovsdb  # noqa: E402
from openflow import Controller  # noqa: E402
from openflow.encode import encode_delete_cookie, encode_flow_bundle, encode_flows  # noqa: E402
from openflow.flow import Flow  # noqa: E402
from openflow.flows.policy import rule_flow  # noqa: E402
from openflow.inputs import PolicyRuleSpec  # noqa: E402
from openflow.pipeline import TABLES  # noqa: E402
from tests.support.cni_harness import Pod, netconf, socket_of  # noqa: E402
from tests.support.nodes import Node, cluster_of_nodes, sh  # noqa: E402
from tests.support.ovs_netns import ovs_sandbox  # noqa: E402

POD_SUBNET, POD_GATEWAY = "198.19.128.0/20", "198.19.143.254"  # clear of the fabric (198.19.0.0/24) and the VTEPs


def policy_flows(count: int) -> list[Flow]:
    """`count` distinct allow rules (TCP to one port each, between two groups)."""
    return [
        rule_flow(TABLES["policy"], PolicyRuleSpec(f"r{k}", 10, "allow", src_epg=1 + k % 50, dst_epg=2, proto=6, dst_port=1 + k % 65000), 1)
        for k in range(count)
    ]


async def _measure_flows(count: int, data_dir: Path) -> dict[str, float]:
    flows = policy_flows(count)
    async with trio.open_nursery() as nursery:
        managed = ManagedOvs(data_dir)
        await nursery.start(managed.run)
        controller = Controller("127.0.0.1", 0)
        port = await nursery.start(controller.run)
        async with open_ovsdb(managed.db_socket) as ovsdb:
            await ovsdb.bridge(bridge_spec("vxlan", managed.datapath_type, f"tcp:127.0.0.1:{port}")).ensure_bridge()
            connection = await controller.wait_connected()

            async def clear_and_count() -> int:
                await connection.send_flow_mods(encode_delete_cookie(0, 0))
                return len(await connection.dump_flows())

            async def bundle() -> None:
                await connection.send_bundle(encode_flow_bundle([(fastpath.Command.ADD, flows)]))

            async def pipelined() -> None:
                await connection.send_flow_mods(encode_flows(flows))

            async def single() -> None:
                for flow in flows:
                    await connection.send_flow_mods(encode_flows([flow]))

            rates: dict[str, float] = {}
            for name, run in (("bundle", bundle), ("pipelined", pipelined), ("single", single)):
                samples = []
                for _ in range(3):
                    assert await clear_and_count() == 0
                    started = time.perf_counter()
                    await run()
                    samples.append(time.perf_counter() - started)
                    installed = len(await connection.dump_flows())
                    if installed != count:
                        raise RuntimeError(f"{name}: {installed} flows on the switch, expected {count}")
                rates[f"flows_per_s_{name}"] = count / statistics.median(samples)
        nursery.cancel_scope.cancel()
    return rates


def measure_flows(count: int) -> dict[str, float]:
    """In a namespace of its own (a netdev OVS must not share the root namespace's tap device), with
    the controller: this script again, inside it."""
    with ovs_sandbox("cdb") as (ns, data_dir):
        done = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, __file__, "--inner-flows", str(count), "--data-dir", str(data_dir)],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=900, check=True,
        )  # fmt: skip
    return dict(json.loads(done.stdout.splitlines()[-1]))


class FlowWatch:
    """`ovs-ofctl monitor` on one node's bridge: records when each awaited text first appears."""

    def __init__(self, ns: str, mgmt: Path):
        control = mgmt.with_name("bench-monitor.ctl")  # ovs-ofctl monitor needs a unixctl socket of its own
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, "ovs-ofctl", "-O", "OpenFlow13", f"--unixctl={control}", "monitor", f"unix:{mgmt}", "watch:!initial"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,  # it prints flow events on stderr
        )  # fmt: skip
        self.seen: dict[str, float] = {}
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.perf_counter()
            with self.changed:
                for token in line.split(","):
                    if token.startswith("tp_dst="):
                        self.seen.setdefault(token.split()[0], now)
                self.changed.notify_all()

    def wait(self, token: str, timeout: float) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: token in self.seen, timeout):
                raise RuntimeError(f"flow with {token} did not appear within {timeout} s")
            return self.seen[token]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def measure_rule_latency(changes: int, endpoints_per_node: int) -> dict[str, float]:
    pods: list[Pod] = []
    with tempfile.TemporaryDirectory(prefix="datapath-bench-") as tmp, cluster_of_nodes(Path(tmp), 3) as nodes:
        # The benchmark talks to the API from the fabric's control bridge.
        fabric = nodes[0].fabric_ns
        assert fabric is not None
        sh("ip", "-n", fabric, "addr", "add", "198.19.0.254/24", "dev", "ctl")
        watches = [FlowWatch(node.ns, node.data / "ovs" / "contivVxlanBridge.mgmt") for node in nodes]
        try:
            client = _client_in(fabric, nodes[0])
            _create_objects(client)
            started = time.perf_counter()
            for node in nodes:
                _add_endpoints(node, endpoints_per_node, pods)
            print(f"{endpoints_per_node} endpoints on each of 3 nodes in {time.perf_counter() - started:.0f} s", flush=True)
            return {**_rule_latencies(client, watches, changes), "endpoints_per_node": endpoints_per_node}
        finally:
            for watch in watches:
                watch.close()
            for pod in pods:
                pod.remove()


def _client_in(fabric: str, node: Node) -> httpx.Client:
    """A client of `node`'s API (https, verified with the cluster CA, with the node's token) from the fabric namespace."""
    from pyroute2 import netns as pyroute_netns

    pyroute_netns.setns(fabric)  # this thread's new sockets live in the fabric namespace
    headers = {"Authorization": f"Bearer {node.token}"}
    return httpx.Client(base_url=node.url() + "/api/v1", headers=headers, timeout=10, verify=ssl.create_default_context(cafile=node.ca_file))


def _create_objects(client: httpx.Client) -> None:
    for path, body in (
        (
            "/networks/default:pods/",
            {"tenantName": "default", "networkName": "pods", "encap": "vxlan", "subnet": POD_SUBNET, "gateway": POD_GATEWAY},
        ),
        ("/policys/default:bench/", {"tenantName": "default", "policyName": "bench"}),
        ("/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "pods", "policies": ["bench"]}),
    ):
        response = client.post(path, json=body)
        response.raise_for_status()


def _add_endpoints(node: Node, count: int, pods: list[Pod]) -> None:
    """`count` pods in group `web` on `node`, through its CNI socket (pods records each namespace, for removal)."""
    config = netconf(node, network="pods", group="web")

    def add(pod: Pod) -> None:
        exchange(str(socket_of(node)), Request("ADD", config, pod.container, pod.netns, "eth0"))  # raises CniError on failure

    created = []
    for _ in range(count):
        created.append(Pod().create())
        pods.append(created[-1])
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, created))


def _rule_latencies(client: httpx.Client, watches: list[FlowWatch], changes: int) -> dict[str, float]:
    latencies = []
    for k in range(changes):
        port = 20000 + k
        rule = {
            "tenantName": "default",
            "policyName": "bench",
            "ruleId": f"r{k}",
            "direction": "in",
            "protocol": "tcp",
            "port": port,
            "action": "allow",
        }
        started = time.perf_counter()
        client.post(f"/rules/default:bench:r{k}/", json=rule).raise_for_status()
        latencies.append(max(watch.wait(f"tp_dst={port}", 30) for watch in watches) - started)
    client.close()
    ordered = sorted(latencies)
    return {
        "rule_to_flows_p50_ms": statistics.median(ordered) * 1000,
        "rule_to_flows_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "rule_to_flows_max_ms": ordered[-1] * 1000,
        "rule_changes": len(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer flows, endpoints and rule changes (well under 120 s)")
    parser.add_argument("--endpoints-per-node", type=int, help="endpoints on each of the 3 nodes during the rule changes (default 250; --quick: 20)")
    parser.add_argument("--inner-flows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner_flows:
        print(json.dumps(trio.run(_measure_flows, args.inner_flows, args.data_dir)))
        return
    count, changes = (2000, 40) if args.quick else (10000, 200)
    figures: dict[str, Any] = {"flows": count}
    figures.update(measure_flows(count))
    print(f"{count} flows: bundle {figures['flows_per_s_bundle']:.0f}/s, pipelined {figures['flows_per_s_pipelined']:.0f}/s, "
          f"single {figures['flows_per_s_single']:.0f}/s ({figures['flows_per_s_bundle'] / figures['flows_per_s_single']:.1f}x)", flush=True)  # fmt: skip
    endpoints = args.endpoints_per_node if args.endpoints_per_node is not None else (20 if args.quick else 250)
    figures.update(measure_rule_latency(changes, endpoints))
    print(
        f"rule -> flows on 3 nodes with {endpoints} endpoints each: p50 {figures['rule_to_flows_p50_ms']:.1f} ms, p99 {figures['rule_to_flows_p99_ms']:.1f} ms",
        flush=True,
    )
    figures["bundle_vs_single"] = figures["flows_per_s_bundle"] / figures["flows_per_s_single"]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

"""What ovs-vswitchd itself costs per pod as its bridge fills up: the floor under CNI ADD.

On machines without the openvswitch kernel module the only datapath is the userspace one
(`datapath_type=netdev`). This measures, at growing port counts on one bridge of contivd's
managed OVS (in a private network namespace, so no other work's link events reach it):

* ``bundle_idle_ms``: one 6-flow bundle (what an incremental attach sends) from contivd's
  OpenFlow session until OVS has committed it, vswitchd idle;
* ``bundle_after_link_event_ms``: the same bundle sent right after a link event in vswitchd's
  namespace (a veth pair created), as happens on every pod attach;
* ``link_event_cpu_ms``: vswitchd CPU time spent because of one such link event (it
  reconfigures every port: OVS's if-notifier), idle polling subtracted;
* ``port_add_ms``: one port added through contivd's OVSDB code (waits for vswitchd's
  reconfiguration, as ovsdbapp does);
* ``idle_cpu_pct``: vswitchd's CPU when nothing happens (the userspace datapath polls every port).

Usage: python3 benchmarks/vswitchd_bench.py [--quick]   (root; Open vSwitch installed)
The last line printed is one JSON object with every figure, keyed by port count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

import fastpath  # noqa: E402
from contivd.agent.datapath import bridge_spec  # noqa: E402
from contivd.ovs import ManagedOvs, PortKind, PortSpec, open_ovsdb  # noqa: E402
from openflow import Controller  # noqa: E402
from openflow.encode import encode_flow_bundle  # noqa: E402
from openflow.flow import Flow  # noqa: E402
from openflow.pipeline import TABLES  # noqa: E402
from tests.support.ovs_netns import ovs_sandbox  # noqa: E402

SAMPLES = 8
SETTLE_TIMEOUT_S = 60.0


def attach_flows(ofport: int) -> list[Flow]:
    """Six flows for one port, the size of an incremental attach."""
    table = TABLES["classifier"]
    return [table.flow(100 + k, {"in_port": ofport}, cookie=ofport * 16 + k, goto="spoof_guard") for k in range(6)]


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


class Vswitchd:
    """CPU time of the running ovs-vswitchd, from /proc (utime + stime, in ms)."""

    def __init__(self, pidfile: Path):
        self.pid = int(pidfile.read_text().strip())
        self.tick_ms = 1000 / os.sysconf("SC_CLK_TCK")

    def cpu_ms(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * self.tick_ms

    async def settle(self) -> float:
        """Wait until vswitchd is back to idle polling; returns its idle CPU rate (ms per s)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        previous = None
        while time.monotonic() < deadline:
            before = self.cpu_ms()
            await trio.sleep(0.5)
            rate = (self.cpu_ms() - before) / 0.5
            if previous is not None and abs(rate - previous) <= 20 and rate < 500:
                return min(rate, previous)
            previous = rate
        raise RuntimeError("ovs-vswitchd did not settle within a minute")


async def _inner(counts: list[int], data_dir: Path) -> dict[str, Any]:
    figures: dict[str, dict[int, float]] = {
        key: {} for key in ("bundle_idle_ms", "bundle_after_link_event_ms", "link_event_cpu_ms", "port_add_ms", "idle_cpu_pct")
    }
    made: list[str] = []
    async with trio.open_nursery() as nursery:
        managed = ManagedOvs(data_dir)
        await nursery.start(managed.run)
        controller = Controller("127.0.0.1", 0)
        port = await nursery.start(controller.run)
        vswitchd = Vswitchd(managed.run_dir / "ovs-vswitchd.pid")
        try:
            async with open_ovsdb(managed.db_socket) as ovsdb:
                bridge = ovsdb.bridge(bridge_spec("vxlan", managed.datapath_type, f"tcp:127.0.0.1:{port}"))
                await bridge.ensure_bridge()
                connection = await controller.wait_connected()
                cookie_base = 1

                async def bundle() -> float:
                    nonlocal cookie_base
                    cookie_base += 1
                    encoded = encode_flow_bundle([(fastpath.Command.ADD, attach_flows(cookie_base))])
                    started = time.perf_counter()
                    await connection.send_bundle(encoded)
                    return (time.perf_counter() - started) * 1000

                def veth(name: str) -> None:
                    sh("ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p")
                    made.append(name)

                for count in counts:
                    bulk = [f"vsb{i}" for i in range(len([m for m in made if m.startswith("vsb")]), count)]
                    for name in bulk:
                        veth(name)
                        sh("ip", "link", "set", name, "up")
                    if bulk:  # one transaction: one reconfiguration for all of them
                        args = [arg for name in bulk for arg in ("--", "add-port", bridge.name, name)]
                        sh("ovs-vsctl", f"--db={managed.db_socket}", *args)
                    idle = await vswitchd.settle()
                    figures["idle_cpu_pct"][count] = idle / 10
                    figures["bundle_idle_ms"][count] = statistics.median([await bundle() for _ in range(SAMPLES)])
                    after, spent = [], []
                    for k in range(SAMPLES // 2):
                        await vswitchd.settle()
                        before, started = vswitchd.cpu_ms(), time.monotonic()
                        veth(f"vse{count}x{k}")
                        after.append(await bundle())
                        await vswitchd.settle()
                        spent.append(vswitchd.cpu_ms() - before - idle * (time.monotonic() - started))
                    figures["bundle_after_link_event_ms"][count] = statistics.median(after)
                    figures["link_event_cpu_ms"][count] = max(0.0, statistics.median(spent))
                    added = []
                    for k in range(SAMPLES // 2):
                        name = f"vsa{count}x{k}"
                        veth(name)
                        await vswitchd.settle()
                        started = time.perf_counter()
                        await bridge.ensure_port(PortSpec(name, PortKind.SYSTEM))
                        added.append((time.perf_counter() - started) * 1000)
                        await bridge.remove_port(name)
                    figures["port_add_ms"][count] = statistics.median(added)
                    print(f"ports={count}: " + ", ".join(f"{key} {values[count]:.1f}" for key, values in figures.items()), flush=True)
        finally:
            for name in made:
                subprocess.run(["ip", "link", "del", name], check=False, capture_output=True)
        nursery.cancel_scope.cancel()
    return {"ports": counts, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0 and 50 ports only (about a minute)")
    parser.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--counts", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(trio.run(_inner, [int(c) for c in args.counts.split(",")], args.inner)))
        return
    counts = [0, 50] if args.quick else [0, 50, 100, 250]
    with ovs_sandbox("cvb") as (ns, data_dir):  # link events of other work on the machine must not reach this vswitchd
        command = ["ip", "netns", "exec", ns, sys.executable, __file__, "--inner", str(data_dir), "--counts", ",".join(map(str, counts))]
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1800, check=True)
    lines = done.stdout.splitlines()
    print("\n".join(lines[:-1]), flush=True)
    print(lines[-1])


if __name__ == "__main__":
    main()

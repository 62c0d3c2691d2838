"""Two nodes (namespaces, each with its own managed OVS) reach each other's pods over a VXLAN
port, using the userspace-tunnelling layout from docs/ovs.md. Forwarding is OVS's NORMAL action
(standalone bridges without a controller): this checks the OVSDB side, not contivd's flows."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio

from contivd.ovs import (
    VXLAN_BRIDGE,
    BridgeSpec,
    ManagedOvs,
    PortKind,
    PortSpec,
    open_ovsdb,
)
from tests.support.ovs_netns import running

from .helpers import POLL_S, sh

pytestmark = pytest.mark.ovs

UNDERLAY = {"a": "198.18.0.1", "b": "198.18.0.2"}
PODS = {"a": "198.19.0.1", "b": "198.19.0.2"}
PHY_BRIDGE = "cvphy"


async def test_pods_on_two_nodes_ping_over_vxlan(data_dir: Path, make_netns: Callable[[str], str]) -> None:
    nodes = {tag: make_netns(tag) for tag in UNDERLAY}
    pods = {tag: make_netns(f"p{tag}") for tag in UNDERLAY}
    # The underlay wire between the two node namespaces, and each pod's veth into its node.
    sh("ip", "link", "add", "ul0", "netns", nodes["a"], "type", "veth", "peer", "name", "ul0", "netns", nodes["b"])
    for tag, node in nodes.items():
        sh("ip", "-n", node, "link", "add", "pod0", "type", "veth", "peer", "name", "eth0", "netns", pods[tag])
        sh("ip", "-n", pods[tag], "addr", "add", f"{PODS[tag]}/24", "dev", "eth0")
        sh("ip", "-n", pods[tag], "link", "set", "eth0", "up")
        for dev in ("ul0", "pod0"):
            sh("ip", "-n", node, "link", "set", dev, "up")

    async with AsyncExitStack() as stack:
        managed_ovs: list[ManagedOvs] = []
        for tag, node in nodes.items():
            managed = await stack.enter_async_context(running(ManagedOvs(data_dir / tag, netns=node)))
            managed_ovs.append(managed)
            db = await stack.enter_async_context(open_ovsdb(managed.db_socket))
            dp = managed.datapath_type
            phy = db.bridge(BridgeSpec(PHY_BRIDGE, datapath_type=dp, fail_mode="standalone"))
            await phy.ensure_bridge()
            await phy.ensure_port(PortSpec("ul0", PortKind.SYSTEM))
            # The VTEP address on the OVS bridge gives OVS's route table the underlay route.
            sh("ip", "-n", node, "addr", "add", f"{UNDERLAY[tag]}/24", "dev", PHY_BRIDGE)
            sh("ip", "-n", node, "link", "set", PHY_BRIDGE, "up")
            br = db.bridge(BridgeSpec(VXLAN_BRIDGE, datapath_type=dp, fail_mode="standalone"))
            await br.ensure_bridge()
            await br.ensure_port(PortSpec("pod0", PortKind.SYSTEM, external_ids={"contiv-endpoint": f"pod-{tag}"}))
            peer = UNDERLAY["b" if tag == "a" else "a"]
            await br.ensure_port(PortSpec.vxlan("vxif0", peer, external_ids={"contiv-vtep": peer}))

        await _wait_ping(pods["a"], PODS["b"])
        await _wait_ping(pods["b"], PODS["a"])
        for managed in managed_ovs:  # the packets really crossed the tunnel ports (live OpenFlow port stats)
            stats = sh("ovs-ofctl", "-O", "OpenFlow13", "dump-ports", managed.management_socket(VXLAN_BRIDGE), "vxif0")
            tx = re.search(r"tx pkts=(\d+)", stats)
            assert tx is not None and int(tx.group(1)) > 0, stats


async def _wait_ping(netns: str, address: str, timeout_s: float = 15.0) -> None:
    argv = ["ip", "netns", "exec", netns, "ping", "-c", "1", "-W", "1", address]
    with trio.move_on_after(timeout_s):
        while (await trio.run_process(argv, capture_stdout=True, check=False)).returncode != 0:
            await trio.sleep(POLL_S)
        return
    raise AssertionError(f"{address} not reachable from {netns} within {timeout_s} s")

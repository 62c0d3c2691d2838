"""ManagedOvs on real Open vSwitch: start, stop by PID, db kept across restarts, crashed daemons
restarted, adoption of daemons left running, isolation inside a network namespace."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from contivd.ovs import BridgeSpec, ManagedOvs, OvsError, PortKind, PortSpec, open_ovsdb
from tests.support.ovs_netns import running

from .helpers import exited, pids, vsctl, wait_for

pytestmark = pytest.mark.ovs


async def test_starts_both_daemons_and_stops_them_by_pid(data_dir: Path, make_netns: Callable[[str], str]) -> None:
    managed = ManagedOvs(data_dir, netns=make_netns("s"))
    async with running(managed):
        started = pids(managed)
        assert all(pid and not exited(pid) for pid in started.values()), started
        stats = managed.statistics()
        assert stats.db_socket == f"unix:{data_dir}/ovs/db.sock"
        assert stats.datapath_type in ("netdev", "system")
        assert {p.name for p in (data_dir / "ovs").iterdir()} >= {"conf.db", "db.sock", "ovsdb-server.log", "ovs-vswitchd.log"}
        assert vsctl(managed, "get", "Open_vSwitch", ".", "cur_cfg") != ""
    for pid in started.values():
        assert pid is not None
        await wait_for(partial(exited, pid), f"pid {pid} to exit")
    assert pids(managed) == {"ovsdb-server": None, "ovs-vswitchd": None}


async def test_restart_keeps_the_database(data_dir: Path, run_id: str, make_netns: Callable[[str], str]) -> None:
    bridge, netns = f"cvb{run_id}", make_netns("r")
    async with running(ManagedOvs(data_dir, netns=netns)) as managed:
        async with open_ovsdb(managed.db_socket) as db:
            br = db.bridge(BridgeSpec(bridge, datapath_type=managed.datapath_type))
            await br.ensure_bridge()
            await br.ensure_port(PortSpec(f"cvi{run_id}", PortKind.INTERNAL, external_ids={"contiv-endpoint": "ep-1"}))
        first = pids(managed)
    async with running(ManagedOvs(data_dir, netns=netns)) as managed:
        assert set(pids(managed).values()).isdisjoint(first.values())
        async with open_ovsdb(managed.db_socket) as db:
            ports = await db.bridge(BridgeSpec(bridge)).list_ports()
        assert [(p.name, p.external_ids) for p in ports] == [(f"cvi{run_id}", {"contiv-endpoint": "ep-1"})]
        assert ports[0].ofport > 0


async def test_killed_vswitchd_is_restarted_and_bridges_come_back(ovs: ManagedOvs, run_id: str) -> None:
    async with open_ovsdb(ovs.db_socket) as db:
        br = db.bridge(BridgeSpec(f"cvb{run_id}", datapath_type=ovs.datapath_type))
        await br.ensure_bridge()
        old = pids(ovs)["ovs-vswitchd"]
        assert old is not None
        os.kill(old, signal.SIGKILL)
        await wait_for(lambda: _restarts(ovs, "ovs-vswitchd") == 1, "ovs-vswitchd to be restarted")
        assert pids(ovs)["ovs-vswitchd"] not in (None, old)
        # The new vswitchd serves the bridges in the kept database and attaches new ports.
        assert await br.ensure_port(PortSpec(f"cvi{run_id}", PortKind.INTERNAL)) > 0


async def test_killed_ovsdb_server_is_restarted(ovs: ManagedOvs) -> None:
    old = pids(ovs)["ovsdb-server"]
    assert old is not None
    os.kill(old, signal.SIGKILL)
    await wait_for(lambda: _restarts(ovs, "ovsdb-server") == 1, "ovsdb-server to be restarted")
    assert vsctl(ovs, "--no-wait", "get", "Open_vSwitch", ".", "_uuid")


async def test_leave_running_lets_the_next_supervisor_adopt_the_daemons(data_dir: Path, make_netns: Callable[[str], str]) -> None:
    netns = make_netns("l")
    async with running(ManagedOvs(data_dir, netns=netns, leave_running=True)) as managed:
        first = pids(managed)
    assert not any(exited(pid) for pid in first.values() if pid)
    async with running(ManagedOvs(data_dir, netns=netns)) as managed:
        assert pids(managed) == first
    for pid in first.values():
        assert pid is not None
        await wait_for(partial(exited, pid), f"adopted pid {pid} to be stopped")


async def test_two_nodes_in_their_namespaces_do_not_collide(
    data_dir: Path, make_netns: Callable[[str], str], make_veth: Callable[..., tuple[str, str]]
) -> None:
    """Two contivd-style nodes, each with the real contiv bridge name and its own OVS."""
    nodes = {tag: ManagedOvs(data_dir / tag, netns=make_netns(tag)) for tag in ("a", "b")}
    async with running(nodes["a"]), running(nodes["b"]):
        assert nodes["a"].db_socket != nodes["b"].db_socket
        for tag, node in nodes.items():
            assert node.netns is not None
            vswitchd = pids(node)["ovs-vswitchd"]
            assert os.stat(f"/proc/{vswitchd}/ns/net").st_ino == os.stat(f"/run/netns/{node.netns}").st_ino
            host_end, _ = make_veth(tag, netns=node.netns)  # visible only inside that node namespace
            async with open_ovsdb(node.db_socket) as db:
                br = db.bridge(BridgeSpec("contivVxlanBridge", datapath_type=node.datapath_type))
                await br.ensure_bridge()
                assert await br.ensure_port(PortSpec(host_end, PortKind.SYSTEM, external_ids={"node": tag})) > 0
        for tag, node in nodes.items():
            assert vsctl(node, "list-br") == "contivVxlanBridge"
            owned = {other: vsctl(node, "--bare", "--columns=name", "find", "Port", f"external_ids:node={other}") for other in nodes}
            assert {other for other, names in owned.items() if names} == {tag}


def _restarts(ovs: ManagedOvs, name: str) -> int:
    return next(d.restarts for d in ovs.statistics().daemons if d.name == name)


async def test_second_userspace_ovs_in_one_namespace_fails_loudly(data_dir: Path, run_id: str, make_netns: Callable[[str], str]) -> None:
    """Both would need the namespace's `ovs-netdev` tap: the loser's bridge never comes up, and
    ensure_bridge says so instead of returning as if it had worked."""
    netns = make_netns("d")
    async with running(ManagedOvs(data_dir / "a", netns=netns)) as first, running(ManagedOvs(data_dir / "b", netns=netns)) as second:
        async with open_ovsdb(first.db_socket) as db:
            await db.bridge(BridgeSpec(f"cva{run_id}", datapath_type=first.datapath_type)).ensure_bridge()
        async with open_ovsdb(second.db_socket, timeout_s=1.0) as db:
            with pytest.raises(OvsError, match=f"bridge cvb{run_id}.*not attached by ovs-vswitchd"):
                await db.bridge(BridgeSpec(f"cvb{run_id}", datapath_type=second.datapath_type)).ensure_bridge()

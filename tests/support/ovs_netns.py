"""Open vSwitch instances that tests and benchmarks start, each in a network namespace of its own.

A userspace-datapath ovs-vswitchd owns a tap device called `ovs-netdev` (and one per bridge and
internal port) in its network namespace. A second one in the same namespace, such as contivd's
managed OVS on the node or another test's, cannot set up its bridges ("ovs-vsctl: Error detected
while setting up ..."). So the daemons run under `ip netns exec` in a namespace made for them;
their unix sockets (database, bridge management, unixctl) live in a private run dir and are
reached from any namespace, so ovs-vsctl, ovs-ofctl and ovs-appctl need no `ip netns exec`.
An OpenFlow controller on TCP must listen inside that namespace (the bridges connect to its
loopback): benchmarks that run one re-execute themselves there (`ovs_sandbox`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import trio

from contivd.ovs import ManagedOvs


@contextmanager
def private_netns(prefix: str) -> Iterator[str]:
    """A new network namespace `<prefix>-<random>` with lo up; deleted on exit."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def kill_ovs_daemons(directory: Path) -> None:
    """SIGKILL every daemon whose pidfile lies under `directory` and whose command line names that
    pidfile (a stale pidfile's PID may belong to someone else's process by now)."""
    for pidfile in directory.glob("**/*.pid"):
        try:
            pid = int(pidfile.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if str(pidfile).encode() in cmdline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@contextmanager
def ovs_sandbox(prefix: str) -> Iterator[tuple[str, Path]]:
    """A fresh namespace and a short data dir (unix socket paths must stay under 108 bytes) for
    OVS daemons started inside the namespace; on exit, whatever happened, the daemons whose
    pidfiles lie under the dir are killed by PID, then the dir and the namespace are removed."""
    with private_netns(prefix) as netns:
        data_dir = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir="/tmp"))
        try:
            yield netns, data_dir
        finally:
            kill_ovs_daemons(data_dir)
            shutil.rmtree(data_dir, ignore_errors=True)


@asynccontextmanager
async def running(ovs: ManagedOvs) -> AsyncIterator[ManagedOvs]:
    """Run `ovs` the way contivd's main does (nursery.start); cancelled, so stopped by PID, on exit."""
    async with trio.open_nursery() as nursery:
        await nursery.start(ovs.run)
        yield ovs
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def private_ovs(prefix: str) -> AsyncIterator[ManagedOvs]:
    """A running ManagedOvs (ovsdb-server + ovs-vswitchd) in an `ovs_sandbox` of its own."""
    with ovs_sandbox(prefix) as (netns, data_dir):
        async with running(ManagedOvs(data_dir, netns=netns)) as ovs:
            yield ovs

"""Fixtures for real-OVS tests: private run dirs, network namespaces and veths, each removed on
every path (even when the test fails) — daemons by the PIDs in their pidfiles. Every OVS runs in
a namespace the test created, so nothing a test makes is visible in the host namespace."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from contivd.ovs import ManagedOvs
from tests.support.ovs_netns import kill_ovs_daemons, running

OVS_BINARIES = ("ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ovs-vsctl", "ovs-appctl", "ip")


@pytest.fixture(autouse=True)
def _needs_root_and_ovs() -> None:
    if os.geteuid() != 0:
        pytest.skip("real-OVS tests need root (network namespaces, veths, OVS daemons)")
    missing = [b for b in OVS_BINARIES if shutil.which(b) is None]
    if missing:
        pytest.skip(f"Open vSwitch / iproute2 binaries missing: {', '.join(missing)}")


@pytest.fixture
def run_id() -> str:
    """Random suffix for every name a test creates, so reruns after a crash never collide."""
    return secrets.token_hex(3)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short private dir (unix socket paths must stay under 108 bytes); on teardown every OVS
    daemon whose pidfile lies under it is killed by PID, then the dir is removed."""
    path = Path(tempfile.mkdtemp(prefix="cvo", dir="/tmp"))
    try:
        yield path
    finally:
        kill_ovs_daemons(path)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_netns(run_id: str) -> Iterator[Callable[[str], str]]:
    """Factory: `make_netns("a")` creates namespace `cvt<run_id>a` with lo up; all deleted after."""
    created: list[str] = []

    def make(tag: str) -> str:
        name = f"cvt{run_id}{tag}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        created.append(name)
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        return name

    try:
        yield make
    finally:
        for name in created:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@pytest.fixture
def make_veth(run_id: str) -> Iterator[Callable[..., tuple[str, str]]]:
    """Factory: `make_veth("a", netns=None)` creates `cv<run_id>a` + peer `cv<run_id>ap`, both up,
    in `netns` if given; deleted after (deleting one end removes the pair)."""
    created: list[tuple[str, str | None]] = []

    def make(tag: str, netns: str | None = None) -> tuple[str, str]:
        host, peer = f"cv{run_id}{tag}", f"cv{run_id}{tag}p"
        prefix = ["ip", "-n", netns] if netns else ["ip"]
        subprocess.run([*prefix, "link", "add", host, "type", "veth", "peer", "name", peer], check=True)
        created.append((host, netns))
        for end in (host, peer):
            subprocess.run([*prefix, "link", "set", end, "up"], check=True)
        return host, peer

    try:
        yield make
    finally:
        for host, netns in created:
            prefix = ["ip", "-n", netns] if netns else ["ip"]
            subprocess.run([*prefix, "link", "del", host], capture_output=True, check=False)


@pytest.fixture
async def ovs(data_dir: Path, make_netns: Callable[[str], str]) -> AsyncIterator[ManagedOvs]:
    """A running ManagedOvs in a namespace of its own, stopped after the test.

    Never in the host namespace: a userspace datapath owns a tap device called `ovs-netdev`
    (and one per bridge and internal port) in its namespace, so it would collide with any other
    OVS there — exactly why contivd runs one managed OVS per node namespace."""
    async with running(ManagedOvs(data_dir, netns=make_netns("o"))) as managed:
        yield managed

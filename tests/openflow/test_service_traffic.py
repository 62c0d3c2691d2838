"""Service flows on a real Open vSwitch bridge (userspace datapath, real conntrack) with real
traffic: three pods on one bridge whose flows and groups are exactly `openflow.desired()` of
their inputs, loaded with ovs-ofctl. A Kubernetes-style service whose backends listen on
different target ports; new connections spread, established ones keep their backend when the
backend leaves the group, and sessionAffinity ClientIP holds through learned flows.

The node-level tests (tests/k8s/test_service_datapath.py) add the agent, the store and VXLAN;
this one pins down what OVS itself does with the pipeline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from openflow.desired import Desired, desired
from openflow.inputs import Backend, LocalPort, NetworkRef, NodeInputs, ServicePort, ServiceSpec, ipv4, mac
from openflow.pipeline import TABLES
from openflow.text import flow_text, group_text
from tests.openflow.ovs_fixture import skip_reason
from tests.support.service_pods import Processes, fetch, processes
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.ovs, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

NETWORK = NetworkRef("pods", "vxlan", 1, 100, ipv4("198.18.20.254", "gateway"))
VIP = "198.18.97.10"
PODS = {"client": ("198.18.20.1", 1), "near": ("198.18.20.2", 2), "far": ("198.18.20.3", 3)}  # name: (ip, ofport)
PORTS = {"near": 8080, "far": 8081}  # each backend's own target port for service port 80


def sh(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30, env=env)
    if done.returncode:
        raise AssertionError(f"{' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


class Bridge:
    """An OVS instance in a namespace of its own with one netdev bridge and the pods on it."""

    def __init__(self, rundir: Path) -> None:
        tag = uuid.uuid4().hex[:6]
        self.ns, self.rundir = f"cdt-{tag}-s", rundir
        self.pods = {name: f"cdt-{tag}-{name}" for name in PODS}
        self.groups: set[int] = set()

    def run(self, *args: str) -> str:
        env = {**os.environ, "OVS_RUNDIR": str(self.rundir), "OVS_DBDIR": str(self.rundir), "OVS_LOGDIR": str(self.rundir)}
        return sh("ip", "netns", "exec", self.ns, *args, env=env)

    def vsctl(self, *args: str) -> str:
        return self.run("ovs-vsctl", f"--db=unix:{self.rundir}/db.sock", "--timeout=15", *args)

    def ofctl(self, *args: str) -> str:
        return self.run("ovs-ofctl", "-O", "OpenFlow13", *args)

    def start(self) -> None:
        sh("ip", "netns", "add", self.ns)
        self.run("ip", "link", "set", "lo", "up")
        db = self.rundir / "conf.db"
        self.run("ovsdb-tool", "create", str(db), "/usr/share/openvswitch/vswitch.ovsschema")
        self.run(
            "ovsdb-server", str(db), f"--remote=punix:{self.rundir}/db.sock", f"--pidfile={self.rundir}/ovsdb-server.pid", "--detach", "--log-file"
        )
        self.vsctl("--no-wait", "init")
        self.run("ovs-vswitchd", f"unix:{self.rundir}/db.sock", f"--pidfile={self.rundir}/ovs-vswitchd.pid", "--detach", "--log-file")
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail_mode=secure", "protocols=OpenFlow13")
        for name, (ip, ofport) in PODS.items():
            pod, host_end = self.pods[name], f"vh{ofport}"
            sh("ip", "netns", "add", pod)
            self.run("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", pod)
            for command in (
                ("ip", "link", "set", "eth0", "address", mac_text(ip)),
                ("ethtool", "-K", "eth0", "tx", "off"),  # the userspace datapath does not fill checksums in
                ("ip", "addr", "add", f"{ip}/24", "dev", "eth0"),
                ("ip", "link", "set", "eth0", "up"),
                ("ip", "link", "set", "lo", "up"),
                ("ip", "route", "add", "default", "via", "198.18.20.254"),
            ):
                sh("ip", "netns", "exec", pod, *command)
            self.run("ip", "link", "set", host_end, "up")
            self.vsctl("add-port", "br0", host_end, "--", "set", "interface", host_end, f"ofport_request={ofport}")

    def program(self, want: Desired) -> None:
        """Make the bridge hold `want`, in the agent's order: groups, then flows, then stale groups."""
        mgmt = f"unix:{self.rundir}/br0.mgmt"
        for group in want.groups:
            self.ofctl("mod-group" if group.group_id in self.groups else "add-group", mgmt, group_text(group))
        flows = self.rundir / "flows.txt"
        flows.write_text("".join(flow_text(f) + "\n" for f in want.flows))
        self.ofctl("--bundle", "replace-flows", mgmt, str(flows))
        wanted = {g.group_id for g in want.groups}
        for stale in self.groups - wanted:
            self.ofctl("del-groups", mgmt, f"group_id={stale}")
        self.groups = wanted

    def dump(self, what: str, *args: str) -> str:
        return self.ofctl(what, f"unix:{self.rundir}/br0.mgmt", *args)

    def stop(self) -> None:
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pidfile = self.rundir / f"{daemon}.pid"
            if pidfile.exists():
                try:
                    os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
                except (ValueError, ProcessLookupError):
                    pass
        for ns in (*self.pods.values(), self.ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def mac_text(ip: str) -> str:
    return "02:02:" + ":".join(f"{int(octet):02x}" for octet in ip.split("."))


def inputs(backends: tuple[str, ...], affinity: int = 0) -> NodeInputs:
    ports = tuple(LocalPort(ofport, name, ipv4(ip, name), mac(mac_text(ip), name), NETWORK, epg=5) for name, (ip, ofport) in PODS.items())
    http = ServicePort(6, 80, tuple(sorted(Backend(ipv4(PODS[b][0], b), PORTS[b]) for b in backends)))
    dns = ServicePort(17, 53, tuple(sorted(Backend(ipv4(PODS[b][0], b), 5353) for b in backends)))
    service = ServiceSpec("k8s:shop/web", ipv4(VIP, "vip"), (http, dns), affinity)
    return NodeInputs("vxlan", local_ports=ports, services=(service,), round=1)


@pytest.fixture
def bridge(tmp_path: Path) -> Iterator[tuple[Bridge, Processes]]:
    switch = Bridge(tmp_path)
    try:
        switch.start()
        with processes() as running:
            for name in PORTS:
                running.serve(switch.pods[name], name, PORTS[name], 5353)
            yield switch, running
    finally:
        switch.stop()


def test_new_connections_spread_established_ones_keep_their_backend(bridge: tuple[Bridge, Processes]) -> None:
    switch, running = bridge
    client = switch.pods["client"]
    switch.program(desired(inputs(("near", "far"))))
    wait_for(lambda: {"near", "far"} <= set(fetch(client, VIP, 80, 10)), 30, "TCP to the VIP to reach both backends")
    udp = set(fetch(client, VIP, 53, 10, "udp"))  # one client's datagrams hash to one backend (docs/pipeline.md)
    assert len(udp) == 1 and udp <= {"near", "far"}, f"UDP answered by {udp}"
    held = running.hold(client, VIP, 80, "far")
    switch.program(desired(inputs(("near",))))
    assert set(fetch(client, VIP, 80, 20)) == {"near"}, "no new connection reaches the backend that left"
    assert held.ask() == "far", "the established connection kept its backend (conntrack)"
    switch.program(desired(inputs(())))
    assert set(fetch(client, VIP, 80, 3)) == {"-"}, "a service without backends answers nothing"


def test_session_affinity_learns_the_client_backend_and_forgets_one_that_left(bridge: tuple[Bridge, Processes]) -> None:
    switch, _ = bridge
    client = switch.pods["client"]
    switch.program(desired(inputs(("near", "far"), affinity=600)))
    first = wait_for(lambda: next(iter(set(fetch(client, VIP, 80, 1)) - {"-"}), None), 30, "the VIP to answer")
    answers = fetch(client, VIP, 80, 20)
    assert set(answers) == {first}, f"affinity did not hold: {answers}"
    learned = switch.dump("dump-flows", f"table={TABLES['session_affinity'].id}")
    assert "idle_timeout=600" in learned and "nw_src=198.18.20.1" in learned, learned
    other = "near" if first == "far" else "far"
    switch.program(desired(inputs((other,), affinity=600)))
    assert set(fetch(client, VIP, 80, 10)) == {other}, "a learned backend that left the service is not used"
    assert "udp" not in learned, "only the port the client used was learned"

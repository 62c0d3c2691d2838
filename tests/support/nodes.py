"""Test nodes on real Open vSwitch: each contivd node in its own network namespace with its
managed OVS (userspace datapath), pods as namespaces with veths, and a fabric namespace whose
Linux bridges join the nodes' control, VXLAN-underlay and VLAN-uplink links.

Shared by the node agent and CNI tests. Everything here cleans up by PID and by name.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import terminate
from tests.support.waiting import free_ports

CALL = (
    # Accept: application/json: contivd's typed errors (4xx + JSON), not Contiv's 500 + text (Decision 1);
    # argv[5]: the CA file https:// answers are verified against; argv[6]: the unix socket to call over, if any
    "import httpx,json,ssl,sys; h={'Accept': 'application/json'} | ({'Authorization': 'Bearer '+sys.argv[4]} if sys.argv[4] else {});"
    " t=httpx.HTTPTransport(uds=sys.argv[6]) if sys.argv[6] else None;"
    " r=httpx.Client(transport=t, timeout=10, verify=ssl.create_default_context(cafile=sys.argv[5]) if sys.argv[5] else True).request(sys.argv[1], sys.argv[2], content=sys.argv[3].encode(), headers=h);"
    " print(json.dumps([r.status_code, r.text]))"
)


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=30)


class Node:
    """One contivd node in its own network namespace, with its pods' namespaces."""

    def __init__(self, root: Path, name: str = "node1", host: str = "127.0.0.1", token: str = ""):
        tag = uuid.uuid4().hex[:6]
        self.name, self.host, self.token = name, host, token
        self.ns, self.pods = f"cdt-{tag}-n", [f"cdt-{tag}-p1", f"cdt-{tag}-p2"]
        self.api, self.raft, self.agent = free_ports(3)
        self.data = root / name
        self.socket = self.data / "run" / "api.sock"  # the API for root on the node: admin without a token
        self.proc: subprocess.Popen[bytes] | None = None
        self.fabric_ns: str | None = None  # set when plugged into a Fabric

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.raft}"

    @property
    def ca_file(self) -> Path:
        """The cluster CA this node was issued its certificate by (contivd writes it on start)."""
        return self.data / "tls" / "ca.crt"

    def url(self, port: int | None = None, host: str | None = None) -> str:
        """A listener's base URL: https off loopback (contivd serves TLS there), http on it."""
        host = host or self.host
        scheme = "http" if ipaddress.ip_address(host).is_loopback else "https"
        return f"{scheme}://{host}:{port or self.api}"

    def api_call(
        self, method: str, path: str, body: Any = None, port: int | None = None, token: str | None = None, host: str | None = None
    ) -> tuple[int, Any]:
        """Call, from this node's namespace, the node's API (or another port, e.g. the agent's; or another host).
        Without a token, the node's own API is called over its socket, as root on the node does."""
        token = self.token if token is None else token
        uds = str(self.socket) if port is None and host is None and not token else ""
        url = ("http://contivd" if uds else self.url(port, host)) + path
        payload = json.dumps(body) if body is not None else ""
        verify = str(self.ca_file) if url.startswith("https") else ""
        out = sh("ip", "netns", "exec", self.ns, sys.executable, "-c", CALL, method, url, payload, token, verify, uds, check=False)
        if out.returncode:
            return 0, out.stderr[-300:]
        status, text = json.loads(out.stdout)
        return status, json.loads(text) if text.strip().startswith(("{", "[", '"')) else text

    @property
    def agent_socket(self) -> Path:
        """The agent API's root-only unix socket (its TCP port answers the netmaster's signed calls only)."""
        return self.data / "agent.sock"

    def agent_call(self, method: str, path: str) -> tuple[int, Any]:
        """Call the node's agent API as root on the node does: over its unix socket."""
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(self.agent_socket)), timeout=10) as client:
            answer = client.request(method, "http://agent" + path, headers={"Accept": "application/json"})
        return answer.status_code, answer.json()

    @property
    def openflow_socket(self) -> Path:
        """The OpenFlow controller's socket (--openflow-listen's default: in the managed OVS's run directory)."""
        return self.data / "ovs" / "contivd" / "openflow.sock"

    def create_namespace(self) -> None:
        sh("ip", "netns", "add", self.ns)
        sh("ip", "netns", "exec", self.ns, "ip", "link", "set", "lo", "up")

    def start(self, *extra: str, follower: bool = False) -> None:
        """Start contivd: a Raft member on raft_address, or (`follower`) a follower of the store."""
        role = ["--follower"] if follower else ["--raft-listen", self.raft_address]
        args = ["ip", "netns", "exec", self.ns, sys.executable, "-m", "contivd", "run", "--node-name", self.name,
                "--datapath", "ovs", "--ovs", "managed", "--data-dir", str(self.data),
                "--api-listen", f"{self.host}:{self.api}", *role,
                "--agent-listen", f"{self.host}:{self.agent}", "--agent-socket", "agent.sock", "--cni-socket", "cni.sock",
                "--api-socket", str(self.socket), *extra]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
        self.data.mkdir(parents=True, exist_ok=True)
        self.log = open(self.data / "contivd.log", "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def bootstrap_token(self, name: str, role: str = "admin") -> str:
        """A token minted as root does on a node (`contivd auth bootstrap`, signed with the
        cluster secret); retried until the cluster has a leader to write it."""
        # The node's data dir: the bootstrap verifies the node's https API with the CA kept there.
        args = ["ip", "netns", "exec", self.ns, sys.executable, "-m", "contivd", "auth", "bootstrap", name, "--role", role,
                "--api-listen", f"{self.host}:{self.api}", "--control-ip", self.host, "--cluster-secret", SECRET,
                "--data-dir", str(self.data)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}

        def mint() -> str | None:
            out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
            return out.stdout.strip() if out.returncode == 0 else None

        return str(wait_until(mint, 60, f"`contivd auth bootstrap {name}` to succeed", self))

    def ovs_vsctl(self, *args: str) -> None:
        sh("ip", "netns", "exec", self.ns, "ovs-vsctl", f"--db=unix:{self.data / 'ovs' / 'db.sock'}", *args)

    def stop(self) -> None:
        terminate(self.proc)
        for daemon in ("ovs-vswitchd", "ovsdb-server"):  # whatever outlived contivd, by PID
            pidfile = self.data / "ovs" / f"{daemon}.pid"
            if pidfile.exists():
                try:
                    os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
                except (ValueError, ProcessLookupError):
                    pass
        for ns in (*self.pods, self.ns):
            sh("ip", "netns", "del", ns, check=False)
        if getattr(self, "log", None):
            self.log.close()

    def log_text(self) -> str:
        return (self.data / "contivd.log").read_text(errors="replace")[-4000:]


def leader_of(nodes: list[Node]) -> Node | None:
    """The running node that says it leads (None while there is no leader)."""
    for node in nodes:
        if node.proc is not None and node.proc.poll() is None:
            status, info = node.api_call("GET", "/info")
            if status == 200 and info.get("current-state") == "leader":
                return node
    return None


def reaches(pod: str, address: str) -> bool:
    """One ping from a pod namespace, answered within a second."""
    return sh("ip", "netns", "exec", pod, "ping", "-c", "1", "-W", "1", address, check=False).returncode == 0


def wait_until(check: Any, timeout: float, what: str, node: Node) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n--- contivd log ---\n{node.log_text()}")


def metric_value(node: Node, name: str, labels: dict[str, str]) -> float:
    """One series of the node's /metrics (0 when absent); its labels in any order."""
    status, text = node.api_call("GET", "/metrics")
    assert status == 200, text
    wanted = "".join(f'(?=[^}}]*{key}="{re.escape(value)}")' for key, value in labels.items())
    found = re.search(rf"^{name}{{{wanted}[^}}]*}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def settled(read: Any, what: str, node: Node, reads: int = 30) -> Any:
    """`read()` once two reads a second apart agree: OVS updates flow statistics lazily, so a
    counter read right after the traffic may still move."""
    last = read()
    for _ in range(reads):
        time.sleep(1)
        now = read()
        if now == last:
            return now
        last = now
    raise AssertionError(f"{what} did not settle: {last}\n--- contivd log ---\n{node.log_text()}")


def attach_pod(node: Node, index: int, endpoint: dict[str, Any], bridge: str = "contivVxlanBridge", prefix: int = 24) -> None:
    pod, host_end, pod_end = node.pods[index], f"vh{index}", f"vc{index}"
    sh("ip", "netns", "add", pod)
    sh("ip", "netns", "exec", node.ns, "ip", "link", "add", host_end, "type", "veth", "peer", "name", pod_end, "netns", pod)
    sh("ip", "netns", "exec", pod, "ip", "link", "set", pod_end, "address", endpoint["macAddress"])
    # The userspace datapath forwards veth frames as they are: with TX checksum offload the
    # kernel would leave TCP checksums unfilled and the receiving pod would drop the segments.
    sh("ip", "netns", "exec", pod, "ethtool", "-K", pod_end, "tx", "off")
    sh("ip", "netns", "exec", pod, "ip", "addr", "add", f"{endpoint['ipAddress']}/{prefix}", "dev", pod_end)
    sh("ip", "netns", "exec", pod, "ip", "link", "set", pod_end, "up")
    sh("ip", "netns", "exec", pod, "ip", "link", "set", "lo", "up")
    sh("ip", "netns", "exec", node.ns, "ip", "link", "set", host_end, "up")
    node.ovs_vsctl("add-port", bridge, host_end, "--", "set", "port", host_end, f"external_ids:contivd-endpoint={endpoint['id']}")


SECRET = "datapath-test-secret"
FABRIC_BRIDGES = {"ctl0": "ctl", "ul0": "ul", "vl0": "vl"}  # node link -> fabric bridge


class Fabric:
    """A namespace of Linux bridges joining the nodes: `ctl` carries Raft and the API, `ul` the
    VXLAN underlay, `vl` the VLAN uplinks (a Linux bridge without VLAN filtering passes tagged
    frames as they are, like a trunk)."""

    def __init__(self) -> None:
        self.ns = f"cdt-{uuid.uuid4().hex[:6]}-f"

    def create(self) -> None:
        sh("ip", "netns", "add", self.ns)
        for bridge in FABRIC_BRIDGES.values():
            sh("ip", "-n", self.ns, "link", "add", bridge, "type", "bridge")
            sh("ip", "-n", self.ns, "link", "set", bridge, "up")

    def plug(self, node: Node, index: int) -> None:
        """Give `node` its three links (ctl0 addressed with the node's control IP)."""
        node.fabric_ns = self.ns
        for link, bridge in FABRIC_BRIDGES.items():
            far = f"{bridge}{index}"
            sh("ip", "link", "add", link, "netns", node.ns, "type", "veth", "peer", "name", far, "netns", self.ns)
            sh("ip", "-n", self.ns, "link", "set", far, "master", bridge, "up")
            sh("ip", "-n", node.ns, "link", "set", link, "up")
        sh("ip", "-n", node.ns, "addr", "add", f"{node.host}/24", "dev", "ctl0")

    def destroy(self) -> None:
        sh("ip", "netns", "del", self.ns, check=False)


def vtep_of(index: int) -> str:
    return f"198.18.100.{index + 1}"


def add_underlay(node: Node, vtep: str) -> None:
    """With the userspace datapath the VTEP address must sit on an OVS bridge holding the
    underlay port (shared/ovs-userspace.md): `cvphy`, standalone, with ul0 in it."""
    node.ovs_vsctl("--may-exist", "add-br", "cvphy", "--", "set", "bridge", "cvphy", "datapath_type=netdev", "fail_mode=standalone")
    node.ovs_vsctl("--may-exist", "add-port", "cvphy", "ul0")
    sh("ip", "-n", node.ns, "addr", "add", f"{vtep}/24", "dev", "cvphy")
    sh("ip", "-n", node.ns, "link", "set", "cvphy", "up")


def start_member(node: Node, index: int, voters: list[Node], *extra: str, readonly: bool = False) -> None:
    """Start contivd on the `index`th node of a cluster_of_nodes (also to start it again with
    other options): a voter if it is among `voters`, else a follower of the store (`readonly`:
    started with --readonly, the deprecated alias, and its --raft-listen, as such nodes ran)."""
    peers = ",".join(other.raft_address for other in voters if other is not node)
    common = ("--peers", peers, "--cluster-secret", SECRET, "--control-ip", node.host, "--vtep-ip", vtep_of(index))
    if node in voters or readonly:
        node.start(*common, *(("--readonly",) if readonly else ()), *extra)
    else:
        node.start(*common, *extra, follower=True)


@contextmanager
def cluster_of_nodes(
    root: Path,
    count: int,
    *extra: str,
    followers: int = 0,
    readonly: int = 0,
    prepare: Callable[[list[Node]], None] | None = None,
) -> Iterator[list[Node]]:
    """`count` nodes on one fabric, each with a VXLAN underlay and `vl0` as its VLAN uplink
    link; yields them once every API answers. The last `followers + readonly` of them are
    followers of the store (never leaders; the last `readonly` started with the deprecated
    --readonly), the others vote. `prepare` runs once the nodes' namespaces exist,
    before any contivd starts (what the nodes must find from their first moment, e.g. the API
    server's relay). Stops every node and removes every namespace."""
    fabric = Fabric()
    nodes = [Node(root, f"node-{i + 1}", f"198.19.0.{i + 1}") for i in range(count)]
    voters = nodes[: count - followers - readonly]
    try:
        fabric.create()
        for index, node in enumerate(nodes):
            node.create_namespace()
            fabric.plug(node, index)
        if prepare is not None:
            prepare(nodes)
        for index, node in enumerate(nodes):
            start_member(node, index, voters, *extra, readonly=index >= count - readonly)
        token = nodes[0].bootstrap_token("tests-admin")  # the nodes' callers are other hosts: they need a token
        for index, node in enumerate(nodes):
            node.token = token
            wait_until(lambda n=node: n.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 60, f"{node.name}'s API", node)
            add_underlay(node, vtep_of(index))
        yield nodes
    finally:
        for node in nodes:
            node.stop()
        fabric.destroy()

"""Driving the `contiv` CNI plugin as a container runtime does, and checking what a node holds.

The plugin runs as the executable packaging builds (packaging/build-cni-plugin.sh, for this
interpreter, with its code in a temporary directory instead of /usr/lib/contivd), with the CNI environment and the network config on stdin; pod namespaces are
`ip netns` namespaces given by path (/var/run/netns/<name>). Each node's CNI
socket lives in its data dir (`--cni-socket cni.sock`), so parallel runs never share one.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contivd.agent.hostnet import HOST_PORT_NAMES
from tests.support.nodes import Node, sh, wait_until

ROOT = Path(__file__).resolve().parents[2]
SOCKET_NAME = "cni.sock"


@functools.cache
def plugin_executable() -> Path:
    """The `contiv` plugin as installed: built once per process, removed at exit."""
    directory = Path(tempfile.mkdtemp(prefix="contiv-cni-"))
    atexit.register(shutil.rmtree, directory, True)
    plugin, libdir = directory / "bin" / "contiv", directory / "lib"
    subprocess.run(["bash", str(ROOT / "packaging" / "build-cni-plugin.sh"), str(plugin), str(libdir), sys.executable], check=True, timeout=60)
    return plugin


def socket_of(node: Node) -> Path:
    return node.data / SOCKET_NAME


def netconf(node: Node, **extra: Any) -> dict[str, Any]:
    return {"cniVersion": "1.0.0", "name": "contiv", "type": "contiv", "socket": str(socket_of(node)), **extra}


@dataclass
class Outcome:
    status: int
    output: Any  # the parsed JSON printed on stdout, or None when nothing was printed

    @property
    def code(self) -> int:
        return int(self.output["code"]) if isinstance(self.output, dict) and "code" in self.output else 0


def run_plugin(
    command: str, config: Any, *, container: str = "", netns: str = "", ifname: str = "eth0", args: str = "", drop: tuple[str, ...] = ()
) -> Outcome:
    """One plugin invocation. `config` is JSON-encoded unless it is already bytes; `drop` removes env vars."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container,
        "CNI_NETNS": netns,
        "CNI_IFNAME": ifname,
        "CNI_ARGS": args,
        "CNI_PATH": "/opt/cni/bin",
    }
    for name in drop:
        env.pop(name, None)
    stdin = config if isinstance(config, bytes) else json.dumps(config).encode()
    done = subprocess.run([str(plugin_executable())], input=stdin, env=env, capture_output=True, timeout=150)
    text = done.stdout.decode().strip()
    return Outcome(done.returncode, json.loads(text) if text else None)


@dataclass
class Pod:
    """A pod's network namespace, as a runtime creates it before calling ADD."""

    name: str = field(default_factory=lambda: f"cdt-{uuid.uuid4().hex[:6]}-c")
    container: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def netns(self) -> str:
        return f"/var/run/netns/{self.name}"

    def create(self) -> Pod:
        sh("ip", "netns", "add", self.name)
        return self

    def remove(self) -> None:
        sh("ip", "netns", "del", self.name, check=False)

    def add(self, node: Node, **config: Any) -> Outcome:
        return run_plugin("ADD", netconf(node, **config), container=self.container, netns=self.netns)

    def delete(self, node: Node, **config: Any) -> Outcome:
        return run_plugin("DEL", netconf(node, **config), container=self.container, netns=self.netns)

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", self.name, *command, check=False)


HOST_PORTS = frozenset(HOST_PORT_NAMES.values())  # the bridges' own ports into the node (host access), not a pod's


@dataclass(frozen=True)
class Holdings:
    """What a node holds that CNI calls create: veths, bridge ports, endpoints, allocated addresses."""

    veths: frozenset[str]
    ports: frozenset[str]
    endpoints: frozenset[str]
    allocated: tuple[tuple[str, str], ...]


GETS = (  # argv[3]: the CA file an https:// API is verified against
    "import httpx,json,ssl,sys; h={'Authorization': 'Bearer '+sys.argv[2]} if sys.argv[2] else {}; v=ssl.create_default_context(cafile=sys.argv[3]) if sys.argv[3] else True;"
    " print(json.dumps([httpx.get(sys.argv[1] + p, headers=h, timeout=10, verify=v).json() for p in sys.argv[4:]]))"
)


def api_gets(node: Node, *paths: str) -> list[Any]:
    """Several GETs on the node's API in one process (Node.api_call starts one per call)."""
    verify = str(node.ca_file) if node.url().startswith("https") else ""
    out = sh("ip", "netns", "exec", node.ns, sys.executable, "-c", GETS, node.url(), node.token, verify, *paths)
    answers: list[Any] = json.loads(out.stdout)
    return answers


def holdings(node: Node, networks: tuple[str, ...]) -> Holdings:
    links = sh("ip", "-n", node.ns, "-o", "link", "show").stdout
    names = (line.split(":")[1].strip().split("@")[0] for line in links.splitlines())
    veths = frozenset(name for name in names if name.startswith(("cv", "cp")) and name not in HOST_PORTS)
    db = f"--db=unix:{node.data / 'ovs' / 'db.sock'}"
    listed = sh("ip", "netns", "exec", node.ns, "ovs-vsctl", db, "list-ports", "contivVxlanBridge").stdout.split()
    debug, *inspects = api_gets(node, "/debug/ofnet", *(f"/api/v1/inspect/networks/default:{network}/" for network in networks))
    endpoints = frozenset(ep for ep, state in debug["EndpointDb"].items() if state["homingHost"] == node.name)
    allocated = tuple((network, inspect["Oper"].get("allocatedIPAddresses", "")) for network, inspect in zip(networks, inspects, strict=True))
    return Holdings(veths, frozenset(p for p in listed if not p.startswith("vx") and p not in HOST_PORTS), endpoints, allocated)


def create_network(node: Node, name: str, subnet: str, gateway: str = "") -> None:
    body = {"tenantName": "default", "networkName": name, "encap": "vxlan", "subnet": subnet}
    if gateway:
        body["gateway"] = gateway
    status, answer = node.api_call("POST", f"/api/v1/networks/default:{name}/", body)
    assert status == 200, answer


def deny_all_group(node: Node, group: str, network: str) -> None:
    """Group `group` on `network` under a policy that denies every incoming connection."""
    objects = [
        (f"/api/v1/policys/default:{group}/", {"tenantName": "default", "policyName": group}),
        (f"/api/v1/rules/default:{group}:deny-in/", {"tenantName": "default", "policyName": group, "ruleId": "deny-in", "direction": "in", "action": "deny", "priority": 1}),
        (f"/api/v1/endpointGroups/default:{group}/", {"tenantName": "default", "groupName": group, "networkName": network, "policies": [group]}),
    ]  # fmt: skip
    for path, body in objects:
        status, answer = node.api_call("POST", path, body)
        assert status == 200, answer


def set_private_subnet(node: Node, subnet: str) -> None:
    """The global pvtSubnet (host access's node-side addresses), the rest of the global object kept."""
    status, glob = node.api_call("GET", "/api/v1/globals/global/")
    assert status == 200, glob
    body = {k: v for k, v in glob.items() if k not in ("key", "link-sets", "links")} | {"pvtSubnet": subnet}
    status, answer = node.api_call("POST", "/api/v1/globals/global/", body)
    assert status == 200, answer


def no_preparation(node: Node) -> None:
    """The default of cni_node's `prepare`: a bare namespace is enough."""


@contextmanager
def cni_node(node: Node, *args: str, prepare: Callable[[Node], None] = no_preparation) -> Iterator[Node]:
    """`node` running in its own namespace with its API and CNI server answering; stopped at the end
    (contivd and OVS by PID, its namespaces) even when starting it failed. `prepare` runs in the
    fresh namespace before contivd starts (addresses, servers contivd must find)."""
    try:
        node.create_namespace()
        prepare(node)
        node.start(*args)
        wait_until(lambda: node.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 40, "the node's API", node)
        wait_until(lambda: run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0, 40, "the CNI server", node)
        yield node
    finally:
        node.stop()


def new_pod(pods: list[Pod]) -> Pod:
    """A pod namespace, removed with the `pods` fixture's list at the end of the test."""
    pod = Pod().create()
    pods.append(pod)
    return pod

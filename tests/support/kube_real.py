"""A real Kubernetes control plane for tests and benchmarks: ../shared/kube-apiserver's `k8s-up`
(etcd, kube-apiserver v1.24, kube-controller-manager, all on the root namespace's loopback) and
contivd nodes (tests/support/nodes.py) that reach it through a relay listening on each node's own
127.0.0.1 (tests/support/tcp_relay.py), so one kubeconfig serves the tests and every node.

There is no kubelet: `RealCluster.add_pod` does its part — the Pod through the API, the CNI ADD
through the `contiv` plugin with the pod's Kubernetes name, then the status (podIP = the address
the ADD gave, Running, Ready) through the status subresource. The real controller manager then
writes the EndpointSlices of Services with selectors.

Everything started is stopped whatever happens: `k8s-down`, then any of its processes still alive
killed by PID; the relay by PID; the nodes by cluster_of_nodes.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client as kube

from tests.support.cni_harness import Pod, netconf, run_plugin
from tests.support.nodes import Node, cluster_of_nodes
from tests.support.service_pods import Processes, processes, stop

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "kube-apiserver"
ETCD_OFFSET = 17347  # k8s-up: etcd's client port is API_PORT + 17347, its peer port + 17357
POD_NETWORK = "pods"


def unavailable() -> str:
    """Why the real control plane cannot run here ('' when it can)."""
    if not (SHARED / "k8s-up").exists():
        return f"the real kube-apiserver is not beside the repository ({SHARED})"
    if os.geteuid() != 0:
        return "needs root (network namespaces; k8s-up installs etcd-server when it is missing)"
    return ""


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def control_plane_port() -> int:
    """An API port whose etcd ports (k8s-up derives them) are free too: below the ephemeral
    range, so that API_PORT + 17357 stays a port."""
    for _ in range(200):
        port = random.randint(20000, 30000)
        if all(_bindable(p) for p in (port, port + ETCD_OFFSET, port + ETCD_OFFSET + 10)):
            return port
    raise RuntimeError("no free port for the Kubernetes control plane")


class ControlPlane:
    """One `k8s-up` directory: start, stop, restart (etcd's data stays in the directory), the
    official client on it, and etcd compaction."""

    def __init__(self, directory: Path, port: int, service_cidr: str):
        self.directory, self.port, self.service_cidr = directory, port, service_cidr
        self._api: kube.ApiClient | None = None

    @property
    def kubeconfig(self) -> Path:
        """For contivd: verifies the API server's self-signed certificate (a kubeconfig skipping
        verification would make the client warn on every request)."""
        return self.directory / "contivd.kubeconfig"

    def up(self, apiserver_flags: str = "") -> None:
        env = os.environ | {"K8S_APISERVER_FLAGS": apiserver_flags}
        done = subprocess.run(
            [str(SHARED / "k8s-up"), str(self.directory), str(self.port), self.service_cidr], env=env, capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            self.down()
            raise RuntimeError(f"k8s-up failed: {done.stderr}\n{self.log_tail()}")
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters: [{{name: test, cluster: {{server: 'https://127.0.0.1:{self.port}', certificate-authority: '{self.certificate}'}}}}]\n"
            f"users: [{{name: admin, user: {{token: '{self.token}'}}}}]\n"
            "contexts: [{name: test, context: {cluster: test, user: admin}}]\n"
        )
        self.kubeconfig.chmod(0o600)

    def down(self) -> None:
        """`k8s-down`, then whatever of its processes outlived it (by PID, if still ours)."""
        pids = self._pids()
        subprocess.run([str(SHARED / "k8s-down"), str(self.directory)], capture_output=True, timeout=120)
        for pid in pids:
            try:
                if str(self.directory) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass

    def _pids(self) -> list[int]:
        listed = self.directory / "pids"
        return [int(line.split()[1]) for line in listed.read_text().splitlines() if line.strip()] if listed.exists() else []

    @property
    def token(self) -> str:
        return (self.directory / "token").read_text().strip()

    @property
    def certificate(self) -> Path:
        return self.directory / "certs" / "apiserver.crt"

    @property
    def api(self) -> kube.ApiClient:
        if self._api is None:
            config = kube.Configuration()
            config.host = f"https://127.0.0.1:{self.port}"
            config.api_key = {"authorization": f"Bearer {self.token}"}
            config.ssl_ca_cert = str(self.certificate)
            self._api = kube.ApiClient(config)
        return self._api

    @property
    def core(self) -> kube.CoreV1Api:
        return kube.CoreV1Api(self.api)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (etcd's JSON gateway, as `etcdctl
        compact` does): a watch resuming from an older resourceVersion can only get 410."""
        base = f"http://127.0.0.1:{self.port + ETCD_OFFSET}/v3/kv"
        revision = int(httpx.post(f"{base}/range", json={"key": "AA=="}, timeout=10).json()["header"]["revision"])
        httpx.post(f"{base}/compaction", json={"revision": revision, "physical": True}, timeout=30).raise_for_status()
        return revision

    def log_tail(self) -> str:
        logs = (self.directory / name for name in ("apiserver.log", "controller-manager.log", "etcd.log"))
        return "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-2000:]}" for log in logs if log.exists())


@contextmanager
def control_plane(directory: Path, service_cidr: str, apiserver_flags: str = "", identity_of: ControlPlane | None = None) -> Iterator[ControlPlane]:
    """A control plane in `directory`, stopped at the end whatever happens. With `identity_of`,
    it takes that plane's token and serving certificate, so one kubeconfig is good for both
    (benchmarks/k8s_bench.py moves the nodes from one to the other)."""
    plane = ControlPlane(directory, control_plane_port(), service_cidr)
    if identity_of is not None:
        shutil.copytree(identity_of.directory / "certs", directory / "certs")
        shutil.copy2(identity_of.directory / "token", directory / "token")
    try:
        plane.up(apiserver_flags)
        yield plane
    finally:
        plane.down()
        # ~190 MB of executables and etcd data per run; the logs stay for whoever reads a failure
        for executable in ("kube-apiserver", "kube-controller-manager"):
            (directory / executable).unlink(missing_ok=True)
        shutil.rmtree(directory / "etcd", ignore_errors=True)


# Objects as a kubelet-less cluster needs them.


def ensure_namespace(plane: ControlPlane, name: str, **labels: str) -> None:
    try:
        plane.core.create_namespace({"metadata": {"name": name, "labels": labels}})
    except kube.ApiException as exc:
        if exc.status != 409:
            raise


def create_node(plane: ControlPlane, name: str) -> None:
    """The Node object the EndpointSlice controller wants for every pod's spec.nodeName."""
    plane.core.create_node({"metadata": {"name": name}})


def create_pod(plane: ControlPlane, namespace: str, name: str, node: str, labels: dict[str, str], ports: list[dict[str, Any]]) -> None:
    container = {"name": "main", "image": "none", "ports": ports}
    plane.core.create_namespaced_pod(namespace, {"metadata": {"name": name, "labels": labels}, "spec": {"nodeName": node, "containers": [container]}})


def set_pod_running(plane: ControlPlane, namespace: str, name: str, ip: str) -> None:
    """What the kubelet would write: the pod's address, Running, Ready."""
    ready = [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]
    status = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": ready}
    plane.core.patch_namespaced_pod_status(name, namespace, {"status": status})


def relabel_pod(plane: ControlPlane, namespace: str, name: str, labels: dict[str, str]) -> None:
    """The pod's labels become exactly `labels` (a merge patch drops the others by nulling them)."""
    current = plane.core.read_namespaced_pod(name, namespace).metadata.labels or {}
    patch: dict[str, str | None] = {key: None for key in current if key not in labels} | labels
    plane.core.patch_namespaced_pod(name, namespace, {"metadata": {"labels": patch}})


def apply_object(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    """Create a namespaced Service or EndpointSlice, or replace it (a Service keeps its cluster
    IP unless `obj` names one); the object as stored."""
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    if obj["kind"] == "Service":
        core = plane.core
        create, read, replace = core.create_namespaced_service, core.read_namespaced_service, core.replace_namespaced_service
    else:
        discovery = kube.DiscoveryV1Api(plane.api)
        create = discovery.create_namespaced_endpoint_slice
        read, replace = discovery.read_namespaced_endpoint_slice, discovery.replace_namespaced_endpoint_slice
    try:
        stored = create(namespace, obj)
    except kube.ApiException as exc:
        if exc.status != 409:
            raise
        current = read(name, namespace)
        body = {**obj, "metadata": {**obj["metadata"], "resourceVersion": current.metadata.resource_version}}
        if obj["kind"] == "Service":
            body["spec"] = {"clusterIP": current.spec.cluster_ip} | obj["spec"]
        stored = replace(name, namespace, body)
    answer: dict[str, Any] = plane.api.sanitize_for_serialization(stored)
    return answer


def apply_service(plane: ControlPlane, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Create the Service, or replace its spec (the cluster IP kept); the Service as stored."""
    return apply_object(plane, {"kind": "Service", "apiVersion": "v1", "metadata": {"namespace": namespace, "name": name}, "spec": spec})


def delete_service(plane: ControlPlane, namespace: str, name: str) -> None:
    plane.core.delete_namespaced_service(name, namespace)


def apply_network_policy(plane: ControlPlane, namespace: str, name: str, spec: dict[str, Any]) -> None:
    kube.NetworkingV1Api(plane.api).create_namespaced_network_policy(namespace, {"metadata": {"name": name}, "spec": spec})


def ready_addresses(plane: ControlPlane, namespace: str, service: str) -> set[str]:
    """The ready endpoint addresses of the Service's EndpointSlices (written by the controller manager)."""
    slices = kube.DiscoveryV1Api(plane.api).list_namespaced_endpoint_slice(namespace, label_selector=f"kubernetes.io/service-name={service}")
    return {
        address
        for piece in slices.items
        for endpoint in piece.endpoints or []
        if endpoint.conditions is None or endpoint.conditions.ready is not False
        for address in endpoint.addresses
    }


@dataclass
class KubePod:
    node: Node
    namespace: str
    name: str
    netns: Pod
    ip: str


@dataclass
class RealCluster:
    """contivd nodes in Kubernetes mode watching the real control plane through the relay."""

    nodes: list[Node]
    plane: ControlPlane
    relay: subprocess.Popen[str]
    running: Processes  # the pods' servers, killed by PID at the end
    pods: list[KubePod] = field(default_factory=list)

    def add_pod(self, node: Node, namespace: str, name: str, labels: dict[str, str], ports: list[dict[str, Any]] | None = None) -> KubePod:
        """As the kubelet and the runtime would: the Pod, its CNI ADD (contivd reads its labels
        and gives it an address), then its status with that address."""
        create_pod(self.plane, namespace, name, node.name, labels, ports or [])
        netns = Pod().create()
        added = KubePod(node, namespace, name, netns, "")
        self.pods.append(added)
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID={netns.container}"
        out = run_plugin("ADD", netconf(node, network=POD_NETWORK), container=netns.container, netns=netns.netns, args=args)
        assert out.status == 0, f"CNI ADD of {namespace}/{name}: {out.output}\n{node.log_text()}"
        added.ip = str(out.output["ips"][0]["address"]).split("/")[0]
        set_pod_running(self.plane, namespace, name, added.ip)
        return added

    def pause_api(self) -> None:
        """The API server unreachable for the nodes: their connections are cut, new ones refused."""
        self.point_relay_at(control_plane_port())  # a port nothing listens on

    def resume_api(self) -> None:
        self.point_relay_at(self.plane.port)

    def point_relay_at(self, port: int) -> None:
        """The nodes' connections to the API server are cut; new ones go to 127.0.0.1:`port`."""
        assert self.relay.stdin is not None and self.relay.stdout is not None
        self.relay.stdin.write(f"{port}\n")
        self.relay.stdin.flush()
        assert self.relay.stdout.readline().strip() == "moved"


@contextmanager
def real_cluster(plane: ControlPlane, root: Path, count: int, *extra: str) -> Iterator[RealCluster]:
    """`count` nodes (cluster_of_nodes) in Kubernetes mode on `plane` (its Service range as
    --service-cidr), a Node object for each; the relay listens in every node's namespace before
    any contivd starts."""
    relays: list[subprocess.Popen[str]] = []
    with processes() as running:

        def start_relay(nodes: list[Node]) -> None:
            argv = [sys.executable, "-m", "tests.support.tcp_relay", "127.0.0.1", str(plane.port), str(plane.port), *(n.ns for n in nodes)]
            relays.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            assert relays[0].stdout is not None and relays[0].stdout.readline().strip() == "ready", "the relay did not start"

        options = ("--kubeconfig", str(plane.kubeconfig), "--service-cidr", plane.service_cidr, *extra)
        try:
            with cluster_of_nodes(root, count, *options, prepare=start_relay) as nodes:
                for node in nodes:
                    create_node(plane, node.name)
                cluster = RealCluster(nodes, plane, relays[0], running)
                try:
                    yield cluster
                finally:
                    for added in cluster.pods:
                        added.netns.remove()
        finally:
            for relay in relays:
                stop(relay)

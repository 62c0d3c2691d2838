"""Test and benchmark harness: `contivd run` nodes as real processes on loopback (and the Chromium the browser tests drive)."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.waiting import free_ports, wait_for

SECRET = "test-cluster-secret"


def _json_errors(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**kwargs, "headers": {"Accept": "application/json", **kwargs.get("headers", {})}}


def _verify(url: str, ca_file: Path) -> dict[str, Any]:
    """httpx's `verify` for a node: its CA for https (a ConnectError until the node has written it)."""
    if not url.startswith("https"):
        return {}
    if not ca_file.is_file():
        raise httpx.ConnectError(f"{ca_file} not written yet")
    return {"verify": ssl.create_default_context(cafile=ca_file)}


def _credentials(kwargs: dict[str, Any]) -> bool:
    return any(name.lower() in ("authorization", "x-auth-token") for name in kwargs.get("headers", {}))


class ContivdProcess:
    """One node (`--datapath none`): its API URL, its raft address, SIGKILL / SIGTERM / restart.
    With `follower`, a follower of the store (`--follower`, `peers` = the voters; no Raft address).
    With `tls`, the node serves TLS on loopback too (`--tls always`) and calls verify its CA.
    get/post/delete without credentials go over the node's API socket, as root on the node
    does (loopback TCP without a token only reads); with a token, to the TCP URL."""

    def __init__(
        self,
        name: str,
        root: Path,
        raft: str,
        api_port: int,
        peers: list[str],
        secret: str | None = SECRET,
        tls: bool = False,
        follower: bool = False,
    ):
        self.name, self.raft, self.peers, self.secret, self.follower = name, raft, peers, secret, follower
        self.data_dir = root / name
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{api_port}"
        self.api_listen = f"127.0.0.1:{api_port}"
        self.socket = self.data_dir / "run" / "api.sock"  # root's: admin without a token
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra: tuple[str, ...] = ("--tls", "always") if tls else ()  # further `contivd run` flags

    @property
    def ca_file(self) -> Path:
        """The cluster CA the node writes on start (with TLS)."""
        return self.data_dir / "tls" / "ca.crt"

    def start(self) -> ContivdProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            sys.executable, "-m", "contivd", "run", "--node-name", self.name, "--data-dir", str(self.data_dir),
            "--api-listen", self.api_listen, "--datapath", "none", "--api-socket", str(self.socket),
        ]  # fmt: skip
        args += ["--follower"] if self.follower else ["--raft-listen", self.raft]
        if self.peers:
            args += ["--peers", ",".join(self.peers)]
        args += list(self.extra)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
        if self.secret:
            env["CONTIVD_CLUSTER_SECRET"] = self.secret
        self.log = open(self.data_dir / "contivd.log", "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        return self

    def log_text(self) -> str:
        return (self.data_dir / "contivd.log").read_text(errors="replace")[-4000:]

    def mint_token(self, name: str, role: str = "admin", ttl: float | None = None) -> str:
        """A token as `contivd auth bootstrap` mints it (a request signed with the cluster secret)."""
        from contivd.http.bootstrap import mint_token

        ca_file = self.ca_file if self.url.startswith("https") else None
        return str(mint_token(self.url, self.secret, name, role, ttl, who=f"tests:{self.name}", ca_file=ca_file)["token"])

    # get/post/delete ask for contivd's typed errors (4xx + JSON), as `contivd ctl` does; pass
    # headers={"Accept": "*/*"} to be served Contiv's contract (500 + text) instead.
    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, json=body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", path, **kwargs)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        kwargs = _json_errors({"timeout": 15, **kwargs})
        if _credentials(kwargs):
            return httpx.request(method, self.url + path, **_verify(self.url, self.ca_file), **kwargs)
        with self.socket_client() as client:
            return client.request(method, path, **kwargs)

    def socket_client(self, **kwargs: Any) -> httpx.Client:
        """A client of the node's API socket: root on the node, admin without a token."""
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://contivd", **kwargs)

    def post_endpoint(self, ep: str, group: str = "") -> httpx.Response:
        """createEndpoint `ep` on network default:pods, its container on this node (in `group`)."""
        config = {"Container": ep, "Host": self.name, **({"ServiceName": group} if group else {})}
        return self.post("/plugin/createEndpoint", {"TenantName": "default", "NetworkName": "pods", "EndpointID": ep, "ConfigEP": config})

    def endpoint_addresses(self) -> dict[str, str]:
        """Endpoint id → address on network default:pods, as this node answers."""
        oper = self.get("/api/v1/inspect/networks/default:pods/").json()["Oper"]
        return {e["endpointID"]: e["ipAddress"][0] for e in oper.get("endpoints", [])}

    def info(self) -> dict[str, Any] | None:
        try:
            answer = self.get("/info")
        except httpx.HTTPError:
            return None
        return answer.json() if answer.status_code == 200 else None

    def ready(self) -> bool:
        """`/readyz` answers 200 (leader with quorum known; agent synced if it runs)."""
        try:
            return self.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 15) -> int:
        assert self.proc is not None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"{self.name} ignored SIGTERM for {timeout}s") from None
        return self.proc.returncode


class ContivdCluster:
    """N voter nodes on loopback with a cluster secret, then `followers` followers of the store
    (named follower0, ...; in `nodes` after the voters, and in `followers_of_the_store`)."""

    def __init__(self, root: Path, size: int, secret: str | None = SECRET, tls: bool = False, followers: int = 0):
        ports = free_ports(2 * size + followers)
        rafts = [f"127.0.0.1:{ports[2 * i]}" for i in range(size)]
        self.nodes = [
            ContivdProcess(f"node{i}", root, rafts[i], ports[2 * i + 1], [r for r in rafts if r != rafts[i]], secret, tls) for i in range(size)
        ]
        self.followers_of_the_store = [
            ContivdProcess(f"follower{i}", root, "", ports[2 * size + i], rafts, secret, tls, follower=True) for i in range(followers)
        ]
        self.nodes += self.followers_of_the_store

    def start(self, timeout: float = 30) -> ContivdCluster:
        for node in self.nodes:
            node.start()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30) -> None:
        """Every live node answers, agrees on a leader, and sees every live node registered
        and the default objects created."""

        def ready() -> bool:
            live = [n for n in self.nodes if n.alive()]
            infos = [n.info() for n in live]
            if any(i is None for i in infos):
                return False
            leaders = {i["cluster"]["leader"] for i in infos if i}
            names = {n.name for n in live}
            return (
                len(leaders) == 1
                and None not in leaders
                and all(names <= {x["name"] for x in i["nodes"]} for i in infos if i)
                and live[0].get("/api/v1/tenants/default/").status_code == 200
            )

        try:
            wait_for(ready, timeout, "the contivd cluster to be ready", interval=0.2)
        except AssertionError:
            for node in self.nodes:
                sys.stderr.write(f"--- {node.name} log ---\n{node.log_text()}\n")
            raise

    def leader(self) -> ContivdProcess:
        def find() -> ContivdProcess | None:
            for node in self.nodes:
                info = node.info() if node.alive() else None
                if info and info["current-state"] == "leader":
                    return node
            return None

        return wait_for(find, 20, "a leader node")

    def followers(self) -> list[ContivdProcess]:
        leader = self.leader()
        return [n for n in self.nodes if n is not leader and n.alive() and not n.follower]  # Raft followers, not followers of the store

    def close(self) -> None:
        for node in self.nodes:
            node.kill()
            if getattr(node, "log", None):
                node.log.close()


@contextmanager
def running_cluster(root: Path, size: int, timeout: float = 30, followers: int = 0) -> Iterator[ContivdCluster]:
    """A started cluster of `size` voters and `followers` followers of the store, killed (by PID) on exit whatever happened."""
    cluster = ContivdCluster(root, size, followers=followers)
    try:
        yield cluster.start(timeout)
    finally:
        cluster.close()


CHROMIUM = "/usr/bin/chromium"  # Debian's; Playwright must not download a browser of its own
# Headless on a closed network: without the background-networking flags Chromium keeps
# trying (and failing) to reach Google's services.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)

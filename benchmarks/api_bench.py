"""createEndpoint through the REST API, on 1 node (loopback TCP and the API's unix socket) and
on 3 nodes (plain HTTP and TLS), in one run.

Each run starts real `contivd run --datapath none` processes on loopback (with a cluster
secret), creates one /16 network, then creates endpoints: sequentially (latency) and from 32
concurrent clients (throughput). Over TCP the clients send an admin token (a tokenless
loopback caller only reads). On 1 node the same client also calls the node's root-only unix
socket (`--api-socket`, no token), the two paths taking turns batch by batch against the same
node: `ratio_unix_vs_tcp_1` is the socket's concurrent createEndpoint/s over TCP's. On 3 nodes the clients spread over all nodes, as every
node's CNI server calls its local API: followers forward to the leader. The 3-node TLS
cluster serves every listener with TLS (`--tls always`, the cluster CA's certificates) and
forwards over it; it runs beside the plain 3-node cluster, the two taking turns batch by batch
so that the load of a shared machine falls on both alike. `ratio_tls_vs_plain_3` is its
concurrent createEndpoint/s over the plain cluster's, and
`tls_first_request_ms` the p50 of a new connection's TLS handshake plus its first request
(`plain_first_request_ms` the same without TLS). `*_cpu_ms_*` is the CPU the cluster's
processes spent per request (user + system), which a loaded machine skews far less than
throughput; `cpu_ratio_tls_vs_plain_3` compares it. The last line printed is one JSON object
with every figure.

With `--netmaster PATH` (the original Contiv netmaster's binary) a last section runs it beside
contivd: the original with its etcd 3.4 (Debian's etcd-server, v2 API, temporary data directory)
as `--mode docker --netmode vlan --fwdmode bridge`, a fake Docker API answering the network
calls it makes at /run/docker.sock inside a private mount namespace
(tests/support/contiv_netmaster.py), against contivd on 1 node and on 3 voters (`--datapath
none`), every process on loopback and killed by PID after. Each gets the same vlan network
default:bench, then the same createEndpoint bodies from one driver (the stdlib's http.client,
one keep-alive connection per thread, each connected before the clock starts; contivd's calls
go to the leader with an admin token): rounds of 1 000 sequential calls then 1 000 from 16
threads per server (200 with --quick), the servers taking turns in an order rotated each round.
calls/s are the medians over rounds (`side_seq_per_s_*`, `side_conc_per_s_*`); `ratio_seq_1`,
`ratio_seq_3`, `ratio_conc_1`, `ratio_conc_3` are contivd's over the original's. Server CPU per
sequential call (`cpu_ms_per_call_*`, utime + stime from /proc) counts etcd + netmaster for the
original, every contivd process for contivd (`cpu_ms_per_call_3_leader` the leader alone);
`cpu_ratio_1` is contivd's on 1 node over the original's. Without --netmaster the section is
skipped and says so (`side_by_side` false, none of these keys). The binary is built from
contiv/netplugin's source with Debian's Go (`apt-get install golang-go`) as the original netctl
is, ofnet's RPC port moved from 9001 to 127.0.0.1:29001 in the built copy
(tests/support/netctl_build.py); CONTIVD_NETCTL_SRC may name a local checkout or bare git
directory of it instead of cloning from GitHub:

    python3 -m tests.support.netctl_build netmaster /tmp/netmaster

    python3 benchmarks/api_bench.py [--quick] [--netmaster /tmp/netmaster]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.client import HTTPConnection, HTTPException
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

import httpx  # noqa: E402
import trio  # noqa: E402

from contivd.http.forwarder import ForwardingClient  # noqa: E402
from tests.support.contiv_netmaster import OriginalNetmaster  # noqa: E402
from tests.support.contivd_nodes import ContivdCluster  # noqa: E402

CONCURRENCY = 32
FIRST_REQUESTS = 50  # fresh connections timed for *_first_request_ms
ROUNDS = 4  # batches per cluster; the plain and TLS 3-node clusters run alternately
NETWORK = {"tenantName": "default", "networkName": "bench", "encap": "vxlan", "subnet": "198.18.0.0/16", "gateway": "198.18.255.254"}
SIDE_NETWORK = NETWORK | {"encap": "vlan"}  # the same on every server of the side-by-side section; the original runs --netmode vlan
SIDE_THREADS = 16
SIDE_FULL, SIDE_QUICK = (1000, 3), (200, 2)  # createEndpoint calls per batch, rounds
SIDE_WARM_UP = 50  # calls per server before the first round, not counted


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Run:
    """Latencies and wall time of createEndpoint batches, summed over rounds."""

    latencies: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    server_cpu: float = 0.0  # seconds of CPU the cluster's processes spent: robust on a loaded machine

    def figures(self) -> dict[str, float]:
        return {
            "per_s": round(len(self.latencies) / self.elapsed, 1),
            "p50_ms": round(percentile(self.latencies, 0.5) * 1000, 2),
            "p99_ms": round(percentile(self.latencies, 0.99) * 1000, 2),
            "cpu_ms": round(self.server_cpu / len(self.latencies) * 1000, 3),
        }


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the processes `pids` (all their threads) so far (/proc/PID/stat)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / os.sysconf("SC_CLK_TCK")


def node_pids(cluster: ContivdCluster) -> list[int]:
    """The cluster's contivd processes (a `--datapath none` node starts no others)."""
    return [node.proc.pid for node in cluster.nodes if node.proc is not None]


def endpoint_request(name: str) -> dict[str, object]:
    """createEndpoint's body for endpoint `name` on network default:bench, as Contiv's netplugin
    sends it (netmaster/master/api.go CreateEndpointRequest): the original and contivd alike."""
    return {"TenantName": "default", "NetworkName": "bench", "EndpointID": name, "ConfigEP": {"Container": name}}


async def create_endpoints(
    urls: list[str], names: list[str], concurrency: int, http: ForwardingClient | None = None, token: str | None = None
) -> list[float]:
    """Create the endpoints `names` (network default:bench) through /plugin/createEndpoint from
    `concurrency` clients spread over `urls` (http(s) URLs with `token`, or a node's `unix:/path`
    socket, as root); their latencies in seconds. Without `http`, over a client of its own,
    closed after: the other benchmarks' way to fill a node."""
    session = ForwardingClient(timeout=60) if http is None else http
    headers = {"Content-Type": "application/json", "Accept": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    latencies: list[float] = []
    pending = iter(names)
    targets = itertools.cycle(urls)

    async def client(url: str) -> None:
        for name in pending:
            body = json.dumps(endpoint_request(name))
            start = time.perf_counter()
            status, _, text = await session.request("POST", url, "/plugin/createEndpoint", headers, body.encode())
            latencies.append(time.perf_counter() - start)
            if status != 200:
                raise RuntimeError(f"createEndpoint {name}: {status} {text[:200]!r}")

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(client, next(targets))
    finally:
        if http is None:
            await session.aclose()
    return latencies


async def timed_batch(run: Run, http: ForwardingClient, subject: Subject, names: list[str], concurrency: int) -> None:
    """One batch of `create_endpoints` on `subject`'s cluster, added to `run`: latencies, wall time, server CPU."""
    cluster = subject.cluster
    started, cpu = time.perf_counter(), cpu_seconds(node_pids(cluster))
    urls = [f"unix:{node.socket}" for node in cluster.nodes] if subject.unix else [node.url for node in cluster.nodes]
    run.latencies += await create_endpoints(urls, names, concurrency, http, None if subject.unix else subject.token)
    run.elapsed += time.perf_counter() - started
    run.server_cpu += cpu_seconds(node_pids(cluster)) - cpu


async def first_requests(url: str, tls: ssl.SSLContext | None) -> float:
    """p50 ms of connect (+ TLS handshake) + one GET on a fresh connection each time."""
    samples = []
    for _ in range(FIRST_REQUESTS):
        http = ForwardingClient(timeout=60, ssl_context=tls)
        start = time.perf_counter()
        status, _, text = await http.request("GET", url, "/version", {"Accept": "application/json"}, b"")
        samples.append(time.perf_counter() - start)
        await http.aclose()
        if status != 200:
            raise RuntimeError(f"GET /version: {status} {text[:200]!r}")
    return round(percentile(samples, 0.5) * 1000, 2)


@dataclass
class Subject:
    """One started cluster under test, with what its clients need."""

    label: str
    cluster: ContivdCluster
    tls: ssl.SSLContext | None
    token: str  # an admin token: TCP clients send it
    unix: bool = False  # call the nodes' API sockets instead (root: no token)
    seq: Run = field(default_factory=Run)
    conc: Run = field(default_factory=Run)


def start(root: Path, size: int, tls: bool, network: dict[str, str] = NETWORK) -> Subject:
    label = f"{size}_tls" if tls else str(size)
    cluster = ContivdCluster(root / f"cluster{label}", size, tls=tls)
    try:
        cluster.start(timeout=60)
        answer = cluster.nodes[0].post("/api/v1/networks/default:bench/", network)  # over the node's socket, as root
        assert answer.status_code == 200, answer.text
        minted = cluster.nodes[0].post("/api/v1/auth/tokens/bench/", {"role": "admin"})
        assert minted.status_code == 200, minted.text
    except BaseException:
        cluster.close()  # by PID, whatever failed
        raise
    subject = Subject(label, cluster, None, minted.json()["token"])
    if tls:
        subject.tls = ssl.create_default_context(cafile=cluster.nodes[0].ca_file)
        subject.tls.set_alpn_protocols(["http/1.1"])
    return subject


async def bench(subjects: list[Subject], count: int, rounds: int) -> None:
    """`rounds` batches per subject, alternating subjects within each round, so that a noisy
    machine's load weighs on every subject alike (the TLS/plain ratio compares them). Each
    subject's clients keep their connections from batch to batch, as a node's CNI server and
    forwarding keep theirs: a TLS handshake per connection, not per batch."""
    clients = [ForwardingClient(timeout=60, ssl_context=subject.tls) for subject in subjects]  # contivd's own keep-alive client
    per_round = count // rounds
    for index in range(rounds):
        for subject, http in zip(subjects, clients, strict=True):
            await timed_batch(subject.seq, http, subject, [f"{subject.label}r{index}s{i}" for i in range(per_round // 4)], 1)
            await timed_batch(subject.conc, http, subject, [f"{subject.label}r{index}c{i}" for i in range(per_round)], CONCURRENCY)
    for http in clients:
        await http.aclose()


# ---- side by side with the original Contiv netmaster (--netmaster PATH) ------------------------


@dataclass
class Server:
    """One server of the side-by-side section: where its createEndpoint calls go, whose CPU they
    cost, and what each round measured."""

    label: str  # "original", "1" (contivd, 1 node), "3" (contivd, 3 voters)
    port: int  # on 127.0.0.1
    headers: dict[str, str]
    pids: list[int]  # the server's processes: etcd + netmaster, or every contivd node
    leader_pid: int | None = None  # contivd's leader, whose CPU is also counted alone
    seq_per_s: list[float] = field(default_factory=list)  # one per round
    conc_per_s: list[float] = field(default_factory=list)
    seq_calls: int = 0
    seq_cpu: float = 0.0  # seconds, over every sequential batch
    seq_leader_cpu: float = 0.0

    def cpu_ms_per_call(self, leader: bool = False) -> float:
        return round((self.seq_leader_cpu if leader else self.seq_cpu) / self.seq_calls * 1000, 3)


def post_endpoints(server: Server, names: list[str], threads: int) -> float:
    """createEndpoint for each of `names` from `threads` threads, each over one keep-alive
    connection of its own (http.client), all connected before the clock starts; the wall seconds
    from start to the last answer. The same driver for every server: the stdlib client costs
    them all the same, unlike contivd's own client (the sections above)."""
    ready = threading.Barrier(threads + 1)
    failures: list[str] = []

    def client(share: list[str]) -> None:
        connection = HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            connection.connect()
            ready.wait()
            for name in share:
                connection.request("POST", "/plugin/createEndpoint", json.dumps(endpoint_request(name)).encode(), server.headers)
                answer = connection.getresponse()
                text = answer.read()  # all of it: the connection is reused
                if answer.status != 200:
                    failures.append(f"{server.label}: createEndpoint {name}: {answer.status} {text[:200]!r}")
                    return
        except (OSError, HTTPException, threading.BrokenBarrierError) as exc:
            failures.append(f"{server.label}: {exc!r}")
            ready.abort()
        finally:
            connection.close()

    workers = [threading.Thread(target=client, args=(names[i::threads],)) for i in range(threads)]
    for worker in workers:
        worker.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        ready.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError("; ".join(failures[:3]))
    return elapsed


def start_servers(stack: contextlib.ExitStack, root: Path, netmaster: Path) -> list[Server]:
    """The original netmaster (+ etcd + fake Docker), contivd on 1 node and on 3 voters, each
    with network default:bench (SIDE_NETWORK); each stopped by `stack`, by PID."""
    original = stack.enter_context(contextlib.closing(OriginalNetmaster(netmaster, root / "original")))
    created = httpx.post(f"{original.url}/api/v1/networks/default:bench/", json=SIDE_NETWORK, timeout=30)
    assert created.status_code == 200, f"the original netmaster refused network default:bench: {created.status_code} {created.text}"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}  # the original routes /plugin/ on the Content-Type
    servers = [Server("original", int(original.url.rsplit(":", 1)[1]), headers, original.pids)]
    for size in (1, 3):
        subject = start(root, size, False, SIDE_NETWORK)
        stack.callback(subject.cluster.close)
        leader = subject.cluster.leader()  # the clients call the leader, as Contiv's netplugins call the netmaster
        assert leader.proc is not None
        port = int(leader.url.rsplit(":", 1)[1])
        token = {"Authorization": f"Bearer {subject.token}"}  # contivd's TCP API writes with a token only
        servers.append(Server(str(size), port, headers | token, node_pids(subject.cluster), leader.proc.pid))
    return servers


def side_by_side(servers: list[Server], calls: int, rounds: int) -> None:
    """`rounds` rounds of `calls` sequential then `calls` concurrent createEndpoints per server,
    the servers taking turns (in an order rotated each round) so that a shared machine's load
    falls on all of them alike; each server warmed up first."""
    for server in servers:
        post_endpoints(server, [f"warm{i}" for i in range(SIDE_WARM_UP)], 1)
    for index in range(rounds):
        order = servers[index % len(servers) :] + servers[: index % len(servers)]
        for server in order:
            before, leader_before = cpu_seconds(server.pids), cpu_seconds([server.leader_pid] if server.leader_pid else [])
            elapsed = post_endpoints(server, [f"r{index}s{i}" for i in range(calls)], 1)
            server.seq_cpu += cpu_seconds(server.pids) - before
            server.seq_leader_cpu += cpu_seconds([server.leader_pid] if server.leader_pid else []) - leader_before
            server.seq_calls += calls
            server.seq_per_s.append(calls / elapsed)
        for server in order:
            server.conc_per_s.append(calls / post_endpoints(server, [f"r{index}c{i}" for i in range(calls)], SIDE_THREADS))


def side_figures(servers: list[Server]) -> dict[str, float]:
    """Medians over rounds of calls/s, CPU per sequential call, and contivd's ratios to the original."""
    figures: dict[str, float] = {}
    for server in servers:
        seq, conc = statistics.median(server.seq_per_s), statistics.median(server.conc_per_s)
        figures[f"side_seq_per_s_{server.label}"] = round(seq, 1)
        figures[f"side_conc_per_s_{server.label}"] = round(conc, 1)
        figures[f"cpu_ms_per_call_{server.label}"] = server.cpu_ms_per_call()
        if server.leader_pid is not None and server.label != "1":
            figures[f"cpu_ms_per_call_{server.label}_leader"] = server.cpu_ms_per_call(leader=True)
        rounds = " ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(server.seq_per_s, server.conc_per_s, strict=True))
        print(
            f"{server.label:8} sequential {seq:7.1f}/s  {SIDE_THREADS} threads {conc:7.1f}/s  server CPU {server.cpu_ms_per_call():.2f} ms/sequential call"
            f"  (rounds, seq/conc: {rounds})"
        )
    for size in ("1", "3"):
        figures[f"ratio_seq_{size}"] = round(figures[f"side_seq_per_s_{size}"] / figures["side_seq_per_s_original"], 2)
        figures[f"ratio_conc_{size}"] = round(figures[f"side_conc_per_s_{size}"] / figures["side_conc_per_s_original"], 2)
        figures[f"cpu_ratio_{size}"] = round(figures[f"cpu_ms_per_call_{size}"] / figures["cpu_ms_per_call_original"], 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer endpoints: finishes in under a minute")
    parser.add_argument("--netmaster", type=Path, metavar="PATH", help="the original Contiv netmaster binary: runs it side by side with contivd")
    args = parser.parse_args()
    if args.netmaster is not None and not os.access(args.netmaster, os.X_OK):
        parser.error(f"--netmaster {args.netmaster}: not an executable file (python3 -m tests.support.netctl_build netmaster OUT builds one)")
    count = 600 if args.quick else 4000
    figures: dict[str, float | bool] = {}
    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        for sizes in ((1, False),), ((3, False), (3, True)):
            subjects: list[Subject] = []
            try:
                for size, tls in sizes:
                    subjects.append(start(Path(tmp), size, tls))
                if sizes == ((1, False),):  # the same node over its unix socket, batch by batch with TCP
                    tcp = subjects[0]
                    subjects.append(Subject("1_unix", tcp.cluster, None, tcp.token, unix=True))
                trio.run(bench, subjects, count, ROUNDS)
                for subject in subjects:
                    if subject.label.startswith("3"):
                        name = "tls_first_request_ms" if subject.tls else "plain_first_request_ms"
                        figures[name] = trio.run(first_requests, subject.cluster.nodes[0].url, subject.tls)
            finally:
                for subject in subjects:
                    subject.cluster.close()
            for subject in subjects:
                for run, label in ((subject.seq, "create_ep_seq"), (subject.conc, "create_ep")):
                    r = run.figures()
                    print(
                        f"{subject.label:6} node(s) {label:14} {r['per_s']:8.1f}/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms"
                        f"  server CPU {r['cpu_ms']:.2f} ms/request"
                    )
                    figures[f"{label}_per_s_{subject.label}"] = r["per_s"]
                    figures[f"{label}_p50_ms_{subject.label}"] = r["p50_ms"]
                    figures[f"{label}_p99_ms_{subject.label}"] = r["p99_ms"]
                    figures[f"{label}_cpu_ms_{subject.label}"] = r["cpu_ms"]
    figures["ratio_unix_vs_tcp_1"] = round(float(figures["create_ep_per_s_1_unix"]) / float(figures["create_ep_per_s_1"]), 3)
    figures["cpu_ratio_unix_vs_tcp_1"] = round(float(figures["create_ep_cpu_ms_1_unix"]) / float(figures["create_ep_cpu_ms_1"]), 3)
    figures["ratio_tls_vs_plain_3"] = round(float(figures["create_ep_per_s_3_tls"]) / float(figures["create_ep_per_s_3"]), 3)
    figures["cpu_ratio_tls_vs_plain_3"] = round(float(figures["create_ep_cpu_ms_3_tls"]) / float(figures["create_ep_cpu_ms_3"]), 3)
    figures["quick"] = args.quick
    figures["side_by_side"] = args.netmaster is not None
    if args.netmaster is None:
        print("side by side with the original netmaster: skipped (no --netmaster PATH)")
    else:
        with tempfile.TemporaryDirectory(prefix="api-bench-side-") as tmp, contextlib.ExitStack() as stack:
            servers = start_servers(stack, Path(tmp), args.netmaster)
            side_by_side(servers, *SIDE_QUICK if args.quick else SIDE_FULL)
        figures |= side_figures(servers)
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

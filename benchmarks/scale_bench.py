"""Followers of the store at scale (issue 27): what a follower costs the voters, and itself.

(a) Real `contivd run --datapath none` processes on loopback with a cluster secret: 3 voters
and K followers of the store (`--follower --peers <voters>`; `--follower-flag=--readonly` runs
them as read-only Raft members instead, the pre-issue-27 way), for K = 0, 16, 32 (`--quick`:
0, 8), all in one cluster (followers added between the rounds, every round's tenants deleted
after it, so every K has the same store size and, unless an election
intervenes (`leader_changed`), the same leader). Per K:
- CPU per write of the leader, the other voters and the followers: sequential tenant creates
  through the leader's API socket, utime + stime of each process from /proc (the other
  processes on a 2-core machine do not count), net of that process's idle rate over the same
  time. The writes run in blocks that alternate between the followers running and SIGSTOPped
  (`leader_cpu_ms_per_write_followers_stopped`: the same leader in the same minutes), and the
  leader's TCP bytes sent per write (`ss`; also net of its idle rate), which contention
  cannot skew;
- idle CPU of the voters and followers (% of a core) and VmRSS per role;
- write → applied on every follower p50/p99: paced writes, 0.3 s apart; after each, the
  leader's revision, then one thread per follower reads the follower's applied revision from
  its `/info` every 2 ms until it holds that revision (nothing is polled between writes; a
  status page stream would announce it without polling, but each makes its node ask every
  node for a report every 2 s, which at 32 followers costs more than what is measured).

(b) One raftstore voter (`python -m raftstore serve`, a 1-voter cluster with a cluster secret)
feeding 1 000 simulated followers (`--quick`: 200) run by a few processes of this script
(`--simulate`), each holding hundreds of `open_follower` FollowerStores on one trio loop:
the real follower protocol (hello, sealed frames, the feed), the real state machine, and on
top of each a `contivd.state.StateCache` that decodes every change into contivd's typed state
as a node does. Each simulated follower records when its StateCache reached each revision
(CLOCK_MONOTONIC, system-wide on Linux, so the processes compare); write → applied on all is,
per write, the last of those times minus the moment the write was sent to the voter. Also the
voter's CPU per write (sequential unpaced puts) and its idle CPU with every follower connected.
The simulated followers derive the cluster key once per process (`derive_key` cached): a real
node derives it once at start, 1 000 in one process would spend minutes on PBKDF2.

The machine running this is small and shared (2 cores here): wall-clock latencies include
waiting for a core behind the simulated followers themselves; CPU figures come from /proc.
The last line printed is one JSON object with every figure.

    python3 benchmarks/scale_bench.py [--quick] [--follower-flag=--readonly] [--part a|b|both]
"""

from __future__ import annotations

import argparse
import bisect
import concurrent.futures
import contextlib
import functools
import inspect
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

from tests.support.contivd_nodes import SECRET, ContivdCluster, ContivdProcess  # noqa: E402
from tests.support.raft_processes import Cluster  # noqa: E402
from tests.support.waiting import free_ports, wait_for  # noqa: E402

WRITE_PACE = 0.3  # seconds between paced writes (part a)
BLOCK_WRITES = 25  # part (a): writes with the followers running, then as many with them SIGSTOPped, …
POLL_SECONDS = 0.002  # between two reads of a follower's revision while a paced write is awaited
FEED_WRITE_PACE = 0.25
SIMULATORS = 4  # processes running the simulated followers of part (b)
SETTLE_SECONDS = 3.0  # after start-up, before idle CPU is measured
TENANT = "/contiv.io/obj/modeldb/tenant/"  # contivd.state.keys.model_prefix("tenant")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process so far (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def tcp_bytes_sent(pid: int) -> int:
    """Bytes `pid` has sent over its open TCP connections (`ss -tinp`): the leader's Raft
    links, feeds and peer requests. Unlike CPU time, a 2-core machine's contention cannot skew it."""
    listing = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, check=True).stdout
    total, owned = 0, False
    for line in listing.splitlines():
        if not line[:1].isspace():
            owned = f"pid={pid}," in line
        elif owned:
            total += sum(int(field.split(":")[1]) for field in line.split() if field.startswith("bytes_sent:"))
    return total


def idle_cpu_pct(pids: list[int], seconds: float) -> list[float]:
    """% of a core each process spent over `seconds` of wall time in which nothing is asked of it."""
    before, started = [cpu_seconds(p) for p in pids], time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    return [(cpu_seconds(p) - b) / elapsed * 100 for p, b in zip(pids, before, strict=True)]


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def raise_fd_limit() -> None:
    """1 000 follower sockets on each side: as many descriptors as the hard limit allows."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---- (a) contivd voters and followers -------------------------------------------------------


def node_revision(client: Any) -> int:
    """The revision a node's store has applied (`/info`'s cluster statistics; local, cheap)."""
    return int(client.get("/info", headers={"Accept": "application/json"}).json()["cluster"]["revision"])


def applied_at(client: Any, revision: int, timeout: float = 30) -> float:
    """When polling (every POLL_SECONDS) first saw the node at `revision` or later."""
    deadline = time.monotonic() + timeout
    while node_revision(client) < revision:
        if time.monotonic() > deadline:
            raise RuntimeError(f"a follower did not reach revision {revision} in {timeout}s")
        time.sleep(POLL_SECONDS)
    return time.monotonic()


def create_tenant(client: Any, name: str) -> None:
    answer = client.post(f"/api/v1/tenants/{name}/", json={"tenantName": name}, headers={"Accept": "application/json"})
    if answer.status_code != 200:
        raise RuntimeError(f"create tenant {name}: {answer.status_code} {answer.text[:200]}")


def delete_tenants(client: Any, names: list[str]) -> None:
    """Back to the store's size before: every K writes into a store of the same size."""
    for name in names:
        answer = client.delete(f"/api/v1/tenants/{name}/", headers={"Accept": "application/json"})
        if answer.status_code != 200:
            raise RuntimeError(f"delete tenant {name}: {answer.status_code} {answer.text[:200]}")


def start_followers(root: Path, cluster: ContivdCluster, first: int, count: int, flag: str) -> list[ContivdProcess]:
    """`count` nodes started with `flag` and the voters as --peers. A harness that knows followers
    of the store (`follower=True`: no --raft-listen) runs them so; an older one passes --raft-listen,
    which a read-only member (`--readonly` before followers of the store) ignores."""
    ports = free_ports(2 * count)
    voters = [node.raft for node in cluster.nodes]
    knows_followers = "follower" in inspect.signature(ContivdProcess).parameters
    followers = []
    for i in range(first, first + count):
        if knows_followers:
            node = ContivdProcess(f"follower{i}", root, "", ports[2 * (i - first) + 1], voters, follower=True)
            node.extra = () if flag == "--follower" else (flag,)
        else:
            node = ContivdProcess(f"follower{i}", root, f"127.0.0.1:{ports[2 * (i - first)]}", ports[2 * (i - first) + 1], voters)
            node.extra = (flag,)
        followers.append(node.start())
    return followers


def ready_or_exit(node: ContivdProcess) -> bool:
    if not node.alive():
        raise RuntimeError(f"{node.name} exited:\n{node.log_text()}")
    return node.ready()


def bench_contivd(root: Path, ks: tuple[int, ...], writes: int, paced: int, idle: float, flag: str) -> dict[int, dict[str, float]]:
    """3 voters, then followers added until there are k of each `ks`: the figures of part (a) per
    K (see the module doc). One cluster throughout: every K has the same leader, elections aside."""
    cluster = ContivdCluster(root, 3)
    followers: list[ContivdProcess] = []
    results = {}
    try:
        cluster.start(timeout=120)
        leader = None
        for k in ks:
            started = time.monotonic()
            followers += start_followers(root, cluster, len(followers), k - len(followers), flag)
            for node in followers:
                wait_for(lambda n=node: ready_or_exit(n), 300, f"{node.name} ready", 0.5)
            elected = cluster.leader()  # an election under a loaded machine's start-ups is reported, not fatal
            changed, leader = leader is not None and elected is not leader, elected
            voters = [leader] + [n for n in cluster.nodes if n is not leader]
            voter_pids = [n.proc.pid for n in voters if n.proc]
            time.sleep(SETTLE_SECONDS)
            results[k] = measure_contivd(leader, voter_pids, followers, writes, paced, idle) | {"leader_changed": float(changed)}
            print(f"(a) 3 voters + {k} followers ({time.monotonic() - started:.0f} s): {shown(results[k])}", flush=True)
        return results
    finally:
        for node in followers:
            node.kill()
            node.log.close()
        cluster.close()


def measure_contivd(
    leader: ContivdProcess, voter_pids: list[int], followers: list[ContivdProcess], writes: int, paced: int, idle: float
) -> dict[str, float]:
    """Idle CPU, CPU per write, write → applied and RSS with these followers connected."""
    k = len(followers)
    follower_pids = [n.proc.pid for n in followers if n.proc]
    follower_clients = [node.socket_client(timeout=10) for node in followers]
    idle_sent, idle_started = tcp_bytes_sent(voter_pids[0]), time.monotonic()
    idle_pct = idle_cpu_pct(voter_pids + follower_pids, idle)
    idle_bytes_per_s = (tcp_bytes_sent(voter_pids[0]) - idle_sent) / (time.monotonic() - idle_started)
    figures: dict[str, float] = {
        "leader_idle_cpu_pct": idle_pct[0],
        "voter_idle_cpu_pct": mean(idle_pct[1:3]),
        "leader_idle_tcp_bytes_per_s": idle_bytes_per_s,
    }
    if k:
        figures["follower_idle_cpu_pct"] = mean(idle_pct[3:])
        figures["follower_idle_cpu_pct_max"] = max(idle_pct[3:])
    with leader.socket_client(timeout=30) as client:
        names = [f"k{k}cpu{i}" for i in range(writes)]
        create_tenant(client, f"k{k}warmup")
        first = node_revision(client)
        pids = voter_pids + follower_pids
        before, started, sent_before = [cpu_seconds(p) for p in pids], time.monotonic(), tcp_bytes_sent(voter_pids[0])
        leader_running, leader_stopped = [0.0, 0], [0.0, 0]  # leader CPU net of its idle rate, writes
        blocks = [names[i : i + BLOCK_WRITES] for i in range(0, writes, BLOCK_WRITES)]
        for index, block in enumerate(blocks):
            stopped = bool(k) and index % 2 == 1
            tally = leader_stopped if stopped else leader_running
            with paused(follower_pids if stopped else []):
                block_cpu, block_started = cpu_seconds(voter_pids[0]), time.monotonic()
                for name in block:
                    create_tenant(client, name)
                tally[0] += cpu_seconds(voter_pids[0]) - block_cpu - idle_pct[0] / 100 * (time.monotonic() - block_started)
                tally[1] += len(block)
        wait_for(lambda: all(node_revision(c) >= node_revision(client) for c in follower_clients), 60, "the followers to catch up")
        elapsed = time.monotonic() - started
        figures["leader_tcp_bytes_per_write"] = (tcp_bytes_sent(voter_pids[0]) - sent_before - idle_bytes_per_s * elapsed) / writes
        # Net of what each process spends anyway over that time (its idle rate: node lease
        # keepalives, health polls), which grows with the number of nodes, not of writes.
        spent = [cpu_seconds(p) - b - pct / 100 * elapsed for p, b, pct in zip(pids, before, idle_pct, strict=True)]
        figures["revisions_per_write"] = (node_revision(client) - first) / writes
        delete_tenants(client, [f"k{k}warmup", *names])
        figures["leader_cpu_ms_per_write"] = leader_running[0] / leader_running[1] * 1000
        if k:  # the same leader, same minutes, with every follower SIGSTOPped: what the followers cost it
            figures["leader_cpu_ms_per_write_followers_stopped"] = leader_stopped[0] / leader_stopped[1] * 1000
            figures["leader_cpu_ratio_running_vs_stopped"] = leader_running[0] / leader_running[1] / (leader_stopped[0] / leader_stopped[1])
        figures["voter_cpu_ms_per_write"] = mean(spent[1:3]) / writes * 1000
        if k:
            figures["follower_cpu_ms_per_write"] = mean(spent[3:]) / writes * 1000
            figures.update(applied_latencies(client, followers, paced))
    for follower_client in follower_clients:
        follower_client.close()
    figures["voter_rss_mb"] = mean([rss_mb(p) for p in voter_pids])
    if k:
        figures["follower_rss_mb"] = mean([rss_mb(p) for p in follower_pids])
    return figures


@contextlib.contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """SIGSTOP `pids` (processes this script started) for the block, SIGCONT after, whatever happens."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def applied_latencies(client: Any, followers: list[ContivdProcess], paced: int) -> dict[str, float]:
    """`paced` tenant creates, WRITE_PACE apart; per write and follower: sent → the follower's
    store is at the revision the leader was at once it answered (the tenant's), polled from one
    thread per follower from the answer on, and not at all between writes."""
    names = [f"k{len(followers)}paced{i}" for i in range(paced)]
    clients = [node.socket_client(timeout=10) for node in followers]
    per_follower: list[float] = []
    on_all: list[float] = []
    try:
        with concurrent.futures.ThreadPoolExecutor(len(followers)) as pool:
            for name in names:
                start = time.monotonic()
                create_tenant(client, name)
                revision = node_revision(client)
                latencies = [moment - start for moment in pool.map(lambda c: applied_at(c, revision), clients)]
                per_follower += latencies
                on_all.append(max(latencies))
                time.sleep(max(0.0, start + WRITE_PACE - time.monotonic()))
    finally:
        for follower_client in clients:
            follower_client.close()
    delete_tenants(client, names)
    return {
        "applied_p50_ms": percentile(per_follower, 0.5) * 1000,
        "applied_p99_ms": percentile(per_follower, 0.99) * 1000,
        "applied_all_p50_ms": percentile(on_all, 0.5) * 1000,
        "applied_all_p99_ms": percentile(on_all, 0.99) * 1000,
    }


# ---- (b) one voter, many simulated followers -------------------------------------------------


async def simulate(voter: str, prefix: str, count: int) -> None:
    """`--simulate`: `count` FollowerStores of `voter`, each under a StateCache; prints `ready`
    once all hold the voter's state, then, when stdin closes, one JSON line: per follower the
    (revision, monotonic time) its typed state reached, and what the typed state holds."""
    import trio

    import raftstore._crypto
    from contivd.state import StateCache
    from raftstore import FollowerConfig, open_follower

    raftstore._crypto.derive_key = functools.lru_cache(raftstore._crypto.derive_key)  # type: ignore[assignment]
    secret = os.environ["CONTIVD_CLUSTER_SECRET"]
    reached: list[list[float]] = [[] for _ in range(count)]
    caches: list[Any] = [None] * count

    async def follow(index: int, task_status: Any) -> None:
        config = FollowerConfig(voters=(voter,), name=f"{prefix}-{index}", secret=secret, request_timeout=60)
        async with open_follower(config) as store:
            await store.sync()
            cache = caches[index] = StateCache(store)
            cache.catch_up()
            task_status.started()
            log = reached[index]
            async for _ in store.watch("/contiv.io/", start_revision=cache.snapshot.revision + 1):
                log += (cache.catch_up().revision, time.monotonic())

    async with trio.open_nursery() as nursery:
        for index in range(count):
            await nursery.start(follow, index)
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)
        tenants = [len(c.snapshot.objects.get("tenant", {})) for c in caches]
        problems = sum(len(c.snapshot.problems) for c in caches)
        print(json.dumps({"reached": reached, "tenants": tenants, "problems": problems}), flush=True)
        nursery.cancel_scope.cancel()


class Simulators:
    """The `--simulate` processes, killed by PID on close."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, voter: str, processes: int, per_process: int, log_dir: Path) -> None:
        env = {**os.environ, "CONTIVD_CLUSTER_SECRET": SECRET}
        for j in range(processes):
            log = open(log_dir / f"sim{j}.log", "ab")
            args = [sys.executable, __file__, "--simulate", str(per_process), "--voter", voter, "--prefix", f"sim{j}"]
            self.procs.append(subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, text=True))

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # blocks; the deadline is checked after each process
            if line.strip() != "ready" or time.monotonic() > deadline:
                raise RuntimeError(f"a simulator did not get ready in {timeout}s (exit {proc.poll()}): {line!r}")

    def reports(self) -> list[dict[str, Any]]:
        out = []
        for proc in self.procs:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.close()
            out.append(json.loads(proc.stdout.readline()))
        return out

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


def bench_feed(root: Path, followers: int, processes: int, writes: int, paced: int, idle: float) -> dict[str, float]:
    """Part (b): one voter, `followers` simulated followers over `processes` processes."""
    root.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(root, 1)
    simulators = Simulators()
    try:
        cluster.start()
        voter = cluster.members[0]
        assert voter.proc is not None and voter.listen is not None
        pid = voter.proc.pid
        voter.call("put", key=f"{TENANT}seed", value={"tenantName": "seed"})
        idle_alone = idle_cpu_pct([pid], idle)[0]
        simulators.start(voter.listen, processes, followers // processes, root)
        simulators.wait_ready(600)
        connected = voter.status()["followers"]
        if connected != followers:
            raise RuntimeError(f"the voter serves {connected} followers, not {followers}")
        time.sleep(SETTLE_SECONDS)
        sim_pids = [p.pid for p in simulators.procs]
        idle_pct = idle_cpu_pct([pid, *sim_pids], idle)

        before = cpu_seconds(pid)
        for i in range(writes):
            voter.call("put", key=f"{TENANT}cpu{i}", value={"tenantName": f"cpu{i}"})
        cpu_per_write = (cpu_seconds(pid) - before) / writes
        time.sleep(2)  # the simulated followers catch up before the paced writes

        sent: list[tuple[float, float, int]] = []  # sent, committed (answered), revision
        for i in range(paced):
            start = time.monotonic()
            revision = int(voter.call("put", key=f"{TENANT}paced{i}", value={"tenantName": f"paced{i}"}))
            sent.append((start, time.monotonic(), revision))
            time.sleep(max(0.0, start + FEED_WRITE_PACE - time.monotonic()))
        time.sleep(3)
        reports = simulators.reports()
        tenants = {t for report in reports for t in report["tenants"]}
        if tenants != {1 + writes + paced} or any(report["problems"] for report in reports):
            raise RuntimeError(f"the simulated followers' typed state holds {sorted(tenants)} tenants, not {1 + writes + paced}")
        reached = [log for report in reports for log in report["reached"]]
        on_all, after_commit = applied_on_all(reached, sent)
        return {
            "voter_idle_cpu_pct_alone": idle_alone,
            "voter_idle_cpu_pct": idle_pct[0],
            "simulator_idle_cpu_pct_per_follower": sum(idle_pct[1:]) / followers,
            "voter_cpu_ms_per_write": cpu_per_write * 1000,
            "write_commit_p50_ms": percentile([c - s for s, c, _ in sent], 0.5) * 1000,
            "applied_all_p50_ms": percentile(on_all, 0.5) * 1000,
            "applied_all_p99_ms": percentile(on_all, 0.99) * 1000,
            "applied_all_after_commit_p99_ms": percentile(after_commit, 0.99) * 1000,
            "voter_rss_mb": rss_mb(pid),
        }
    finally:
        simulators.close()
        cluster.close()


def applied_on_all(reached: list[list[float]], sent: list[tuple[float, float, int]]) -> tuple[list[float], list[float]]:
    """Per write: the last follower's (revision reached ≥ the write's) time minus the send time,
    and minus the commit (answer) time. `reached` holds flat (revision, time) pairs per follower."""
    on_all, after_commit = [], []
    logs = [(log[0::2], log[1::2]) for log in reached]
    for start, committed, revision in sent:
        last = 0.0
        for revisions, moments in logs:
            at = bisect.bisect_left(revisions, revision)
            if at == len(revisions):
                raise RuntimeError(f"a simulated follower never reached revision {revision}")
            last = max(last, moments[at])
        on_all.append(last - start)
        after_commit.append(last - committed)
    return on_all, after_commit


# ---- main ------------------------------------------------------------------------------------


def rounded(figures: dict[str, float]) -> dict[str, float]:
    return {name: round(value, 3) for name, value in figures.items()}


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        yield Path(tmp)


def shown(figures: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.3g}" for name, value in figures.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K = 0, 8; 200 simulated followers; fewer writes")
    parser.add_argument("--part", choices=("a", "b", "both"), default="both")
    parser.add_argument(
        "--follower-flag", default="--follower", help="the `contivd run` flag that makes a follower (--readonly: a read-only Raft member)"
    )
    parser.add_argument("--simulate", type=int, help=argparse.SUPPRESS)  # internal: a simulator process of part (b)
    parser.add_argument("--voter", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_fd_limit()
    if args.simulate:
        import trio

        trio.run(simulate, args.voter, args.prefix, args.simulate)
        return
    ks = (0, 8) if args.quick else (0, 16, 32)
    writes, paced, idle = (100, 20, 8.0) if args.quick else (400, 50, 15.0)
    sim_followers = 200 if args.quick else 1000
    figures: dict[str, Any] = {"quick": args.quick, "follower_flag": args.follower_flag}
    with scratch() as root:
        if args.part in ("a", "both"):
            for k, result in bench_contivd(root / "contivd", ks, writes, paced, idle, args.follower_flag).items():
                for name, value in rounded(result).items():
                    figures[f"{name}_k{k}"] = value
            top = ks[-1]
            figures["follower_idle_cpu_pct"] = figures[f"follower_idle_cpu_pct_k{top}"]
            figures["follower_rss_mb"] = figures[f"follower_rss_mb_k{top}"]
            figures[f"leader_cpu_ratio_k{top}_vs_k0"] = round(figures[f"leader_cpu_ms_per_write_k{top}"] / figures["leader_cpu_ms_per_write_k0"], 3)
        if args.part in ("b", "both"):
            started = time.monotonic()
            result = rounded(bench_feed(root / "feed", sim_followers, SIMULATORS, writes, paced * 2, idle))
            print(f"(b) 1 voter + {sim_followers} simulated followers ({time.monotonic() - started:.0f} s): {shown(result)}", flush=True)
            for name, value in result.items():
                figures[f"{name}_{sim_followers}"] = value
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

"""Three voters (and read-only members) as separate OS processes on 127.0.0.1."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import struct
import threading
import time
import zlib
from pathlib import Path

import pytest

from raftstore._wire import HELLO_FRAME_BYTES, WIRE_VERSIONS, hello_frame
from tests.support.raft_processes import SECRET, Cluster, RemoteError, StoreProcess
from tests.support.waiting import free_ports, wait_for

pytestmark = pytest.mark.cluster


def values(member: StoreProcess, prefix: str) -> dict[str, object]:
    return {kv["key"]: kv["value"] for kv in member.call("list", prefix=prefix)}


def test_writes_through_any_member_replicate_everywhere(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    followers = [m for m in cluster3.members if m is not leader]
    followers[0].call("put", key="/via/follower", value=1)
    leader.call("put", key="/via/leader", value=2)
    for member in cluster3.members:
        assert values(member, "/via/") == {"/via/follower": 1, "/via/leader": 2}, "linearizable read on every member"


def test_leader_sigkill_elects_a_new_leader_and_loses_no_acknowledged_write(cluster3: Cluster) -> None:
    old = cluster3.leader()
    writer = next(m for m in cluster3.members if m is not old)
    acknowledged: list[int] = []
    failed: list[str] = []
    stop = threading.Event()

    def write_stream() -> None:
        i = 0
        while not stop.is_set():
            try:
                writer.call("put", key=f"/stream/{i:05d}", value=i, timeout=15)
                acknowledged.append(i)
            except (RemoteError, TimeoutError) as exc:
                failed.append(str(exc))
            i += 1

    thread = threading.Thread(target=write_stream)
    thread.start()
    try:
        wait_for(lambda: len(acknowledged) > 50, 20, "writes before the kill")
        killed_at = time.monotonic()
        old.kill()
        new = cluster3.leader(timeout=10)
        election = time.monotonic() - killed_at
        count = len(acknowledged)
        wait_for(lambda: len(acknowledged) > count + 50, 20, "writes after the election")
    finally:
        stop.set()
        thread.join(30)
    assert new is not old and election < 5, f"re-election took {election:.1f}s"
    stored = values(new, "/stream/")
    missing = [i for i in acknowledged if f"/stream/{i:05d}" not in stored]
    assert not missing, f"acknowledged writes lost: {missing[:10]}"
    # The killed member comes back from its disk and catches up.
    old.start()
    wait_for(lambda: len(values(old, "/stream/")) == len(values(new, "/stream/")), 20, "the restarted member to catch up")


def test_full_cluster_sigkill_and_restart_from_disk(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    revisions = [leader.call("put", key=f"/durable/{i}", value={"i": i}) for i in range(100)]
    for member in cluster3.members:
        member.kill()
    for member in cluster3.members:
        member.start(wait_ready=False)
    for member in cluster3.members:
        member._ready.get(timeout=20)
    leader = cluster3.leader(timeout=15)
    stored = values(leader, "/durable/")
    assert stored == {f"/durable/{i}": {"i": i} for i in range(100)}
    assert leader.call("put", key="/durable/next", value=0) > revisions[-1]


def test_concurrent_compare_and_swap_from_three_processes_loses_no_update(cluster3: Cluster) -> None:
    per_member = 25
    results: list[dict] = []
    errors: list[Exception] = []

    def increment(member: StoreProcess) -> None:
        for _ in range(per_member):
            try:
                results.append(member.call("incr", key="/counter", timeout=30))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=increment, args=(m,)) for m in cluster3.members]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert cluster3.members[0].call("get", key="/counter")["value"] == 3 * per_member
    assert sorted(r["value"] for r in results) == list(range(1, 3 * per_member + 1)), "every increment saw a unique value"
    assert any(r["attempts"] > 1 for r in results), "the processes really raced (some CAS attempts failed)"


def test_watch_on_a_follower_resumes_from_a_revision(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    follower = next(m for m in cluster3.members if m is not leader)
    first = leader.call("put", key="/watch/a", value=1)
    leader.call("put", key="/watch/b", value=2)
    # A watcher that saw revision `first` reconnects to another member and resumes after it.
    events = follower.watch("/watch/", start_revision=first + 1)
    leader.call("delete", key="/watch/a")
    got = [events.get(timeout=10)["event"] for _ in range(2)]
    assert [(e["type"], e["key"], e["prev_value"], e["value"]) for e in got] == [
        ("put", "/watch/b", None, 2),
        ("delete", "/watch/a", 1, None),
    ]


def test_lease_of_a_killed_member_expires(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    owner = next(m for m in cluster3.members if m is not leader)
    lease = owner.call("grant", ttl=1.5)
    owner.call("put", key="/nodes/owner", value={"alive": True}, lease=lease)
    owner.call("hold_lease", lease=lease, ttl=1.5)
    time.sleep(3)  # longer than the ttl: the key must survive because it is renewed
    assert leader.call("get", key="/nodes/owner") is not None
    owner.kill()
    wait_for(lambda: leader.call("get", key="/nodes/owner") is None, 15, "the dead owner's lease to expire")


def test_readonly_member_replicates_watches_and_forwards_writes(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    leader.call("put", key="/ro/before", value=1)
    readonly = cluster3.add_readonly("ro1")
    events = readonly.watch("/ro/", start_revision=1)
    assert events.get(timeout=15)["event"]["key"] == "/ro/before"
    leader.call("put", key="/ro/after", value=2)
    assert events.get(timeout=15)["event"]["key"] == "/ro/after"
    assert readonly.status()["role"] == "readonly"
    readonly.call("put", key="/ro/from-readonly", value=3)
    assert leader.call("get", key="/ro/from-readonly")["value"] == 3
    assert wait_for(lambda: leader.status()["readonly_members"] == 1, 10, "the leader to list the read-only member")


def test_wrong_secret_cannot_join_and_unauthenticated_pickle_never_runs(cluster3: Cluster, tmp_path: Path) -> None:
    leader = cluster3.leader()
    leader.call("put", key="/secret/data", value="classified")
    intruder = StoreProcess(None, cluster3.addresses, tmp_path / "intruder", secret="wrong-secret-value").start()
    try:
        # A forged message: a pickle that would create a file if anything unpickled it.
        marker = tmp_path / "pwned"

        class Exploit:
            def __reduce__(self):  # type: ignore[no-untyped-def]
                return (os.system, (f"touch {marker}",))

        payload = zlib.compress(pickle.dumps(Exploit()))
        host, port = leader.listen.split(":")  # type: ignore[union-attr]
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            raw.sendall(struct.pack("i", len(payload)) + payload)
            raw.settimeout(5)
            received = b""
            try:
                while chunk := raw.recv(4096):
                    received += chunk
            except ConnectionResetError:
                pass
            assert len(received) <= HELLO_FRAME_BYTES, "the node hangs up on garbage, answering at most its hello"
        deadline = time.monotonic() + 3  # asserting an absence: give replication a fair chance
        while time.monotonic() < deadline:
            assert intruder.call("get", key="/secret/data", stale=True) is None
            time.sleep(0.2)
        assert intruder.status()["leader"] is None
        assert not marker.exists()
        assert leader.status()["readonly_members"] == 0
        assert leader.call("put", key="/secret/still-works", value=1) > 0, "the cluster is unharmed"
    finally:
        intruder.kill()


def test_member_added_at_runtime_catches_up(cluster3: Cluster, tmp_path: Path) -> None:
    leader = cluster3.leader()
    for i in range(20):
        leader.call("put", key=f"/grow/{i}", value=i)
    (port,) = free_ports(1)
    address = f"127.0.0.1:{port}"
    leader.call("add_member", address=address)
    newcomer = StoreProcess(address, cluster3.addresses, tmp_path / "node3", SECRET).start()
    cluster3.extra.append(newcomer)
    wait_for(lambda: len(values(newcomer, "/grow/")) == 20, 20, "the new voter to catch up")
    assert address in leader.status()["voters"]
    leader.call("remove_member", address=address)
    assert wait_for(lambda: address not in leader.status()["voters"], 10, "the removal to apply")
    leader.call("put", key="/grow/after-removal", value=1)


def test_rolling_upgrade_from_the_previous_wire_format_converges(tmp_path: Path) -> None:
    """Every member starts pinned to format N-1 (the previous release), then is restarted on
    format N one at a time, with writes before, between and after: the cluster keeps
    committing, every member converges, and each link speaks the newest common format."""
    cluster = Cluster(tmp_path, 3)
    previous, newest = WIRE_VERSIONS[-2], WIRE_VERSIONS[-1]
    for member in cluster.members:
        member.extra = ("--wire-format", str(previous))
    try:
        cluster.start()
        expected: dict[str, object] = {}

        def write_and_converge(step: str) -> None:
            leader = cluster.leader()
            for i in range(10):
                leader.call("put", key=f"/upgrade/{step}/{i}", value=i)
                expected[f"/upgrade/{step}/{i}"] = i
            for member in cluster.members:
                wait_for(lambda m=member: values(m, "/upgrade/") == expected, 20, f"{member.listen} to converge after {step}")  # type: ignore[misc]

        def formats(member: StoreProcess) -> dict[str, int]:
            return dict(member.status()["wire_formats"])

        write_and_converge("old")
        assert set(formats(cluster.members[0]).values()) == {previous}
        for n, member in enumerate(cluster.members):
            member.kill()
            member.extra = ()
            member.start()
            write_and_converge(f"upgraded-{n}")
            peers = [m for m in cluster.members if m is not member]
            expected_formats = {p.listen: newest if cluster.members.index(p) <= n else previous for p in peers}
            wait_for(lambda m=member, e=expected_formats: formats(m) == e, 20, f"{member.listen} to reconnect to every peer")  # type: ignore[misc]
        assert all(set(formats(m).values()) == {newest} for m in cluster.members)
    finally:
        cluster.close()


def test_garbage_and_truncated_frames_from_an_unauthenticated_peer_are_dropped(cluster3: Cluster) -> None:
    leader = cluster3.leader()
    host, port = leader.listen.split(":")  # type: ignore[union-attr]
    hello = hello_frame(WIRE_VERSIONS[0], WIRE_VERSIONS[-1], os.urandom(16))
    attempts = [
        b"\x00\x00\x00\x05D\x01\x02",  # a frame cut short, then the sender hangs up
        hello + b"\x00\x00\x00\x30D" + os.urandom(47),  # a well-formed frame that was never sealed
        hello + b"\xff\xff\xff\xff",  # an absurd length
        hello[:-3],  # half a hello
        os.urandom(64),
    ]
    for attempt in attempts:
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            raw.sendall(attempt)
            if attempt is attempts[0] or attempt is attempts[3]:
                raw.shutdown(socket.SHUT_WR)
            raw.settimeout(10)
            received = b""
            try:
                while chunk := raw.recv(4096):
                    received += chunk
            except ConnectionResetError:
                pass
            assert len(received) <= HELLO_FRAME_BYTES, "nothing but the hello is ever answered"
    assert leader.call("put", key="/after/garbage", value=1) > 0
    assert all(m.proc is not None and m.proc.poll() is None for m in cluster3.members), "no member crashed"
    assert leader.status()["readonly_members"] == 0


def test_a_leader_that_hears_from_no_majority_steps_down_and_fails_its_pending_write(cluster3: Cluster) -> None:
    """Check-quorum (docs/raftstore.md#partitions-and-check-quorum). Both followers are frozen
    with SIGSTOP: their TCP connections stay open but nothing answers, as in a partition."""
    leader = cluster3.leader()
    followers = [m for m in cluster3.members if m is not leader]
    outcome: list[BaseException | int] = []

    def write() -> None:
        try:
            outcome.append(leader.call("put", key="/quorum/lost", value=1, timeout=30))
        except (RemoteError, TimeoutError) as exc:
            outcome.append(exc)

    for member in followers:
        assert member.proc is not None
        member.proc.send_signal(signal.SIGSTOP)
    try:
        writer = threading.Thread(target=write)
        writer.start()
        stepped_down = time.monotonic()
        wait_for(lambda: leader.status()["role"] != "leader", 20, "the cut-off leader to step down", interval=0.05)
        print(f"stepped down {time.monotonic() - stepped_down:.2f}s after its followers froze")
        assert leader.status()["leader"] is None, "it knows no leader rather than itself (a candidate while its connections stay up)"
        writer.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], RemoteError), outcome
        assert outcome[0].error == "UnavailableError" and "lost the Raft leadership" in str(outcome[0]), (
            "failed at the step-down, not at the request timeout"
        )
    finally:
        for member in followers:
            assert member.proc is not None
            member.proc.send_signal(signal.SIGCONT)
    new = cluster3.leader(timeout=30)
    assert new.call("put", key="/quorum/back", value=2) > 0
    assert values(leader, "/quorum/back") == {"/quorum/back": 2}, "the old leader follows again"


def test_leadership_moves_while_writes_stream_and_no_acknowledged_write_is_lost(cluster3: Cluster) -> None:
    """transfer_leadership under a steady stream of writes through a follower, five times in
    a row: each returns the new leader (PySyncObj alone kept appending during its transfer, so
    the target lost its election and the old leader won again), and every write acknowledged
    meanwhile is present everywhere."""
    stop = threading.Event()
    acknowledged: list[int] = []

    def stream() -> None:
        for i in range(100_000):
            if stop.is_set():
                return
            writer = next(m for m in cluster3.members if not m.is_leader())
            try:
                writer.call("put", key=f"/moving/{i}", value=i, timeout=10)
            except (RemoteError, TimeoutError):
                continue  # the leadership moving: refused at once, retried with the next key
            acknowledged.append(i)

    thread = threading.Thread(target=stream)
    thread.start()
    try:
        for _ in range(5):
            old = cluster3.leader()
            wait_for(lambda: len(acknowledged) >= 20, 30, "writes to flow")
            acknowledged_before = len(acknowledged)
            new = old.call("transfer_leadership")
            assert new != old.listen and new in [m.listen for m in cluster3.members]
            wait_for(lambda n=acknowledged_before: len(acknowledged) > n + 10, 30, "writes to flow through the new leader")  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
    expected = {f"/moving/{i}": i for i in acknowledged}
    for member in cluster3.members:
        wait_for(lambda m=member: expected.items() <= values(m, "/moving/").items(), 30, f"{member.listen} to hold every acknowledged write")  # type: ignore[misc]

"""Crash and disk faults with real member processes: nothing acknowledged is lost, no member
serves a shortened history (issue 15 item 4)."""

from __future__ import annotations

import os
import re
import struct
import threading
import time
from pathlib import Path

import pytest
from pysyncobj.journal import FileJournal

from raftstore import recover_image
from raftstore._journal_check import JournalDamagedError, check_journal_bytes, check_raft_dir
from tests.support.disk import fill
from tests.support.raft_processes import Cluster, RemoteError, StoreProcess
from tests.support.waiting import free_ports, wait_for

END_OFFSET = 36  # where PySyncObj's journal header keeps the offset its records end at


def values(member: StoreProcess, prefix: str) -> dict[str, object]:
    return {kv["key"]: kv["value"] for kv in member.call("list", prefix=prefix)}


def record_offsets(data: bytes) -> list[int]:
    """Byte offset of every journal record, walking PySyncObj's layout."""
    (end,) = struct.unpack_from("<I", data, END_OFFSET)
    offsets, offset = [], 40
    while offset < end:
        offsets.append(offset)
        offset += struct.unpack_from("<I", data, offset)[0] + 8
    return offsets


# ---- the checker on journals PySyncObj writes ----------------------------------------------


def write_journal(path: Path, entries: list[tuple[bytes, int, int]]) -> bytes:
    journal = FileJournal(str(path))
    for entry in entries:
        journal.add(*entry)
    journal._destroy()
    return path.read_bytes()


def test_what_pysyncobj_itself_makes_of_a_damaged_journal(tmp_path: Path) -> None:
    """Why the start-up check exists: PySyncObj's FileJournal loads damage without a word."""
    entries = [(b"\x01first", 1, 0), (b"\x01second", 2, 1), (b"\x01third", 3, 1)]
    data = write_journal(tmp_path / "j", entries)
    offsets = record_offsets(data)
    (tmp_path / "cut").write_bytes(data[: offsets[-1] + 12])  # the last record cut inside its index
    cut = FileJournal(str(tmp_path / "cut"))
    assert len(cut) == 3 and cut[2] != entries[2], "a torn last record loads as garbage"
    cut._destroy()
    shortened = bytearray(data)
    struct.pack_into("<I", shortened, END_OFFSET, offsets[-1])  # the header's end moved back one record
    (tmp_path / "short").write_bytes(bytes(shortened))
    short = FileJournal(str(tmp_path / "short"))
    assert [tuple(short[i]) for i in range(len(short))] == entries[:2], "a shorter history loads silently"
    short._destroy()


def test_a_sound_journal_is_summarised(tmp_path: Path) -> None:
    data = write_journal(tmp_path / "j", [(b"\x01", 1, 0), (b"\x01", 2, 1), (b"\x01", 3, 1)])
    summary = check_journal_bytes(data, "j")
    assert (summary.entries, summary.first_index, summary.last_index, summary.last_term) == (3, 1, 3, 1)


@pytest.mark.parametrize(
    "damage, fault",
    [
        (lambda d, o: d[: o[-1] + 10], r"j is truncated: its header says the records run to byte \d+, the file ends at byte \d+"),
        (lambda d, o: d[: o[-1] + 17] + b"\xff" * 8 + d[o[-1] + 25 :], r"j is damaged: the record at byte \d+ starts with size"),
        (lambda d, o: d[: o[1] + 4] + struct.pack("<QQ", 7, 1) + d[o[1] + 20 :], r"entry \(7, term 1\) at byte \d+ follows entry \(1, term 0\)"),
        (lambda d, o: b"NOTAJOURNAL" + d[11:], r"j is damaged: its header does not start with PySyncObj's journal name"),
        (lambda d, o: d[:20], r"j is truncated: 20 bytes"),
    ],
    ids=["cut-short", "tail-overwritten", "index-gap", "foreign-header", "header-cut"],
)
def test_damage_is_named(tmp_path: Path, damage, fault: str) -> None:  # type: ignore[no-untyped-def]
    data = write_journal(tmp_path / "j", [(b"\x01", 1, 0), (b"\x01", 2, 1), (b"\x01", 3, 1)])
    with pytest.raises(JournalDamagedError, match=fault):
        check_journal_bytes(damage(data, record_offsets(data)), "j")


def test_a_new_data_dir_passes(tmp_path: Path) -> None:
    assert check_raft_dir(tmp_path) is None


# ---- members that find their journal damaged -----------------------------------------------


def single_member(root: Path) -> StoreProcess:
    return StoreProcess(f"127.0.0.1:{free_ports(1)[0]}", [], root / "node0")


def refused_start(member: StoreProcess) -> str:
    """Start `member`, expect it to exit non-zero on its own; its stderr."""
    member.start(wait_ready=False)
    assert member.proc is not None
    code = member.proc.wait(timeout=60)
    assert code != 0, "the member started on a damaged journal"
    return member.stderr_text()


def filled_member(tmp_path: Path, keys: int = 40) -> tuple[StoreProcess, Path]:
    member = single_member(tmp_path).start()
    try:
        for i in range(keys):
            member.call("put", key=f"/k/{i:03d}", value=i)
        time.sleep(1.5)  # the meta file records the commit index once a second
    finally:
        member.kill()
    return member, member.data_dir / "raft.journal"


def test_a_journal_cut_short_stops_the_member_with_the_file_named(tmp_path: Path) -> None:
    member, journal = filled_member(tmp_path)
    data = journal.read_bytes()
    os.truncate(journal, struct.unpack_from("<I", data, END_OFFSET)[0] - 10)
    stderr = refused_start(member)
    assert f"{journal} is truncated" in stderr
    assert "refusing to start" in stderr and "docs/operations.md" in stderr


def test_recovery_from_a_damaged_journal_is_refused_naming_the_file(tmp_path: Path) -> None:
    member, journal = filled_member(tmp_path, keys=5)
    os.truncate(journal, struct.unpack_from("<I", journal.read_bytes(), END_OFFSET)[0] - 3)
    with pytest.raises(JournalDamagedError, match=rf"{journal} is truncated"):
        recover_image(member.data_dir)


def test_a_journal_with_a_garbled_tail_stops_the_member(tmp_path: Path) -> None:
    member, journal = filled_member(tmp_path)
    end = struct.unpack_from("<I", journal.read_bytes(), END_OFFSET)[0]
    with open(journal, "r+b") as f:
        f.seek(end - 30)
        f.write(b"\xff" * 30)
    stderr = refused_start(member)
    assert f"{journal} is damaged" in stderr


def test_a_changed_byte_inside_a_value_fails_its_checksum(tmp_path: Path) -> None:
    """The change still decodes (same-length JSON): only the checksum file gives it away."""
    member = single_member(tmp_path).start()
    try:
        member.call("put", key="/k/plain", value="a" * 64)
    finally:
        member.kill()
    journal = member.data_dir / "raft.journal"
    data = bytearray(journal.read_bytes())
    at = data.rindex(b"a" * 64) + 10
    data[at : at + 1] = b"b"
    journal.write_bytes(bytes(data))
    stderr = refused_start(member)
    assert f"{journal} is damaged: entry" in stderr and f"does not match its checksum in {journal}.sums" in stderr, stderr


def test_a_journal_shortened_behind_its_commit_index_stops_the_member(tmp_path: Path) -> None:
    """A cut at a record boundary (the header's end offset moved back) loads silently in
    PySyncObj; the commit index the member recorded gives it away."""
    member, journal = filled_member(tmp_path)
    data = bytearray(journal.read_bytes())
    struct.pack_into("<I", data, END_OFFSET, record_offsets(bytes(data))[-10])
    journal.write_bytes(bytes(data))
    stderr = refused_start(member)
    assert "committed entries are missing" in stderr and str(journal) in stderr


@pytest.mark.cluster
def test_a_damaged_member_rejoins_from_its_peers_after_the_documented_repair(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 3)
    try:
        cluster.start()
        leader = cluster.leader()
        for i in range(30):
            leader.call("put", key=f"/r/{i:02d}", value=i)
        damaged = next(m for m in cluster.members if m is not leader)
        time.sleep(1.5)  # let its meta file record the commit index
        damaged.kill()
        journal = damaged.data_dir / "raft.journal"
        os.truncate(journal, struct.unpack_from("<I", journal.read_bytes(), END_OFFSET)[0] - 5)
        assert "is truncated" in refused_start(damaged)
        # The other two still commit. The runbook (docs/operations.md): once the others are
        # caught up, move the damaged member's raft files aside and start it again, empty.
        leader = cluster.leader()
        leader.call("put", key="/r/while-down", value=1)
        wait_for(lambda: all(values(m, "/r/").get("/r/while-down") == 1 for m in cluster.alive()), 20, "the others caught up")
        aside = damaged.data_dir.with_name("damaged")
        aside.mkdir()
        for name in ("raft.journal", "raft.journal.meta", "raft.journal.sums", "raft.snapshot"):
            if (damaged.data_dir / name).exists():
                (damaged.data_dir / name).rename(aside / name)
        damaged.start()
        expected = {**{f"/r/{i:02d}": i for i in range(30)}, "/r/while-down": 1}
        wait_for(lambda: values(damaged, "/r/") == expected, 30, "the repaired member to catch up")
    finally:
        cluster.close()


# ---- crashes -------------------------------------------------------------------------------


@pytest.mark.cluster
def test_every_voter_sigkilled_while_clients_write_loses_no_acknowledged_write(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 3)
    acknowledged: list[str] = []
    stop = threading.Event()

    def client(n: int) -> None:
        member = cluster.members[n % 3]
        i = 0
        while not stop.is_set():
            key = f"/crash/{n}/{i:05d}"
            try:
                member.call("put", key=key, value=i, timeout=10)
                acknowledged.append(key)
            except (RemoteError, TimeoutError, OSError, ValueError):
                pass  # unknown outcome: not acknowledged, so not counted
            i += 1

    try:
        cluster.start()
        threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(6)]
        for t in threads:
            t.start()
        wait_for(lambda: len(acknowledged) > 200, 60, "acknowledged writes before the crash")
        for member in cluster.members:  # the clients are still writing
            member.kill()
        stop.set()
        for t in threads:
            t.join(15)
        assert acknowledged
        leader = cluster.start().leader(timeout=30)  # every member restarts from its disk
        stored = values(leader, "/crash/")
        missing = [k for k in acknowledged if k not in stored]
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged writes lost: {missing[:5]}"
        for member in cluster.members:
            wait_for(lambda m=member: set(acknowledged) <= set(values(m, "/crash/")), 30, f"{member.listen} to hold every acknowledged write")
    finally:
        stop.set()
        cluster.close()


# ---- a full filesystem ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "leave, failing_file, flags",
    [
        (0, r"raft\.journal(\.meta)?", ()),
        (256 * 1024, r"raft\.journal", ()),
        (256 * 1024, r"raft\.journal", ("--no-fsync",)),
    ],
    ids=["meta-file-fails-first", "journal-reservation-runs-out", "journal-reservation-runs-out-without-fsync"],
)
def test_a_full_data_dir_refuses_writes_naming_enospc_and_recovers_when_space_returns(
    tmp_path: Path, small_filesystem: Path, leave: int, failing_file: str, flags: tuple[str, ...]
) -> None:
    """With 256 KiB left the meta file still fits: the journal's reservation runs out first,
    where PySyncObj alone died of SIGBUS (growing its mapping into a full tmpfs)."""
    member = StoreProcess(f"127.0.0.1:{free_ports(1)[0]}", [], small_filesystem / "node0", extra=flags, log_dir=tmp_path / "logs").start()
    try:
        big = "v" * 500_000
        acknowledged = [f"/full/{i:03d}" for i in range(5)]
        for key in acknowledged:
            member.call("put", key=key, value=big)
        filler = fill(small_filesystem, leave)
        refusal = None
        for i in range(5, 60):  # the journal's reservation takes a few more values, then writes are refused
            try:
                member.call("put", key=f"/full/{i:03d}", value=big, timeout=30)
                acknowledged.append(f"/full/{i:03d}")
            except RemoteError as exc:
                refusal = exc
                break
        assert refusal is not None, "writes were never refused on a full filesystem"
        assert refusal.error == "DataDirFullError", refusal
        assert re.search(
            rf"cannot write {re.escape(str(small_filesystem))}/node0/{failing_file}: No space left on device \(ENOSPC\)", str(refusal)
        ), refusal
        started = time.monotonic()
        with pytest.raises(RemoteError, match="ENOSPC"):
            member.call("put", key="/full/again", value=1)
        assert time.monotonic() - started < 4, "a refused write must fail at once, not after the request timeout"
        status = member.status()
        assert "ENOSPC" in status["disk_problem"] and status["disk_problem_since"] > 0
        time.sleep(2)  # the member keeps ticking (meta saves fail every second) without crashing
        assert member.proc is not None and member.proc.poll() is None, member.stderr_text()

        filler.unlink()
        wait_for(lambda: member.call("put", key="/full/after", value=1, timeout=10), 30, "writes to succeed again without a restart", interval=0.5)
        assert member.status()["disk_problem"] is None
        stored = values(member, "/full/")
        assert set(acknowledged) | {"/full/after"} <= set(stored)
        log = member.stderr_text()
        assert log.count("data dir unwritable") == 1 and "writable again" in log, log
        assert "Traceback" not in log, log
    finally:
        member.kill()
    # Nothing half-written: the journal passes the start-up check and every write is back.
    member.start()
    try:
        assert set(acknowledged) | {"/full/after"} <= set(values(member, "/full/"))
    finally:
        member.kill()


@pytest.mark.cluster
def test_a_follower_with_a_full_disk_lags_without_crashing_and_catches_up(tmp_path: Path, small_filesystem: Path) -> None:
    """The leader and the other follower go on committing; writes through the full member
    are refused naming ENOSPC; once space returns it catches up, never restarted."""
    cluster = Cluster(tmp_path, 3)
    full = cluster.members[2]
    full.data_dir, full.log_dir = small_filesystem / "node2", tmp_path / "node2-log"
    try:
        cluster.start()
        if cluster.leader() is full:  # a transfer is denied until a follower caught up: retried
            wait_for(lambda: full.call("transfer_leadership"), 20, "leadership to move off the member whose disk fills")
        leader = wait_for(lambda: next((m for m in cluster.members if m is not full and m.is_leader()), None), 20, "another leader")
        big = "v" * 400_000
        filler = fill(small_filesystem, 0)
        written = []
        for i in range(25):  # 10 MB: with its 8 MiB reservation it still fits the 24 MiB filesystem once freed
            leader.call("put", key=f"/lag/{i:03d}", value=big, timeout=30)
            written.append(f"/lag/{i:03d}")
        wait_for(lambda: full.status()["disk_problem"], 30, "the full member to notice", interval=0.5)
        with pytest.raises(RemoteError, match=r"raft\.journal(\.meta)?: No space left on device \(ENOSPC\)"):
            full.call("put", key="/lag/via-full", value=1)
        assert leader.call("put", key="/lag/still-commits", value=1), "the other two still commit"
        assert full.proc is not None and full.proc.poll() is None, full.stderr_text()
        assert full.stderr_text().count("data dir unwritable") == 1, full.stderr_text()

        filler.unlink()
        wait_for(lambda: set(written) <= set(values(full, "/lag/")), 60, "the full member to catch up once space returned", interval=0.5)
        full.call("put", key="/lag/via-full", value=1)
        assert full.proc.poll() is None and "Traceback" not in full.stderr_text(), full.stderr_text()
    finally:
        cluster.close()


@pytest.mark.cluster
def test_a_leader_with_a_full_disk_hands_over_and_the_cluster_keeps_committing(tmp_path: Path, small_filesystem: Path) -> None:
    """Before, the cluster committed nothing until the full leader had space again or was
    stopped; now it asks a caught-up follower to take over, refuses writes itself naming
    ENOSPC, and catches up as a follower once space returns, never restarted."""
    cluster = Cluster(tmp_path, 3)
    full = cluster.members[0]
    full.data_dir, full.log_dir = small_filesystem / "node0", tmp_path / "node0-log"
    try:
        cluster.start()
        if cluster.leader() is not full:  # denied until the target acknowledged the last entry: retried
            wait_for(
                lambda: cluster.leader().call("transfer_leadership", to=full.listen), 20, "the leadership to move to the member whose disk fills"
            )
        wait_for(full.is_leader, 20, "the member whose disk fills to lead")
        full.call("put", key="/handover/before", value=1)
        filler = fill(small_filesystem, 0)
        big = "v" * 400_000
        refusal = None
        for i in range(40):  # the journal's 8 MiB reservation takes some values, then writes are refused
            try:
                full.call("put", key=f"/handover/{i:03d}", value=big, timeout=30)
            except RemoteError as exc:
                refusal = exc
                break
        assert refusal is not None and "ENOSPC" in str(refusal), refusal
        successor = wait_for(
            lambda: next((m for m in cluster.members if m is not full and m.is_leader()), None), 15, "a follower to take over from the full leader"
        )
        assert not full.is_leader(), "the full member still calls itself the leader"
        successor.call("put", key="/handover/after", value=1, timeout=10)
        with pytest.raises(RemoteError, match="ENOSPC"):
            full.call("put", key="/handover/via-full", value=1)
        assert full.proc is not None and full.proc.poll() is None, full.stderr_text()
        assert "take over the leadership" in full.stderr_text(), full.stderr_text()

        filler.unlink()
        wait_for(lambda: "/handover/after" in values(full, "/handover/"), 60, "the old leader to catch up once space returned", interval=0.5)
        full.call("put", key="/handover/via-full", value=1, timeout=10)
        assert "Traceback" not in full.stderr_text(), full.stderr_text()
    finally:
        cluster.close()

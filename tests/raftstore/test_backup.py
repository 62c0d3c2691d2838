"""Store images, the backup file format, seeding and recovery.

Pure parts (image round trip, every way a file can be refused) without Raft; then real member
processes: a survivor's files recovered into a new seeded cluster that a new member joins.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import msgpack
import pytest

from raftstore import BackupFileError, Put, StoreConfig, StoreImage, decode_backup, encode_image, new_cluster_id, recover_image, seed_data_dir
from raftstore._backup import MAGIC
from raftstore._commands import encode, txn_command
from raftstore._fsm import StateMachine
from tests.support.raft_processes import Cluster, StoreProcess
from tests.support.waiting import free_ports, wait_for


def populated() -> StateMachine:
    fsm = StateMachine()
    lease = fsm.apply(encode({"op": "lease_grant", "ttl": 15, "now": 1000.0}))["lease"]
    for i in range(50):
        fsm.apply(encode(txn_command([], [Put(f"/k/{i:02}", {"i": i, "text": "é" * (i % 3)})], [])))
    fsm.apply(encode(txn_command([], [Put("/k/07", "changed"), Put("/nodes/n1", {"up": True}, lease=lease)], [])))
    fsm.apply(encode(txn_command([], [Put("/k/gone", 1)], [])))
    fsm.apply(encode({"v": 1, "op": "txn", "if": [], "then": [{"op": "delete", "key": "/k/gone"}], "else": []}))
    return fsm


def backup_bytes(image: StoreImage) -> bytes:
    return b"".join(encode_image(image, "2026-11-25T09:00:00+00:00"))


def test_an_image_restores_the_same_keys_revisions_and_leases() -> None:
    fsm = populated()
    image = fsm.export_image()
    assert image.revision == fsm.revision == 53 and len(image.keys) == 51 and len(image.leases) == 1
    restored = StateMachine.from_image(image)
    assert restored.export_image() == image
    entry = restored.get("/k/07")[1]
    assert (json.loads(entry.value), entry.create_revision, entry.mod_revision, entry.version) == ("changed", 8, 51, 2)
    revoked = restored.apply(encode({"v": 1, "op": "lease_revoke", "id": image.leases[0].lease_id}))
    assert revoked["revoked"] and restored.get("/nodes/n1") is None, "the lease still owns its key after a restore"
    assert restored.events_since(10, "/") is None, "watches from before the image resync"
    assert restored.apply(encode(txn_command([], [Put("/new", 1)], [])))["revision"] == 55


def test_a_backup_decodes_to_the_image_it_was_written_from() -> None:
    image = StoreImage(**{**populated().export_image().__dict__, "cluster_id": new_cluster_id()})
    header, decoded = decode_backup(backup_bytes(image), "b.snap")
    assert decoded == image
    assert (header.format, header.revision, header.keys, header.leases, header.cluster_id) == (1, 53, 51, 1, image.cluster_id)


@pytest.mark.parametrize("keep", [0, 10, 16, 30, 200, -41, -40, -1])
def test_a_truncated_backup_is_refused_as_truncated(keep: int) -> None:
    data = backup_bytes(populated().export_image())
    with pytest.raises(BackupFileError, match=r"b\.snap is truncated"):
        decode_backup(data[:keep], "b.snap")


@pytest.mark.parametrize("where", [3, 40, 500, -60, -30])
def test_a_changed_byte_is_refused_naming_the_fault(where: int) -> None:
    data = bytearray(backup_bytes(populated().export_image()))
    data[where] ^= 0x01
    with pytest.raises(BackupFileError, match=r"b\.snap (is corrupted: SHA-256 checksum mismatch|is not a contivd snapshot|is truncated or damaged)"):
        decode_backup(bytes(data), "b.snap")


FOOTER = msgpack.packb({"next_lease_id": 1})


def reframed(header: dict[str, object], body: bytes) -> bytes:
    """A well-framed file (right end mark and checksum) around any header and body."""
    head = json.dumps(header).encode()
    data = MAGIC + struct.pack(">I", len(head)) + head + body
    return data + struct.pack(">8sQ32s", b"SNAP-END", len(data), hashlib.sha256(data).digest())


def test_a_newer_format_or_a_body_that_disagrees_with_its_header_is_refused() -> None:
    header = {"format": 2, "revision": 1, "keys": 0, "leases": 0, "cluster_id": None, "created": "x"}
    with pytest.raises(BackupFileError, match="is snapshot format 2; this contivd reads format 1"):
        decode_backup(reframed(header, b""), "b.snap")
    with pytest.raises(BackupFileError, match=r"does not match its header \(3 keys"):
        decode_backup(reframed({**header, "format": 1, "keys": 3}, FOOTER), "b.snap")
    with pytest.raises(BackupFileError, match="more records than its header"):
        decode_backup(reframed({**header, "format": 1}, FOOTER + b"\x01"), "b.snap")


@pytest.mark.cluster
def test_a_survivors_files_seed_a_new_cluster_that_a_new_member_joins(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "old", 3)
    for member in cluster.members:
        member.extra = ("--compaction-entries", "40")  # snapshot + journal tail, both read back
    seeded: list[StoreProcess] = []
    try:
        cluster.start()
        leader = cluster.leader()
        acknowledged = {f"/acked/{i:03}": i for i in range(150)}
        for key, value in acknowledged.items():
            leader.call("put", key=key, value=value)
        survivor = next(m for m in cluster.members if m is not leader)
        wait_for(lambda: len(survivor.call("list", prefix="/acked/", stale=True)) == 150, 20, "the survivor to apply every write")
        for member in cluster.members:
            if member is not survivor:
                member.kill()
        assert survivor.stop() == 0

        found = recover_image(survivor.data_dir)
        assert found.snapshot_index > 0 and found.replayed > 0, found
        assert {k.key: json.loads(k.value) for k in found.image.keys if k.key.startswith("/acked/")} == acknowledged

        listen = f"127.0.0.1:{free_ports(1)[0]}"
        image = StoreImage(**{**found.image.__dict__, "cluster_id": new_cluster_id()})
        seed_data_dir(StoreConfig(listen=listen, data_dir=tmp_path / "new"), image)
        voter = StoreProcess(listen, [], tmp_path / "new")
        seeded.append(voter.start())
        joiner = StoreProcess(None, [listen], tmp_path / "joiner")
        seeded.append(joiner.start())
        voter.call("wait_leader")
        voter.call("put", key="/after", value=1)
        assert {kv["key"]: kv["value"] for kv in joiner.call("list", prefix="/acked/")} == acknowledged
        assert joiner.call("get", key="/after")["value"] == 1
        assert voter.status()["voters"] == [listen]
        assert joiner.status()["cluster_id"] == image.cluster_id, "the identity is replicated with the state"
    finally:
        cluster.close()
        for member in seeded:
            member.kill()

"""`contivd restore` and `contivd recover` refuse what would overwrite or race a member, before
touching anything (no Raft needed: every refusal comes first)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from contivd.backup.offline import recover_member, restore_backup
from raftstore import BackupFileError, StoreConfig, StoreConfigError, encode_image
from raftstore._fsm import StateMachine
from raftstore._pysyncobj_compat import IncompatiblePySyncObjError, check
from tests.support.waiting import free_ports


def config(node_dir: Path, listen: str | None = None) -> StoreConfig:
    return StoreConfig(listen=listen or f"127.0.0.1:{free_ports(1)[0]}", data_dir=node_dir / "raft")


def test_restore_refuses_a_data_dir_that_is_not_empty(tmp_path: Path) -> None:
    backup = tmp_path / "b.snap"
    backup.write_bytes(b"".join(encode_image(StateMachine().export_image(), "now")))
    node_dir = tmp_path / "node"
    (node_dir / "raft").mkdir(parents=True)
    (node_dir / "raft" / "raft.journal").write_bytes(b"old member")
    with pytest.raises(StoreConfigError, match=f"{node_dir} is not empty"):
        restore_backup(node_dir, config(node_dir), backup)
    assert (node_dir / "raft" / "raft.journal").read_bytes() == b"old member"


def test_restore_checks_the_file_before_the_data_dir(tmp_path: Path) -> None:
    with pytest.raises(BackupFileError, match="cannot read snapshot file .*missing.snap"):
        restore_backup(tmp_path / "node", config(tmp_path / "node"), tmp_path / "missing.snap")
    assert not (tmp_path / "node").exists()


def test_recover_refuses_while_the_raft_address_is_in_use(tmp_path: Path) -> None:
    with socket.socket() as member:
        member.bind(("127.0.0.1", 0))
        member.listen()
        address = f"127.0.0.1:{member.getsockname()[1]}"
        with pytest.raises(StoreConfigError, match=f"cannot bind the raft address {address}.*stop contivd on this node first"):
            recover_member(config(tmp_path, address))


def test_recover_refuses_a_dir_without_member_files(tmp_path: Path) -> None:
    (tmp_path / "raft").mkdir()
    with pytest.raises(StoreConfigError, match="holds neither raft.journal nor raft.snapshot"):
        recover_member(config(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["raft"], "nothing moved aside"


def test_a_pysyncobj_whose_journal_entry_kinds_changed_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import pysyncobj.syncobj

    class Renumbered:
        REGULAR = 5

    monkeypatch.setattr(pysyncobj.syncobj, "_COMMAND_TYPE", Renumbered)
    with pytest.raises(IncompatiblePySyncObjError, match=r"_COMMAND_TYPE.REGULAR.*pysyncobj==0\.3\.17"):
        check()


def test_a_seed_that_fails_leaves_no_data_dir_behind(tmp_path: Path) -> None:
    backup = tmp_path / "b.snap"
    backup.write_bytes(b"".join(encode_image(StateMachine().export_image(), "now")))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(StoreConfigError, match=f"cannot listen on raft address {address}"):
            restore_backup(tmp_path / "node", config(tmp_path / "node", address), backup)
    assert not (tmp_path / "node" / "raft").exists(), "a journal without the image would start an empty cluster"

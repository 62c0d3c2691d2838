"""`contivd restore` and `contivd recover`: seed a new single-voter cluster on a stopped node.

Both end the same way (raftstore's `seed_data_dir`: a new cluster id, this member the only
voter, the image in PySyncObj's own snapshot) and differ in where the image comes from:

- restore: a backup file, checked completely first (end mark, checksum, records); the node's
  data dir must be new or empty, so a restore never overwrites a member.
- recover: the node's own raft dir after its quorum is lost for good: snapshot plus every
  journal entry after it. The old raft dir is renamed aside, never deleted, and put back if
  seeding fails.

Both return the lines to print: what was kept (revision, keys, log entries) and where.
Neither may run while contivd runs on the node: recover checks that the Raft address is free.
"""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

from raftstore import (
    StoreConfig,
    StoreConfigError,
    move_aside,
    new_cluster_id,
    parse_address,
    read_backup_file,
    recover_image,
    refuse_non_empty,
    seed_data_dir,
)


def _voter_address(config: StoreConfig) -> str:
    if config.listen is None or config.data_dir is None:
        raise StoreConfigError("a new cluster's first member is a voter: run without --readonly, with a data dir")
    return config.listen


def _refuse_if_listening(address: str) -> None:
    """A member still running on this node would keep writing the files being replaced."""
    host, port = parse_address(address, "raft address")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise StoreConfigError(f"cannot bind the raft address {address} ({exc.strerror}): stop contivd on this node first") from None


def restore_backup(node_dir: Path, config: StoreConfig, backup: Path) -> list[str]:
    """Seed the empty `node_dir` (its raft dir is `config.data_dir`) from the backup file."""
    listen = _voter_address(config)
    header, image = read_backup_file(backup)
    refuse_non_empty(node_dir)
    node_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    cluster_id = new_cluster_id()
    seed_data_dir(config, replace(image, cluster_id=cluster_id))
    return [
        f"checked {backup}: format {header.format}, revision {header.revision}, {header.keys} keys, {header.leases} leases, taken {header.created}",
        f"restored into {node_dir}: a new single-voter cluster {cluster_id} at {listen}, revision {image.revision}",
        f"next: contivd run --data-dir {node_dir} --raft-listen {listen} … ; further nodes join it with --peers {listen}",
    ]


def recover_member(config: StoreConfig) -> list[str]:
    """Turn this stopped member's raft dir into a single-voter cluster keeping all it holds."""
    listen = _voter_address(config)
    assert config.data_dir is not None
    raft_dir = config.data_dir
    _refuse_if_listening(listen)
    found = recover_image(raft_dir, config.history_limit)
    kept = move_aside(raft_dir)
    cluster_id = new_cluster_id()
    try:
        seed_data_dir(config, replace(found.image, cluster_id=cluster_id))
    except BaseException:  # seed_data_dir removed what it wrote: put the member's files back
        kept.rename(raft_dir)
        raise
    image = found.image
    beyond = max(0, found.last_index - found.commit_index)
    return [
        f"read {raft_dir}: snapshot up to log index {found.snapshot_index}, then {found.replayed} journal entries "
        f"(last index {found.last_index}, term {found.last_term}; commit index last recorded {found.commit_index}, {beyond} entries beyond it kept too)",
        f"kept revision {image.revision}: {len(image.keys)} keys, {len(image.leases)} leases",
        f"new single-voter cluster {cluster_id} at {listen}; the old raft files are in {kept}",
        f"next: contivd run as before on this node; new nodes join it with --peers {listen}",
    ]

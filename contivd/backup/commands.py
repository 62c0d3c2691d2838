"""`contivd ctl cluster snapshot save FILE`, mounted into ctl's `cluster` group by contivd.cli.

It lives here, not in contivd.ctl, because it checks the file with raftstore's backup reader
and ctl imports nothing of the daemon or the store. It reads --server and --token from the
`ctl` group like every ctl command, and verifies an https:// server as ctl's client does.
"""

from __future__ import annotations

from pathlib import Path

import click

from raftstore import BackupFileError

from ..ctl.client import Client
from .save import SnapshotSaveError, save_snapshot


def _ctl_param(ctx: click.Context, name: str) -> str | None:
    current: click.Context | None = ctx
    while current is not None:
        if name in current.params:
            value = current.params[name]
            return None if value is None else str(value)
        current = current.parent
    return None


@click.group("snapshot")
def snapshot_group() -> None:
    """Backups of the whole store: a consistent snapshot at one revision, from the leader."""


@snapshot_group.command("save")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def save(ctx: click.Context, file: Path) -> None:
    """Save the store's snapshot to FILE (atomically, mode 0600, checked before it is kept)."""
    server = _ctl_param(ctx, "server") or "http://127.0.0.1:9999"
    try:
        client = ctx.find_object(Client)
        header = save_snapshot(server, _ctl_param(ctx, "token"), file, client.verify if client is not None else True)
    except (SnapshotSaveError, BackupFileError) as exc:
        raise click.ClickException(str(exc)) from None
    cluster = f", cluster {header.cluster_id}" if header.cluster_id else ""
    click.echo(f"saved {file}: revision {header.revision}, {header.keys} keys, {header.leases} leases{cluster}, {file.stat().st_size} bytes")

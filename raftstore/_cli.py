"""Command-line entry of the store (`python -m raftstore`, mounted as `contivd store`)."""

from __future__ import annotations

import logging
from pathlib import Path

import click
import trio

from ._config import FollowerConfig, StoreConfig
from ._errors import StoreConfigError
from ._wire import CURRENT_VERSION


@click.group(name="store")
def store_group() -> None:
    """Debug commands for the embedded Raft store."""


@store_group.command()
@click.option("--listen", default="127.0.0.1:9002", show_default=True, help="Raft address of this member (host:port).")
@click.option("--peers", default="", help="Comma-separated Raft addresses of the other voters (bootstrap hint).")
@click.option("--readonly", is_flag=True, help="Join as a non-voting member: replicate and watch, never vote.")
@click.option("--follow", is_flag=True, help="Run a follower of the store (not a Raft member) of the voters in --peers.")
@click.option("--name", default="", help="This follower's name (--follow; spreads followers over the voters).")
@click.option("--secret", envvar="CONTIVD_CLUSTER_SECRET", default=None, help="Cluster secret (env CONTIVD_CLUSTER_SECRET).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Journal and snapshot dir; omit for memory only.")
@click.option("--fsync/--no-fsync", default=True, show_default=True, help="Flush the journal before acknowledging writes.")
@click.option("--request-timeout", type=float, default=5.0, show_default=True, help="Seconds to wait for a leader and quorum.")
@click.option("--history", "history_limit", type=int, default=10_000, show_default=True, help="Change events kept for watch resume.")
@click.option("--compaction-entries", type=int, default=20_000, show_default=True, help="Log entries before a snapshot is taken.")
@click.option(
    "--wire-format",
    type=int,
    default=CURRENT_VERSION,
    show_default=True,
    help="Newest Raft wire format to speak (pin the previous one during a rolling upgrade).",
)
def serve(
    listen: str,
    peers: str,
    readonly: bool,
    follow: bool,
    name: str,
    secret: str | None,
    data_dir: Path | None,
    fsync: bool,
    request_timeout: float,
    history_limit: int,
    compaction_entries: int,
    wire_format: int,
) -> None:
    """Run one store member; requests as JSON lines on stdin, answers on stdout."""
    from ._serve import serve as run

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    voters = tuple(p.strip() for p in peers.split(",") if p.strip())
    if follow:  # no PySyncObj on this path: no journal check either
        try:
            follower = FollowerConfig(voters, name, secret, request_timeout, history_limit=history_limit, wire_format=wire_format)
        except StoreConfigError as exc:
            raise click.UsageError(str(exc)) from None
        trio.run(run, follower)
        return
    from ._journal_check import JournalDamagedError

    try:
        config = StoreConfig(
            listen=None if readonly else listen,
            peers=voters,
            secret=secret,
            data_dir=data_dir,
            fsync=fsync,
            request_timeout=request_timeout,
            history_limit=history_limit,
            compaction_min_entries=compaction_entries,
            wire_format=wire_format,
        )
        trio.run(run, config)
    except StoreConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except JournalDamagedError as exc:
        raise click.ClickException(f"cannot start the store member: {exc}") from None


def main() -> None:
    store_group(prog_name="python -m raftstore")

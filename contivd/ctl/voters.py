"""`contivd ctl cluster voter add|remove ADDRESS`: change the Raft voters (admin role).

contivd's own (netctl had no Raft), so plain click commands over the Client, as access.py's.
The order matters and each command's help says it: a voter is added *before* contivd starts
on it, and removed *after* it stopped.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import click

from .client import Client

VOTERS_PATH = "/api/v1/cluster/voters/"


def _voter_path(address: str) -> str:
    return f"{VOTERS_PATH}{quote(address, safe=':[]')}/"


def _voters_line(answer: dict[str, Any]) -> str:
    return f"voters now: {', '.join(answer['voters'])}"


@click.group("voter")
def voter_group() -> None:
    """The Raft voters (one change at a time; `cluster status` lists them)."""


@voter_group.command("add")
@click.argument("address")
@click.pass_obj
def add(client: Client, address: str) -> None:
    """Make ADDRESS (the new node's --raft-listen, host:port) a voter, then start contivd there
    with --peers naming the current voters. Until it has caught up, a cluster of two voters
    cannot commit: start it right away."""
    answer = client.post(_voter_path(address), {})
    click.echo(f"added voter {address}; {_voters_line(answer)}")
    if not answer.get("committed", True):
        click.echo("two voters commit only together: this cluster writes nothing until the new voter runs")
    click.echo(f"next: start contivd on that node with --raft-listen {address} --peers {','.join(v for v in answer['voters'] if v != address)}")


@voter_group.command("remove")
@click.argument("address")
@click.pass_obj
def remove(client: Client, address: str) -> None:
    """Remove voter ADDRESS after stopping contivd on it (the leader is refused: stop it first,
    another voter takes over). Wipe its data dir before it serves again."""
    answer = client.delete(_voter_path(address))
    click.echo(f"removed voter {address}; {_voters_line(answer)}")

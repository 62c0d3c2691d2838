"""`contivd ctl auth token create|ls|revoke`, `contivd ctl audit ls` and `contivd ctl login`.

Tokens and the audit trail are contivd's own (netctl had neither), so these are plain click
commands over the same Client rather than entries of commands.py's netctl tables.
"""

from __future__ import annotations

import time
from typing import Any

import click

from .client import Client, CtlError
from .config import CtlSettings, config_path, save_settings
from .output import as_json, table
from .trust import TrustError, verification

TOKENS_PATH = "/api/v1/auth/tokens/"
AUDIT_PATH = "/api/v1/audit/"


def _when(stamp: float | None) -> str:
    return "" if stamp is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def token_rows(records: list[dict[str, Any]], now: float) -> list[list[str]]:
    """`auth token ls` rows: name, role, state (active, expired, revoked), created, expires."""

    def state(record: dict[str, Any]) -> str:
        if record.get("revoked") is not None:
            return "revoked"
        expires = record.get("expires")
        return "expired" if expires is not None and expires <= now else "active"

    return [[r["name"], r["role"], state(r), _when(r["created"]), _when(r.get("expires"))] for r in records]


def audit_rows(entries: list[dict[str, Any]]) -> list[list[str]]:
    return [[_when(e["time"]), e["node"], e["who"], e["method"], e["route"], e["object"], str(e["status"])] for e in entries]


@click.group("auth")
def auth_group() -> None:
    """Operator tokens: create (shown once), list, revoke (admin role)."""


@auth_group.group("token")
def token_group() -> None:
    """Tokens with a role: viewer (reads), operator (plus endpoint and service-level writes), admin (everything)."""


@token_group.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["viewer", "operator", "admin"]), required=True, help="What the token may do.")
@click.option("--ttl", type=click.FloatRange(min=1), default=None, help="Lifetime in seconds (default: until revoked).")
@click.pass_obj
def create(client: Client, name: str, role: str, ttl: float | None) -> None:
    """Create token NAME and print it: it is stored hashed and never shown again."""
    answer = client.post(f"{TOKENS_PATH}{name}/", {"role": role, "ttl": ttl})
    click.echo(answer["token"])


@token_group.command("ls")
@click.option("json_output", "--json", "-j", is_flag=True, help="Print the server's JSON answer.")
@click.pass_obj
def list_tokens(client: Client, json_output: bool) -> None:
    """List tokens (never the tokens themselves)."""
    records = client.get(TOKENS_PATH)
    click.echo(
        as_json(records) if json_output else table(["Name", "Role", "State", "Created", "Expires"], token_rows(records, time.time())), nl=False
    )


@token_group.command("revoke")
@click.argument("name")
@click.pass_obj
def revoke(client: Client, name: str) -> None:
    """Revoke token NAME: every node refuses it once the revocation has replicated (well under a second)."""
    client.delete(f"{TOKENS_PATH}{name}/")
    click.echo(f"revoked {name}")


@click.group("audit")
def audit_group() -> None:
    """The audit trail of writes through the API."""


@audit_group.command("ls")
@click.option("--last", "-n", type=click.IntRange(min=1), default=None, help="Only the newest N entries.")
@click.option("json_output", "--json", "-j", is_flag=True, help="Print the server's JSON answer.")
@click.pass_obj
def list_audit(client: Client, last: int | None, json_output: bool) -> None:
    """Who wrote what and how it ended, oldest first (the store keeps the newest 1000)."""
    entries = client.get(AUDIT_PATH)
    entries = entries[-last:] if last else entries
    headers = ["Time", "Node", "Who", "Method", "Route", "Object", "Status"]
    click.echo(as_json(entries) if json_output else table(headers, audit_rows(entries)), nl=False)


@click.command("login")
@click.option("--ca-file", default=None, help="Verify the server's certificate with this CA bundle.")
@click.option("--fingerprint", default=None, help="Or pin the server certificate's SHA-256 fingerprint.")
@click.pass_context
def login(ctx: click.Context, ca_file: str | None, fingerprint: str | None) -> None:
    """Store the server (--server) and token (--token, else asked for) in ~/.config/contivd/ctl.toml
    with mode 0600, after checking that the server accepts them."""
    params = ctx.parent.params if ctx.parent else {}  # the `ctl` group's, resolved by its callback
    server, token = params["server"], params["token"] or click.prompt("Token", hide_input=True)
    try:
        verify = verification(server, ca_file, fingerprint, insecure=False)
    except TrustError as exc:
        raise CtlError(str(exc)) from None
    with Client(server, token, verify=verify) as client:
        client.get("/api/v1/tenants/")  # any role may read: proves the token and the server
    path = save_settings(CtlSettings(server, token, ca_file, fingerprint), config_path())
    click.echo(f"logged in to {server}; saved {path} (mode 0600)")

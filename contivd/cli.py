"""`contivd` command line: the one executable operators run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import trio

from raftstore._cli import store_group

from . import __version__, logs
from .config import OPTIONS, Config, ConfigError, load
from .node_secret import with_cluster_secret


def _config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Attach one flag per declared option (default None: unset flags fall through to env/file)."""
    for option in reversed(OPTIONS):
        name = "--" + option.name.replace("_", "-")
        decl = f"{name}/--no-{name[2:]}" if option.flag else name
        command = click.option(decl, option.name, default=None, help=f"{option.help} [env {option.env}]")(command)
    return click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None, help="TOML config file.")(command)


def _load(config_file: Path | None, flags: dict[str, Any]) -> Config:
    try:
        return load(flags, config_file)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


class _Commands(click.Group):
    """The root group. `ctl` (netctl's command tree, an httpx client) is built when it is asked
    for, as click's lazily loaded subcommands are: `contivd run`, on every node, does not carry it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), "ctl"])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name != "ctl":
            return super().get_command(ctx, cmd_name)
        from .backup.commands import snapshot_group
        from .ctl import build as build_ctl

        # `ctl cluster snapshot save` checks files with raftstore, which contivd.ctl may not import.
        return build_ctl({"cluster": [snapshot_group]})


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="contivd")
def cli() -> None:
    """contivd: Contiv container networking as one node appliance."""


@cli.command()
@_config_options
def run(config_file: Path | None, **flags: Any) -> None:
    """Run this node: embedded store member (and, as they land, netmaster, agent, CNI)."""
    try:
        config = with_cluster_secret(_load(config_file, flags))
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot read or create this node's cluster secret: {exc}") from None
    logs.configure(config.log_level, config.log_format, secrets=[config.cluster_secret])
    import raftstore  # its JournalDamagedError is looked up only if the run fails: a follower never loads PySyncObj

    from .http.local_socket import SocketInUseError
    from .main import run as run_node  # after logs.configure: importing OVS libraries emits warnings
    from .ovs.errors import OvsError
    from .tls.pki import PkiError

    try:
        trio.run(run_node, config, lambda: load(flags, config_file))
    except raftstore.JournalDamagedError as exc:
        raise click.ClickException(f"cannot start the store member: {exc}") from None
    except (OvsError, PkiError, SocketInUseError, BaseExceptionGroup) as exc:
        pki = _startup_error(exc, PkiError)
        if pki is not None:
            raise click.ClickException(f"cannot set up TLS: {pki}") from None
        taken = _startup_error(exc, SocketInUseError)  # the agent's or the OpenFlow controller's socket
        if taken is not None:
            raise click.ClickException(f"cannot start: {taken}") from None
        cause = _startup_error(exc, OvsError)
        if cause is None:
            raise
        raise click.ClickException(f"cannot start the node agent: {cause}") from None


def _startup_error(exc: BaseException, kind: type[Exception]) -> BaseException | None:
    """The `kind` error that stopped start-up, however deep trio's exception groups nest it."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _startup_error(inner, kind)
            if found is not None:
                return found
    return None


@cli.command("check-config")
@_config_options
def check_config(config_file: Path | None, **flags: Any) -> None:
    """Validate the configuration and print the effective values (secret masked)."""
    click.echo(json.dumps(_load(config_file, flags).describe(), indent=2))


@cli.command("import-contiv")
@click.option("--etcd", required=True, help="Client URL of the Contiv cluster's etcd (v2 API), e.g. http://HOST:2379; only read.")
@click.option(
    "--server",
    envvar="CONTIVD_SERVER",
    default=None,
    help="A contivd node's API URL, or unix:/path of its API socket (root's default when /run/contivd/api.sock exists, "
    "else http://127.0.0.1:9999) [env CONTIVD_SERVER].",
)
@click.option("--token", envvar="CONTIVD_TOKEN", default=None, help="An admin token, needed except as root over the API socket [env CONTIVD_TOKEN].")
@click.option(
    "--ca-file",
    envvar="CONTIVD_CA_FILE",
    default=None,
    help="The CA an https:// server is verified against (a node's tls/ca.crt) [env CONTIVD_CA_FILE].",
)
@click.option("--dry-run", is_flag=True, help="Print what would be imported and the verification plan; write nothing.")
@click.option("--force", is_flag=True, help="Replace the contents of a contivd store that is not empty.")
def import_contiv(etcd: str, server: str | None, token: str | None, ca_file: str | None, dry_run: bool, force: bool) -> None:
    """Move a running Contiv installation into contivd: read its etcd tree, import it atomically
    (every address, MAC, VLAN/VXLAN and EPG id kept), then verify it object by object."""
    import os
    import ssl

    import httpx

    from .ctl.client import default_server, http_target
    from .migrate.client import submit_import
    from .migrate.plan import plan_import
    from .migrate.source import ContivTree, MigrationError, read_contiv_values
    from .migrate.verify import verification_plan, verify_import

    server = server or default_server(os.geteuid())

    try:
        values = read_contiv_values(etcd)
        tree = ContivTree.from_values(values)
        plan = trio.run(plan_import, tree)
        click.echo(f"Contiv tree at {etcd}: {len(values)} keys")
        click.echo("\n".join(plan.describe()))
        if dry_run:
            click.echo("dry run: nothing written. After an import, verification compares:")
            click.echo("\n".join(f"  - {line}" for line in verification_plan(tree)))
            return
        reply = submit_import(server, values, force, token, ca_file, http_target(server))
    except MigrationError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"imported at store revision {reply.get('revision')}; verifying against {server}")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base_url, transport = http_target(server)
    with httpx.Client(
        base_url=base_url, transport=transport, headers=headers, timeout=30.0, verify=ssl.create_default_context(cafile=ca_file) if ca_file else True
    ) as http:
        counts, differences = verify_import(tree, http)
    click.echo("\n".join(f"  {line}" for line in counts))
    if differences:
        click.echo("\n".join(f"DIFFERENT {line}" for line in differences), err=True)
        raise click.ClickException(f"verification found {len(differences)} differences")
    click.echo(f"verified: {len(tree.objects)} objects and {len(tree.endpoints)} endpoints match")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_config_options
def restore(file: Path, config_file: Path | None, **flags: Any) -> None:
    """Seed a new, empty --data-dir from a snapshot FILE (`ctl cluster snapshot save`): a new
    single-voter cluster at --raft-listen with every key of the snapshot; then `contivd run`."""
    from .backup.offline import restore_backup

    config = _load(config_file, flags)
    _offline(lambda: restore_backup(config.data_dir, config.store_config(), file))


@cli.command()
@_config_options
def recover(config_file: Path | None, **flags: Any) -> None:
    """After a permanent loss of quorum, on one stopped survivor: make its --data-dir a
    single-voter cluster keeping everything its log holds (old files kept aside)."""
    from .backup.offline import recover_member

    config = _load(config_file, flags)
    _offline(lambda: recover_member(config.store_config()))


def _offline(step: Callable[[], list[str]]) -> None:
    from raftstore import StoreError

    try:
        lines = step()
    except (StoreError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo("\n".join(lines))


@cli.group("auth")
def auth_group() -> None:
    """Access control on this node (operators manage tokens with `contivd ctl auth token`)."""


@auth_group.command("bootstrap")
@click.argument("name", default="root")
@click.option("--role", type=click.Choice(["admin", "operator", "viewer"]), default="admin", show_default=True, help="The token's role.")
@click.option("--ttl", type=click.FloatRange(min=1), default=None, help="Lifetime in seconds (default: until revoked).")
@click.option("--login/--no-login", default=False, help="Also store the server and token in ~/.config/contivd/ctl.toml (mode 0600).")
@_config_options
def bootstrap(name: str, role: str, ttl: float | None, login: bool, config_file: Path | None, **flags: Any) -> None:
    """As root on a node: mint a token NAME (the first admin token) through the node's root-only
    API socket (--api-socket), else over TCP signed with the node's cluster secret, read from its
    configuration; print it (it is shown only once)."""
    import os

    from .ctl.config import save_login
    from .http.bootstrap import BootstrapError, mint_token

    if os.geteuid() != 0:
        raise click.ClickException(
            "contivd auth bootstrap is for root on a node (it uses the root-only API socket or the cluster secret); others ask an admin for a token"
        )
    config = _load(config_file, flags)
    socket = config.api_socket_path if config.api_socket_path.exists() else None
    try:
        answer = mint_token(
            config.api_url, config.cluster_secret, name, role, ttl, who=f"bootstrap:{config.node_name}", ca_file=config.api_ca_file, socket=socket
        )
    except BootstrapError as exc:
        raise click.ClickException(str(exc)) from None
    if login:
        ca_file = config.api_ca_file
        path = save_login(config.api_url, answer["token"], str(ca_file) if ca_file is not None else None)
        click.echo(f"stored in {path}", err=True)
    click.echo(answer["token"])


cli.add_command(store_group)


def main() -> None:
    cli(prog_name="contivd")

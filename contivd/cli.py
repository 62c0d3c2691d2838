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
from .ctl import ctl_group


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="contivd")
def cli() -> None:
    """contivd: Contiv container networking as one node appliance."""


@cli.command()
@_config_options
def run(config_file: Path | None, **flags: Any) -> None:
    """Run this node: embedded store member (and, as they land, netmaster, agent, CNI)."""
    config = _load(config_file, flags)
    logs.configure(config.log_level, config.log_format, secrets=[config.cluster_secret])
    from .main import run as run_node  # after logs.configure: importing OVS libraries emits warnings
    from .ovs import OvsError

    try:
        trio.run(run_node, config, lambda: load(flags, config_file))
    except (OvsError, BaseExceptionGroup) as exc:
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


cli.add_command(store_group)
cli.add_command(ctl_group, "ctl")


def main() -> None:
    cli(prog_name="contivd")

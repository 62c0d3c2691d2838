"""`contivd ctl`: the netctl-compatible command line, built from commands.py's declarations.

This module only translates. It turns each record into a click command, opens one Client
per invocation (server from `--server` or netctl's `--netmaster` / CONTIVD_SERVER or
NETMASTER, bearer token from `--token` / CONTIVD_TOKEN, else both from ctl.toml) and prints what actions.py returns. Exit statuses are netctl's: 1 for usage
errors (click's own, and netctl's own checks with netctl's message and help: netctl_usage.py),
3 when the request failed (any CtlError, printed as `Error: <message>` on stderr). It talks HTTP only and never imports
daemon internals, so it works against any contivd (or Contiv) server.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource

from . import actions
from .access import audit_group, auth_group, login
from .ca import ca_group
from .client import DEFAULT_SERVER, DEFAULT_SOCKET, UNIX_SCHEME, Client, CtlError, default_server
from .commands import ALIASES, DEFAULT_TENANT, GROUPS, RESOURCES, SETTERS, SHOWS, Arg, Option, Resource, Setter, Show
from .config import config_path, effective, read_settings
from .netctl_usage import USAGES, Usage, help_text, refusal
from .trust import TrustError, verification
from .voters import voter_group


class AliasedGroup(click.Group):
    """A group that also answers to netctl's alternative names (`net`, `ep`, `delete`, `list`)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, ALIASES.get(cmd_name, cmd_name))


EXIT_USAGE = 1  # netctl's exitHelp
EXIT_REQUEST_FAILED = 3  # netctl's exitInvalid: the server refused, or could not be reached
EXIT_ANSWER_FAILED = 4  # contivd's own: the answer reports a failure (Show.failure)


class RequestFailed(click.ClickException):
    exit_code = EXIT_REQUEST_FAILED


class NetctlUsage(click.ClickException):
    """A usage error netctl reports itself (errExit with exitHelp): the message on stderr and,
    where netctl shows it, the command's help in netctl's layout on stdout; exit 1."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, help_text: str = "") -> None:
        super().__init__(message)
        self.help_text = help_text

    def show(self, file: Any = None) -> None:
        click.echo(self.help_text, nl=False)
        click.echo(f"Error: {self.format_message()}", err=True)


def _netctl_refusal(path: tuple[str, ...], usage: Usage, message: str, *, with_help: bool = True) -> NetctlUsage:
    """netctl's refusal of the current command, its help naming the program as `contivd ctl`."""
    ctx = click.get_current_context()
    while ctx.parent is not None and not isinstance(ctx.command, _CtlRoot):
        ctx = ctx.parent
    return NetctlUsage(message, help_text(ctx.command_path, path, usage) if with_help else "")


class AnswerFailed(click.ClickException):
    """The server answered, and the answer itself is a failure (`ctl trace`: a datapath that
    disagrees with the model): printed, then one line on stderr and this status."""

    exit_code = EXIT_ANSWER_FAILED


class _CtlRoot(AliasedGroup):
    """The `ctl` group: a CtlError from any subcommand becomes one line on stderr and exit 3,
    a usage error exit 1 (click's default is 2), as netctl."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            exc.exit_code = EXIT_USAGE
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            exc.exit_code = EXIT_USAGE
            raise
        except CtlError as exc:
            raise RequestFailed(exc.message) from None


def _help(text: str, name: str) -> str:
    aliases = sorted(alias for alias, canonical in ALIASES.items() if canonical == name)
    return f"{text} (alias: {', '.join(aliases)})" if aliases else text


def _argument(name: str) -> click.Argument:
    return click.Argument([name], metavar=name.upper().replace("_", "-"))


def _positionals(names: tuple[str, ...]) -> click.Argument:
    """All positional arguments of a command netctl checks itself (its count, its message)."""
    return click.Argument(["positionals"], nargs=-1, metavar=" ".join(name.upper().replace("_", "-") for name in names))


def _checked_positionals(path: tuple[str, ...], usage: Usage, names: tuple[str, ...], values: dict[str, Any]) -> dict[str, Any]:
    """The positional arguments by name, once netctl's checks of the count and of the flags it
    requires pass (the values are taken out of `values`); NetctlUsage otherwise."""
    positionals = values.pop("positionals")
    refused = refusal(usage, positionals, values)
    if refused:
        raise _netctl_refusal(path, usage, refused)
    return dict(zip(names, positionals, strict=False))


def _option(option: Option, *, checked: bool = False) -> click.Option:
    """`checked`: netctl checks the flag itself (usage.required), so click must not."""
    decls = [option.param, *option.flags]
    if option.flag_value is not None:
        return click.Option(decls, flag_value=option.flag_value, default=None, help=option.help)
    # Only pass a default that exists: click >= 8.3 treats an explicit `default=None` as a
    # value, which would silently satisfy `required`.
    defaults: dict[str, Any] = {} if option.default is None else {"default": option.default, "show_default": True}
    return click.Option(
        decls,
        type=click.INT if option.kind == "int" else click.STRING,
        multiple=option.kind == "list",
        required=option.required and not checked,
        help=option.help,
        **defaults,
    )


def _tenant_option() -> click.Option:
    return click.Option(["tenant", "--tenant", "-t"], default=DEFAULT_TENANT, show_default=True, help="Tenant name.")


def _json_flag() -> click.Option:
    return click.Option(["json_output", "--json", "-j"], is_flag=True, help="Print the server's JSON answer.")


def _list_flags(resource: Resource) -> list[click.Parameter]:
    flags: list[click.Parameter] = [
        _json_flag(),
        click.Option(["quiet", "--quiet", "-q"], is_flag=True, help="Names only, one a line."),
    ]
    if resource.all_tenants_flag:
        flags.append(click.Option(["all_tenants", "--all", "-a"], is_flag=True, help="Every tenant."))
    if resource.counters is not None:
        flags.append(click.Option(["hits", "--hits", "-H"], is_flag=True, help="Packets and bytes of each, summed over the nodes (contivd)."))
    return flags


def _command(name: str, help: str, params: list[click.Parameter], run: Callable[..., str]) -> click.Command:
    """A click command that calls `run(client, **parsed)` and prints the text it returns."""

    @click.pass_obj
    def callback(client: Client, /, **values: Any) -> None:
        text = run(client, **values)
        if text:
            click.echo(text, nl=False)

    text = _help(help, name)
    return click.Command(name, params=params, callback=callback, help=text, short_help=text)


def _list(client: Client, resource: Resource, fields: dict[str, Any], extra: dict[str, Any]) -> str:
    fmt: actions.ListFormat = "json" if extra["json_output"] else "quiet" if extra["quiet"] else "table"
    if extra.get("hits"):
        text, unanswered = actions.list_counted(client, resource, fields, fmt)
        if unanswered:
            click.echo(f"Warning: not counted, these nodes did not answer: {', '.join(unanswered)}", err=True)
        return text
    return actions.list_objects(client, resource, fields, fmt, all_tenants=bool(extra.get("all_tenants")))


@dataclass(frozen=True)
class _Verb:
    """How a resource verb becomes a command: help, positional args, extra params, action."""

    help: str
    args: Callable[[Resource], tuple[Arg, ...]]
    params: Callable[[Resource], list[click.Parameter]]
    run: Callable[[Client, Resource, dict[str, Any], dict[str, Any]], str]
    usage_params: Callable[[Resource, Usage], list[click.Parameter]] | None = None  # where netctl's checks change them


def _write_flags(resource: Resource, usage: Usage | None = None) -> list[click.Parameter]:
    checked = {param for param, _ in usage.required} if usage else set()
    return [_option(option, checked=option.param in checked) for option in resource.options]


_VERBS = {
    "create": _Verb("Create one {name}.", lambda r: r.args, _write_flags, lambda c, r, f, x: actions.create(c, r, f, x), _write_flags),
    "update": _Verb(
        "Update one {name}; its settings are replaced.", lambda r: r.args, _write_flags,
        lambda c, r, f, x: actions.create(c, r, f, x, update=True), _write_flags,
    ),
    "rm": _Verb("Delete one {name}.", lambda r: r.identity_args, lambda r: [], lambda c, r, f, x: actions.remove(c, r, f)),
    "inspect": _Verb(
        "Show one {name} with its operational state, as JSON.", lambda r: r.identity_args, lambda r: [],
        lambda c, r, f, x: actions.inspect(c, r, f),
    ),
    "ls": _Verb("List {name} objects: a table, --json or -q.", lambda r: r.scope_args, _list_flags, _list),
}  # fmt: skip


def _resource_command(resource: Resource, verb_name: str, name: str) -> click.Command:
    """The command; where netctl checks its arguments itself (netctl_usage.USAGES), its
    positional arguments are taken as netctl takes them and refused with netctl's message."""
    verb = _VERBS[verb_name]
    args = verb.args(resource)
    path = (resource.group_name, name)
    usage = USAGES.get(path)
    params: list[click.Parameter] = [_positionals(tuple(arg.name for arg in args))] if usage else [_argument(arg.name) for arg in args]
    if resource.tenant_option:
        params.append(_tenant_option())
    params += verb.usage_params(resource, usage) if usage and verb.usage_params else verb.params(resource)

    def run(client: Client, **values: Any) -> str:
        named = _checked_positionals(path, usage, tuple(arg.name for arg in args), values) if usage else values
        fields = {arg.field: named.pop(arg.name) for arg in args}
        if resource.tenant_option:
            fields["tenantName"] = values.pop("tenant")
        refused = resource.check(values) if resource.check and verb_name in ("create", "update") else None
        if refused and usage:
            raise _netctl_refusal(path, usage, refused, with_help=usage.check_help)
        if refused:
            raise click.UsageError(refused)
        return verb.run(client, resource, fields, values)

    return _command(name, verb.help.format(name=resource.name), params, run)


_IGNORED_FLAGS: dict[str, Callable[[], click.Option]] = {
    "tenant": lambda: click.Option(["ignored_tenant", "--tenant", "-t"], hidden=True, expose_value=False),
    "all": lambda: click.Option(["ignored_all", "--all", "-a"], is_flag=True, hidden=True, expose_value=False),
    "quiet": lambda: click.Option(["ignored_quiet", "--quiet", "-q"], is_flag=True, hidden=True, expose_value=False),
}
"""netctl flags some read commands accept without effect: taken (so scripts run), unused, not shown."""


def _show_command(show: Show) -> click.Command:
    path = (show.group, show.name) if show.group else (show.name,)
    usage = USAGES.get(path)
    params: list[click.Parameter] = [_positionals(show.args)] if usage else [_argument(arg) for arg in show.args]
    params += [click.Argument([name], required=False, default="", metavar=f"[{name.upper().replace('_', '/')}]") for name in show.optional]
    if show.tenant:
        params.append(_tenant_option())
    params += [_IGNORED_FLAGS[name]() for name in show.ignored]

    def run(client: Client, json_output: bool, **values: Any) -> str:
        if usage:
            named = _checked_positionals(path, usage, show.args, values)
            values = {**values, **named}
        text, failure = actions.show(client, show, values, raw=json_output)
        if failure is None:
            return text
        click.echo(text, nl=False)
        raise AnswerFailed(failure)

    return _command(show.name, show.help, [*params, _json_flag()], run)


def _setter_command(setter: Setter) -> click.Command:
    def run(client: Client, **flags: Any) -> str:
        return actions.set_singleton(client, setter, flags)

    return _command("set", setter.help, [_option(option) for option in setter.options], run)


def _server_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value.startswith(UNIX_SCHEME):
        if not value.removeprefix(UNIX_SCHEME).startswith("/"):
            raise click.BadParameter(f"{value!r}: a unix socket server is unix:/absolute/path, e.g. unix:{DEFAULT_SOCKET}")
        return value
    if not value.startswith(("http://", "https://")):
        raise click.BadParameter(f"{value!r} is not an http:// or https:// URL, nor unix:/path of the node's API socket")
    return value


@click.pass_context
def _connect(ctx: click.Context, server: str, token: str | None, insecure: bool, ca_file: str | None, fingerprint: str | None) -> None:
    """The client for the subcommand, with flags over the environment over ctl.toml; the
    resolved server and token go back into the params, where every subcommand finds them."""
    given = ctx.get_parameter_source("server") not in (ParameterSource.DEFAULT, None)
    saved = read_settings(config_path())
    if not given and saved.server is None:
        server = default_server(os.geteuid())
    settings = effective(server, given, token, saved)
    target = settings.server or server
    ctx.params.update(server=target, token=settings.token)
    try:
        verify = verification(target, ca_file or settings.ca_file, fingerprint or settings.fingerprint, insecure)
    except TrustError as exc:
        raise CtlError(str(exc)) from None
    ctx.obj = ctx.with_resource(Client(target, settings.token, verify=verify))


def build(extra: Mapping[str, Sequence[click.Command]] | None = None) -> click.Group:
    """The `ctl` group with every declared command mounted (click lists them sorted, as netctl),
    plus `extra` commands by group name: those that need more than HTTP (contivd.cli adds
    `cluster snapshot`, which checks files with raftstore, which ctl may not import)."""
    root = _CtlRoot(
        "ctl",
        help="Manage contivd like netctl: tenants, networks, groups, policies, services … over the REST API.",
        callback=_connect,
        params=[
            click.Option(
                ["server", "--server", "--netmaster"], envvar=["CONTIVD_SERVER", "NETMASTER"], default=DEFAULT_SERVER,
                show_default=True, callback=_server_url,
                help=f"contivd API URL, or unix:/path of a node's API socket (root's default when {DEFAULT_SOCKET} exists); "
                "--netmaster as netctl [env CONTIVD_SERVER, else NETMASTER].",
            ),
            click.Option(
                ["token", "--token"], envvar="CONTIVD_TOKEN", default=None,
                help="Operator token (`auth token create`), sent as a bearer token; needed for writes except as root over the API socket "
                "[env CONTIVD_TOKEN, else ctl.toml].",
            ),
            click.Option(
                ["insecure", "--insecure"], envvar="INSECURE", is_flag=True,
                help="Do not verify the server's TLS certificate, as netctl's flag [env INSECURE].",
            ),
            click.Option(
                ["ca_file", "--ca-file"], envvar="CONTIVD_CA_FILE", default=None,
                help="Trust this CA (PEM) for https:// servers, e.g. a node's /var/lib/contivd/tls/ca.crt [env CONTIVD_CA_FILE].",
            ),
            click.Option(
                ["fingerprint", "--fingerprint"], envvar="CONTIVD_FINGERPRINT", default=None,
                help="Trust the server's CA only if its SHA-256 fingerprint is this one (`ctl cluster status` shows it) [env CONTIVD_FINGERPRINT].",
            ),
        ],
    )  # fmt: skip
    groups = {name: AliasedGroup(name, help=_help(text, name), short_help=_help(text, name)) for name, text in GROUPS.items()}
    for resource in RESOURCES:
        for verb, name in resource.verbs:
            groups[resource.group_name].add_command(_resource_command(resource, verb, name))
    for show in SHOWS:
        (groups[show.group] if show.group else root).add_command(_show_command(show))
    for setter in SETTERS:
        groups[setter.group].add_command(_setter_command(setter))
    groups["cluster"].add_command(voter_group)
    groups["cluster"].add_command(ca_group)
    for name, commands in (extra or {}).items():
        for command in commands:
            groups[name].add_command(command)
    for group in groups.values():
        root.add_command(group)
    for command in (auth_group, audit_group, login):
        root.add_command(command)
    return root


ctl_group = build()

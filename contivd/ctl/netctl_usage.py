"""netctl's usage errors: the arguments it requires, its messages, and the help it prints.

netctl checks its arguments itself (netctl/netctl.go: `if len(ctx.Args()) != 1 { errExit(ctx,
exitHelp, "Tenant name required", true) }`) and errExit logs the message on stderr, prints the
command's help on stdout through codegangsta/cli (`cli.ShowSubcommandHelp`) and exits 1. USAGES
holds, per command, what that needs: the help's summary, argument usage and flag lines exactly
as codegangsta/cli's `Flag.String()` writes them (contiv/netplugin's netctl/commands.go), the
number of positional arguments netctl accepts with the message for any other number, the flags
it requires, and whether its input checks (checks.py) print the help too. `help_text` renders
codegangsta/cli's CommandHelpTemplate; `refusal` is netctl's order of checks. Pure data and
functions: main.py raises and prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import output

TENANT = '--tenant, -t "default"\tName of the tenant'
ALL = "--all, -a\tList all items"
JSON = "--json, -j\tOutput list in JSON format"
QUIET = "--quiet, -q\tOnly display name field"
EXTRA = "More arguments than required"
HELP_TAB_WIDTH = 8  # codegangsta/cli's printHelp: tabwriter.NewWriter(out, 0, 8, 1, '\t', 0)
HELP_PADDING = 1


@dataclass(frozen=True)
class Usage:
    """One netctl command: `summary` and `args_usage` (its Usage and ArgsUsage), its flags' help
    lines, `args` the (fewest, most) positional arguments it takes (None: no limit), refused with
    `wrong_args`; `required` the (click parameter, message) pairs netctl refuses when empty, after
    the arguments; `check_help` whether its input checks (checks.py) print the help as well."""

    summary: str
    args_usage: str
    flags: tuple[str, ...]
    args: tuple[int, int | None]
    wrong_args: str
    required: tuple[tuple[str, str], ...] = ()
    check_help: bool = True


USAGES: Mapping[tuple[str, ...], Usage] = {
    ('aci-gw', 'info'): Usage(
        'Show aci gateway information', ' ',
        (TENANT, ALL, JSON),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('aci-gw', 'inspect'): Usage(
        'Inspect aci gateway operational information', ' ',
        (),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('app-profile', 'create'): Usage(
        'Create an application profile', '[app-profile]',
        (TENANT, "--group, -g \tEndpoint Group List (separated by commas)"),
        args=(1, 1), wrong_args='Profile name required',
    ),
    ('app-profile', 'group-ls'): Usage(
        'List groups in an app-profile', '[network] [app-profile]',
        (TENANT, ALL, JSON, QUIET),
        args=(1, 1), wrong_args='Profile name required',
    ),
    ('app-profile', 'ls'): Usage(
        'List Application Profiles', ' ',
        (TENANT, ALL, JSON, QUIET),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('app-profile', 'rm'): Usage(
        'Delete an application profile', '[app-profile]',
        (TENANT,),
        args=(1, 1), wrong_args='Profile name required',
    ),
    ('app-profile', 'update'): Usage(
        'Update an application profile', '[app-profile]',
        (TENANT, "--group, -g \tEndpoint Group List (separated by commas)"),
        args=(1, 1), wrong_args='Profile name required',
    ),
    ('bgp', 'create'): Usage(
        'Add BGP configuration.', '[hostname]',
        (
            "--router-ip \tBGP my-router ip ",
            "--as \tSelf AS id",
            "--neighbor-as \tBGP neighbor AS id",
            "--neighbor \tBGP neighbor to be added",
        ),
        args=(1, None), wrong_args='Host name required',
    ),
    ('bgp', 'inspect'): Usage(
        'Inspect Bgp', '[hostname]',
        (),
        args=(1, 1), wrong_args='Host name required',
    ),
    ('bgp', 'ls'): Usage(
        'List BGP configuration', '[hostname]',
        (JSON, QUIET),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('bgp', 'rm'): Usage(
        'Delete BGP configuration', '[hostname]',
        (),
        args=(1, 1), wrong_args='Host name required',
    ),
    ('endpoint', 'inspect'): Usage(
        'Inspect an Endpoint', '[epid]',
        (),
        args=(1, 1), wrong_args='Endpoint name required',
    ),
    ('external-contracts', 'create'): Usage(
        'Create external contracts', '',
        (
            TENANT,
            "--consumed, -c\tExternal contracts type - consumed",
            "--provided, -p\tExternal contracts type - provided",
            "--contract, -a [--contract option --contract option]\tContract",
        ),
        args=(1, 1), wrong_args='Contracts group name required',
        check_help=False,
    ),
    ('external-contracts', 'ls'): Usage(
        'List external contracts', '',
        (QUIET, ALL, JSON, TENANT),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('external-contracts', 'rm'): Usage(
        'Delete external contracts', '',
        (TENANT,),
        args=(1, 1), wrong_args='Contracts group name required',
    ),
    ('global', 'info'): Usage(
        'Show global information', ' ',
        (TENANT, ALL, JSON),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('global', 'inspect'): Usage(
        'Inspect Global Operational Information', ' ',
        (),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('group', 'create'): Usage(
        'Create an endpoint group', '[network] [group]',
        (
            TENANT,
            "--policy, -p [--policy option --policy option]\tPolicy",
            "--networkprofile, -n \tnetwork profile",
            "--external-contract, -e [--external-contract option --external-contract option]\tExternal contract",
            "--ip-pool, -r \tIP Address range, example 10.36.0.1-10.36.0.10",
            "--epg-tag, --tag \tConfigured Group Tag",
        ),
        args=(2, 2), wrong_args='Network and group name required',
    ),
    ('group', 'inspect'): Usage(
        'Inspect a EndpointGroup', '[group]',
        (TENANT,),
        args=(1, 1), wrong_args='EndpointGroup name required',
    ),
    ('group', 'ls'): Usage(
        'List endpoint groups', ' ',
        (TENANT, ALL, JSON, QUIET),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('group', 'rm'): Usage(
        'Delete an endpoint group', '[group]',
        (TENANT,),
        args=(1, 1), wrong_args='EndpointGroup name required',
    ),
    ('netprofile', 'create'): Usage(
        'Create a network profile', '[netprofile]',
        (
            TENANT,
            "--bandwidth, -b \tBandwidth (e.g., 10 kbps, 100 mbps, 1gbps)",
            "--dscp, -d \"0\"\tDSCP",
            "--burst, -s \"0\"\tburst size(Must be in kilobytes)",
        ),
        args=(1, 1), wrong_args='Net profile name required',
    ),
    ('netprofile', 'inspect'): Usage(
        'inspect network profile', '[netprofile]',
        (TENANT,),
        args=(1, 1), wrong_args='Net profile name required',
    ),
    ('netprofile', 'ls'): Usage(
        'List network profile', ' ',
        (TENANT, ALL, JSON, QUIET),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('netprofile', 'rm'): Usage(
        'Delete a network profile', '[network] [group]',
        (TENANT,),
        args=(1, 1), wrong_args='Net profile name required',
    ),
    ('network', 'create'): Usage(
        'Create a network', '[network]',
        (
            TENANT,
            "--nw-type, -n \"data\"\tNetwork Type (infra or data)",
            "--encap, -e \"vxlan\"\tEncap type (vlan or vxlan)",
            "--pkt-tag, -p \"0\"\tPacket tag (Vlan ID/VNI)",
            "--subnet, -s \tSubnet CIDR - REQUIRED",
            "--gateway, -g \tGateway",
            "--subnetv6, --s6 \tIPv6 Subnet CIDR ",
            "--gatewayv6, --g6 \tIPv6 Gateway",
            "--nw-tag, --tag \tConfigured Network Tag",
        ),
        args=(1, 1), wrong_args='Network name required',
        required=(("subnet", "Subnet is required"),),
    ),
    ('network', 'inspect'): Usage(
        'Inspect a Network', '[network]',
        (TENANT,),
        args=(1, 1), wrong_args='Network name required',
    ),
    ('network', 'ls'): Usage(
        'List networks', ' ',
        (TENANT, ALL, JSON, QUIET),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('network', 'rm'): Usage(
        'Delete a network', '[network]',
        (TENANT,),
        args=(1, 1), wrong_args='Network name required',
    ),
    ('policy', 'create'): Usage(
        'Create a new policy', '[policy]',
        (TENANT,),
        args=(1, 1), wrong_args='Policy name required',
    ),
    ('policy', 'inspect'): Usage(
        'Inspect a policy', '[policy]',
        (TENANT,),
        args=(1, 1), wrong_args='Policy name required',
    ),
    ('policy', 'ls'): Usage(
        'List policies', ' ',
        (TENANT, ALL, JSON, QUIET),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('policy', 'rm'): Usage(
        'Delete a policy', '[policy]',
        (TENANT,),
        args=(1, 1), wrong_args='Policy name required',
    ),
    ('policy', 'rule-add'): Usage(
        'Add a new rule to the policy', '[policy] [rule id]',
        (
            TENANT,
            "--priority, -p \"1\"\tPriority Indicator",
            "--direction, -d \"in\"\tDirection of traffic (in/out)",
            "--from-group, -g \tFrom Endpoint Group Name (Valid in incoming direction only)",
            "--to-group, -e \tTo Endpoint Group Name (Valid in outgoing direction only)",
            "--from-network, -n \tFrom Network name (Valid in incoming direction only)",
            "--to-network, -o \tTo Network name (Valid in outgoing direction only)",
            "--from-ip-address, -i \tFrom IP address/CIDR (Valid in incoming direction only)",
            "--to-ip-address, -s \tTo IP address/CIDR (Valid in outgoing direction only)",
            "--protocol, -l \tProtocol (e.g., tcp, udp, icmp)",
            "--port, -P \"0\"\tPort",
            "--action, -j \"allow\"\tAction to take (allow or deny)",
        ),
        args=(2, 2), wrong_args='Policy name and Rule ID required',
        check_help=False,
    ),
    ('policy', 'rule-ls'): Usage(
        'List rules for a given tenant,policy', '[policy]',
        (TENANT, JSON, QUIET),
        args=(1, 1), wrong_args='Policy name required',
    ),
    ('policy', 'rule-rm'): Usage(
        'Delete a rule from the policy', '[policy] [rule id]',
        (TENANT,),
        args=(2, 2), wrong_args='Policy name and Rule ID required',
    ),
    ('service', 'create'): Usage(
        'Create Service object (only for docker version <= 1.12.x)', '[servicename]',
        (
            "--tenant, -t \tservice tenant",
            "--network, -s \tservice network name",
            "--selector, -l [--selector option --selector option]\tservice selector .Usage: --selector=key1=value1 --selector=key2=value2",
            "--port, -p [--port option --port option]\tservice/provider Port Usage- --port=svcPort1:provPort1:protocol --port=svcPort2:provPort2:protocol",
            "--preferred-ip, --ip \tpreferred ip address",
        ),
        args=(1, 1), wrong_args='Service name required',
    ),
    ('service', 'inspect'): Usage(
        'Inspect a Network', '[servicename]',
        (TENANT,),
        args=(1, 1), wrong_args='Service group name required',
    ),
    ('service', 'rm'): Usage(
        'Delete service object', '[servicename]',
        ("--tenant, -t \tservice tenant",),
        args=(1, 1), wrong_args='Service name required',
    ),
    ('tenant', 'create'): Usage(
        'Create a tenant', '[tenant]',
        (),
        args=(1, 1), wrong_args='Tenant name required',
    ),
    ('tenant', 'inspect'): Usage(
        'Inspect a tenant', '[tenant]',
        (),
        args=(1, 1), wrong_args='Tenant name required',
    ),
    ('tenant', 'ls'): Usage(
        'List tenants', ' ',
        (QUIET, JSON),
        args=(0, 0), wrong_args=EXTRA,
    ),
    ('tenant', 'rm'): Usage(
        'Delete a tenant', '[tenant]',
        (),
        args=(1, 1), wrong_args='Tenant name required',
    ),
    ('version',): Usage(
        'Version Information', '',
        (),
        args=(0, 0), wrong_args=EXTRA,
    ),
}  # fmt: skip
"""Every netctl command that checks its arguments, by its canonical names (`network create`)."""


def help_text(program: str, path: Sequence[str], usage: Usage) -> str:
    """What codegangsta/cli's CommandHelpTemplate prints for the command, `program` standing
    for netctl's argv[0] (`contivd ctl`), laid out by its tabwriter (tabs, width 8)."""
    name = " ".join([program, *path])
    options = " [command options]" if usage.flags else ""
    text = f"NAME:\n   {name} - {usage.summary}\n\nUSAGE:\n   {name}{options} {usage.args_usage or '[arguments...]'}"
    if usage.flags:
        text += "\n\nOPTIONS:\n   " + "".join(f"{flag}\n   " for flag in usage.flags)
    return output.tabwriter(text + "\n", HELP_PADDING, tab_width=HELP_TAB_WIDTH)


def refusal(usage: Usage, positionals: Sequence[str], flags: Mapping[str, Any]) -> str | None:
    """netctl's message for the first problem it checks, arguments then required flags, or None."""
    fewest, most = usage.args
    if len(positionals) < fewest or (most is not None and len(positionals) > most):
        return usage.wrong_args
    return next((message for param, message in usage.required if not flags.get(param)), None)

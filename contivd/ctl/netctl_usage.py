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
SERVICE_TENANT = "--tenant, -t \tservice tenant"  # netctl's service create and rm: no default, their own words
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


LIST_FLAGS = (TENANT, ALL, JSON, QUIET)

APP_PROFILE_FLAGS = (TENANT, "--group, -g \tEndpoint Group List (separated by commas)")  # create and update

BGP_CREATE_FLAGS = (
    "--router-ip \tBGP my-router ip ",
    "--as \tSelf AS id",
    "--neighbor-as \tBGP neighbor AS id",
    "--neighbor \tBGP neighbor to be added",
)

EXTERNAL_CONTRACTS_CREATE_FLAGS = (
    TENANT,
    "--consumed, -c\tExternal contracts type - consumed",
    "--provided, -p\tExternal contracts type - provided",
    "--contract, -a [--contract option --contract option]\tContract",
)

GROUP_CREATE_FLAGS = (
    TENANT,
    "--policy, -p [--policy option --policy option]\tPolicy",
    "--networkprofile, -n \tnetwork profile",
    "--external-contract, -e [--external-contract option --external-contract option]\tExternal contract",
    "--ip-pool, -r \tIP Address range, example 10.36.0.1-10.36.0.10",
    "--epg-tag, --tag \tConfigured Group Tag",
)

NETPROFILE_CREATE_FLAGS = (
    TENANT,
    "--bandwidth, -b \tBandwidth (e.g., 10 kbps, 100 mbps, 1gbps)",
    '--dscp, -d "0"\tDSCP',
    '--burst, -s "0"\tburst size(Must be in kilobytes)',
)

NETWORK_CREATE_FLAGS = (
    TENANT,
    '--nw-type, -n "data"\tNetwork Type (infra or data)',
    '--encap, -e "vxlan"\tEncap type (vlan or vxlan)',
    '--pkt-tag, -p "0"\tPacket tag (Vlan ID/VNI)',
    "--subnet, -s \tSubnet CIDR - REQUIRED",
    "--gateway, -g \tGateway",
    "--subnetv6, --s6 \tIPv6 Subnet CIDR ",
    "--gatewayv6, --g6 \tIPv6 Gateway",
    "--nw-tag, --tag \tConfigured Network Tag",
)

POLICY_RULE_ADD_FLAGS = (
    TENANT,
    '--priority, -p "1"\tPriority Indicator',
    '--direction, -d "in"\tDirection of traffic (in/out)',
    "--from-group, -g \tFrom Endpoint Group Name (Valid in incoming direction only)",
    "--to-group, -e \tTo Endpoint Group Name (Valid in outgoing direction only)",
    "--from-network, -n \tFrom Network name (Valid in incoming direction only)",
    "--to-network, -o \tTo Network name (Valid in outgoing direction only)",
    "--from-ip-address, -i \tFrom IP address/CIDR (Valid in incoming direction only)",
    "--to-ip-address, -s \tTo IP address/CIDR (Valid in outgoing direction only)",
    "--protocol, -l \tProtocol (e.g., tcp, udp, icmp)",
    '--port, -P "0"\tPort',
    '--action, -j "allow"\tAction to take (allow or deny)',
)

SERVICE_CREATE_FLAGS = (
    SERVICE_TENANT,
    "--network, -s \tservice network name",
    "--selector, -l [--selector option --selector option]\tservice selector .Usage: --selector=key1=value1 --selector=key2=value2",
    "--port, -p [--port option --port option]\tservice/provider Port Usage- --port=svcPort1:provPort1:protocol --port=svcPort2:provPort2:protocol",
    "--preferred-ip, --ip \tpreferred ip address",
)


def _named(
    summary: str,
    args_usage: str,
    wrong_args: str,
    *,
    flags: tuple[str, ...] = (TENANT,),
    count: int = 1,
    required: tuple[tuple[str, str], ...] = (),
    check_help: bool = True,
) -> Usage:
    """A command of `count` names (netctl: `if len(ctx.Args()) != count`), by default with `-t`."""
    return Usage(summary, args_usage, flags, (count, count), wrong_args, required, check_help)


def _listing(summary: str, *, flags: tuple[str, ...] = LIST_FLAGS, args_usage: str = " ") -> Usage:
    """A command of no argument (netctl: `if len(ctx.Args()) != 0`), by default `ls`'s flags."""
    return Usage(summary, args_usage, flags, (0, 0), EXTRA)


USAGES: Mapping[tuple[str, ...], Usage] = {
    ("aci-gw", "info"): _listing("Show aci gateway information", flags=(TENANT, ALL, JSON)),
    ("aci-gw", "inspect"): _listing("Inspect aci gateway operational information", flags=()),
    ("app-profile", "create"): _named("Create an application profile", "[app-profile]", "Profile name required", flags=APP_PROFILE_FLAGS),
    ("app-profile", "group-ls"): _named("List groups in an app-profile", "[network] [app-profile]", "Profile name required", flags=LIST_FLAGS),
    ("app-profile", "ls"): _listing("List Application Profiles"),
    ("app-profile", "rm"): _named("Delete an application profile", "[app-profile]", "Profile name required"),
    ("app-profile", "update"): _named("Update an application profile", "[app-profile]", "Profile name required", flags=APP_PROFILE_FLAGS),
    ("bgp", "create"): Usage("Add BGP configuration.", "[hostname]", BGP_CREATE_FLAGS, (1, None), "Host name required"),
    ("bgp", "inspect"): _named("Inspect Bgp", "[hostname]", "Host name required", flags=()),
    ("bgp", "ls"): _listing("List BGP configuration", flags=(JSON, QUIET), args_usage="[hostname]"),
    ("bgp", "rm"): _named("Delete BGP configuration", "[hostname]", "Host name required", flags=()),
    ("endpoint", "inspect"): _named("Inspect an Endpoint", "[epid]", "Endpoint name required", flags=()),
    ("external-contracts", "create"): _named(
        "Create external contracts", "", "Contracts group name required", flags=EXTERNAL_CONTRACTS_CREATE_FLAGS, check_help=False
    ),
    ("external-contracts", "ls"): _listing("List external contracts", flags=(QUIET, ALL, JSON, TENANT), args_usage=""),
    ("external-contracts", "rm"): _named("Delete external contracts", "", "Contracts group name required"),
    ("global", "info"): _listing("Show global information", flags=(TENANT, ALL, JSON)),
    ("global", "inspect"): _listing("Inspect Global Operational Information", flags=()),
    ("group", "create"): _named(
        "Create an endpoint group", "[network] [group]", "Network and group name required", flags=GROUP_CREATE_FLAGS, count=2
    ),
    ("group", "inspect"): _named("Inspect a EndpointGroup", "[group]", "EndpointGroup name required"),
    ("group", "ls"): _listing("List endpoint groups"),
    ("group", "rm"): _named("Delete an endpoint group", "[group]", "EndpointGroup name required"),
    ("netprofile", "create"): _named("Create a network profile", "[netprofile]", "Net profile name required", flags=NETPROFILE_CREATE_FLAGS),
    ("netprofile", "inspect"): _named("inspect network profile", "[netprofile]", "Net profile name required"),
    ("netprofile", "ls"): _listing("List network profile"),
    ("netprofile", "rm"): _named("Delete a network profile", "[network] [group]", "Net profile name required"),
    ("network", "create"): _named(
        "Create a network", "[network]", "Network name required", flags=NETWORK_CREATE_FLAGS, required=(("subnet", "Subnet is required"),)
    ),
    ("network", "inspect"): _named("Inspect a Network", "[network]", "Network name required"),
    ("network", "ls"): _listing("List networks"),
    ("network", "rm"): _named("Delete a network", "[network]", "Network name required"),
    ("policy", "create"): _named("Create a new policy", "[policy]", "Policy name required"),
    ("policy", "inspect"): _named("Inspect a policy", "[policy]", "Policy name required"),
    ("policy", "ls"): _listing("List policies"),
    ("policy", "rm"): _named("Delete a policy", "[policy]", "Policy name required"),
    ("policy", "rule-add"): _named(
        "Add a new rule to the policy",
        "[policy] [rule id]",
        "Policy name and Rule ID required",
        flags=POLICY_RULE_ADD_FLAGS,
        count=2,
        check_help=False,
    ),
    ("policy", "rule-ls"): _named("List rules for a given tenant,policy", "[policy]", "Policy name required", flags=(TENANT, JSON, QUIET)),
    ("policy", "rule-rm"): _named("Delete a rule from the policy", "[policy] [rule id]", "Policy name and Rule ID required", count=2),
    ("service", "create"): _named(
        "Create Service object (only for docker version <= 1.12.x)", "[servicename]", "Service name required", flags=SERVICE_CREATE_FLAGS
    ),
    ("service", "inspect"): _named("Inspect a Network", "[servicename]", "Service group name required"),
    ("service", "rm"): _named("Delete service object", "[servicename]", "Service name required", flags=(SERVICE_TENANT,)),
    ("tenant", "create"): _named("Create a tenant", "[tenant]", "Tenant name required", flags=()),
    ("tenant", "inspect"): _named("Inspect a tenant", "[tenant]", "Tenant name required", flags=()),
    ("tenant", "ls"): _listing("List tenants", flags=(QUIET, JSON)),
    ("tenant", "rm"): _named("Delete a tenant", "[tenant]", "Tenant name required", flags=()),
    ("version",): _listing("Version Information", flags=(), args_usage=""),
}
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

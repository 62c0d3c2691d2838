"""netctl's usage errors (contivd/ctl/netctl_usage.py): its checks and its help, pure."""

from __future__ import annotations

from contivd.ctl import output
from contivd.ctl.commands import RESOURCES, SHOWS
from contivd.ctl.netctl_usage import USAGES, help_text, refusal

NETWORK_CREATE_HELP = (
    "NAME:\n   contivd ctl network create - Create a network\n\n"
    "USAGE:\n   contivd ctl network create [command options] [network]\n\n"
    "OPTIONS:\n"
    '   --tenant, -t "default"\tName of the tenant\n'
    '   --nw-type, -n "data"\t\tNetwork Type (infra or data)\n'
    '   --encap, -e "vxlan"\t\tEncap type (vlan or vxlan)\n'
    '   --pkt-tag, -p "0"\t\tPacket tag (Vlan ID/VNI)\n'
    "   --subnet, -s \t\tSubnet CIDR - REQUIRED\n"
    "   --gateway, -g \t\tGateway\n"
    "   --subnetv6, --s6 \t\tIPv6 Subnet CIDR \n"
    "   --gatewayv6, --g6 \t\tIPv6 Gateway\n"
    "   --nw-tag, --tag \t\tConfigured Network Tag\n"
    "   \n"
)
"""What the original netctl prints on stdout for `network create` without --subnet (its argv[0] replaced)."""


def test_help_is_codegangsta_clis_command_template_padded_with_tabs() -> None:
    assert help_text("contivd ctl", ("network", "create"), USAGES[("network", "create")]) == NETWORK_CREATE_HELP
    assert (
        help_text("netctl", ("version",), USAGES[("version",)])
        == "NAME:\n   netctl version - Version Information\n\nUSAGE:\n   netctl version [arguments...]\n"
    )


def test_tab_padding_rounds_each_column_up_to_the_tab_width_as_go() -> None:
    assert output.tabwriter("ab\tc\nabcdefgh\td\n", 1, tab_width=8) == "ab\t\tc\nabcdefgh\td\n"
    assert output.tabwriter("a\tb\n", 1, tab_width=8) == "a\tb\n"


def test_refusals_follow_netctls_order_arguments_then_required_flags() -> None:
    create = USAGES[("network", "create")]
    assert refusal(create, [], {}) == "Network name required", "the name is checked before the subnet"
    assert refusal(create, ["n"], {"subnet": None}) == "Subnet is required"
    assert refusal(create, ["n"], {"subnet": "198.18.0.0/24"}) is None
    assert refusal(USAGES[("tenant", "ls")], ["x"], {}) == "More arguments than required"
    assert refusal(USAGES[("bgp", "create")], ["h", "extra"], {}) is None, "netctl's bgp create ignores extra arguments"


def test_every_usage_names_a_command_ctl_has() -> None:
    commands = {(r.group_name, name) for r in RESOURCES for _, name in r.verbs} | {(s.group, s.name) if s.group else (s.name,) for s in SHOWS}
    assert set(USAGES) <= commands

"""The declared command table: netctl's tree, consistent declarations, no flag clashes."""

from __future__ import annotations

import click
import pytest

from contivd.ctl import ctl_group
from contivd.ctl.commands import ALIASES, GROUPS, RESOURCES, SETTERS, SHOWS, Option, parents

NETCTL_TREE = {
    "version",
    *(f"{group} {verb}" for group in ("tenant", "policy", "bgp") for verb in ("create", "rm", "ls", "inspect")),
    *(f"{group} {verb}" for group in ("network", "group", "netprofile", "service", "external-contracts") for verb in ("create", "rm", "ls", "inspect")),
    "policy rule-add", "policy rule-rm", "policy rule-ls",
    "app-profile create", "app-profile update", "app-profile rm", "app-profile ls", "app-profile inspect", "app-profile group-ls",
    "global info", "global inspect", "global set", "aci-gw info", "aci-gw inspect", "aci-gw set",
    "endpoint inspect", "cluster status",
}  # fmt: skip
CONTIVD_ONLY = {
    "auth token create", "auth token ls", "auth token revoke", "audit ls", "login",  # access control: netctl had none
    "trace",  # Contiv's and NetworkPolicy's verdict for a packet, and both nodes' OVS answers
    "policy hits",  # rule hit counters summed over the nodes
    "cluster voter add", "cluster voter remove",  # contivd's own Raft voters
    "cluster ca rotate",  # the cluster CA behind every node's TLS certificate
}  # fmt: skip


def leaves(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found.update(leaves(command, f"{prefix}{name} "))
        else:
            found[prefix + name] = command
    return found


def test_tree_is_netctls() -> None:
    assert set(leaves(ctl_group)) == NETCTL_TREE | CONTIVD_ONLY
    assert set(ctl_group.commands) == set(GROUPS) | {"version", "auth", "audit", "login", "trace"}


@pytest.mark.parametrize("path", ["net ls", "ep inspect", "tenant delete", "network list", "app-profile group-list"])
def test_netctl_aliases_resolve(path: str) -> None:
    group: click.Command | None = ctl_group
    for name in path.split():
        assert isinstance(group, click.Group)
        group = group.get_command(click.Context(group), name)
    assert group is not None and group.name == ALIASES.get(path.split()[-1], path.split()[-1])


@pytest.mark.parametrize("path", sorted(NETCTL_TREE))
def test_no_flag_is_declared_twice_in_a_command(path: str) -> None:
    command = leaves(ctl_group)[path]
    flags = [opt for param in command.params for opt in param.opts if opt.startswith("-")]
    assert len(flags) == len(set(flags)), flags


def test_every_key_field_comes_from_an_argument_or_the_tenant_flag() -> None:
    for resource in RESOURCES:
        named = {arg.field for arg in resource.args} | ({"tenantName"} if resource.tenant_option else set())
        assert set(resource.key) <= named, resource.name
        assert resource.identity_args[-1].field == resource.key[-1], resource.name
        assert {column.field for table in resource.tables for column in table.columns}, resource.name


def test_parents_are_found_from_key_prefixes() -> None:
    by_name = {r.name: r for r in RESOURCES}
    assert [p.name for p in parents(by_name["rule"])] == ["tenant", "policy"]
    assert [p.name for p in parents(by_name["network"])] == ["tenant"]
    assert parents(by_name["tenant"]) == parents(by_name["bgp"]) == ()


def test_groups_of_every_declaration_exist() -> None:
    assert {r.group_name for r in RESOURCES} | {s.group for s in SHOWS if s.group} | {s.group for s in SETTERS} <= set(GROUPS)


@pytest.mark.parametrize(
    "option, value, encoded",
    [
        (Option(("--group",), "endpointGroups", "", kind="csv"), "a, b,,c", ["a", "b", "c"]),
        (Option(("--group",), "endpointGroups", "", kind="csv"), ",", None),
        (Option(("--policy",), "policies", "", kind="list"), ("p1", "p2"), ["p1", "p2"]),
        (Option(("--policy",), "policies", "", kind="list"), (), None),
        (Option(("--gateway",), "gateway", ""), "", None),
        (Option(("--port",), "port", "", kind="int"), 0, 0),
    ],
)
def test_option_encoding(option: Option, value: object, encoded: object) -> None:
    assert option.encode(value) == encoded
    assert option.param == option.flags[0][2:]

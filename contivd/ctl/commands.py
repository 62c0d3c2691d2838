"""`contivd ctl`'s commands declared as data: name → REST path → params → columns → renderer.

Three kinds of record cover netctl's whole tree (contiv-api.md §2):
- `Resource`: a REST collection with create/rm/ls/inspect (and, where netctl has them,
  update or renamed verbs such as `policy rule-add`). Its key fields, positional arguments
  and flags determine the URL, the JSON body, the tenant filter and the `-q` names.
- `Show`: one GET rendered by a function (`version`, `cluster status`, `global info` …).
- `Setter`: read-modify-write of a singleton (`global set`, `aci-gw set`).
main.py turns the records into click commands and actions.py runs them, so a new object
type or flag is a change to this module only. Flag names, short forms and defaults follow
netctl; where contivd differs on purpose the record says why. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from .. import __version__
from . import checks, output, views

DEFAULT_TENANT = "default"

GROUPS: Mapping[str, str] = {
    "aci-gw": "ACI gateway settings (stored and validated only).",
    "app-profile": "Application profiles: sets of endpoint groups.",
    "bgp": "BGP router configuration per host.",
    "cluster": "The contivd cluster: raft membership, leader, registered nodes.",
    "endpoint": "Endpoints (containers attached to networks).",
    "external-contracts": "External contract groups (ACI; stored and validated only).",
    "global": "Cluster-wide settings: forwarding mode, VLAN/VXLAN ranges …",
    "group": "Endpoint groups within a network.",
    "netprofile": "Network profiles: bandwidth, DSCP and burst for endpoint groups.",
    "network": "Networks.",
    "policy": "Policies and their rules.",
    "service": "Service load balancers.",
    "tenant": "Tenants.",
}
"""Every command group and its help, sorted by name as netctl sorts them."""

ALIASES: Mapping[str, str] = {"net": "network", "ep": "endpoint", "delete": "rm", "list": "ls", "group-list": "group-ls"}
"""netctl's alternative command names → the canonical name (at any level of the tree)."""


@dataclass(frozen=True)
class Arg:
    """A positional argument and the JSON field it fills."""

    name: str  # a Python identifier; shown upper-case in usage
    field: str


@dataclass(frozen=True)
class Option:
    """A flag of a write command and the JSON field it fills.

    kind: `str`/`int` scalar, `list` repeatable flag, `csv` one comma-separated value.
    `flag_value`: a valueless flag that writes this string (`--provided`, `--consumed`).
    """

    flags: tuple[str, ...]  # long form first: it names the click parameter
    field: str
    help: str
    kind: Literal["str", "int", "list", "csv"] = "str"
    default: str | int | None = None
    required: bool = False
    flag_value: str | None = None

    @property
    def param(self) -> str:
        """The click parameter name, derived from the long flag (`--ip-pool` → `ip_pool`)."""
        return self.flags[0].lstrip("-").replace("-", "_")

    def encode(self, value: Any) -> Any:
        """The JSON value for what click parsed; None means "leave the field out", as
        Contiv's `omitempty` does for unset strings, lists and numbers."""
        if value is None or value == "" or value == ():
            return None
        if self.kind == "csv":
            return [part.strip() for part in str(value).split(",") if part.strip()] or None
        if self.kind == "list":
            return list(value)
        return value


def encode_options(options: tuple[Option, ...], values: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON fields set by the given flags (keyed by `Option.param`); unset flags are left out."""
    body: dict[str, Any] = {}
    for option in options:
        value = option.encode(values.get(option.param))
        if value is not None:
            body[option.field] = value
    return body


@dataclass(frozen=True)
class Column:
    """One cell of a table row: the JSON field, how netctl prints it (Go's `%v` of the
    decoded struct field, so an absent number is `0`), and the field whose emptiness
    drops the cell (netctl's netprofile rows have no burst cell without a bandwidth)."""

    field: str
    cell: Callable[[Any], str] = output.cell
    only_if: str | None = None


@dataclass(frozen=True)
class Table:
    """One table of an `ls`, as netctl writes it through Go's tabwriter: its literal header
    and dashed lines (netctl's dashes do not always match the header's width), the row cells,
    `tail` after the last one (netctl's service rows end in a tab), a title and a row filter."""

    header: str
    rule: str
    columns: tuple[Column, ...]
    title: str | None = None
    where: tuple[tuple[str, str], ...] = ()
    tail: str = ""

    def text(self, objects: list[dict[str, Any]]) -> str:
        """The table as netctl hands it to the tabwriter (tab-separated, newline-ended lines)."""
        rows = [
            "\t".join(column.cell(obj.get(column.field)) for column in self.columns if not column.only_if or obj.get(column.only_if)) + self.tail
            for obj in objects
            if all(obj.get(name) == value for name, value in self.where)
        ]
        return "".join(f"{line}\n" for line in [*([self.title] if self.title else []), self.header, self.rule, *rows])

    def counted(self) -> Table:
        """The table with packets and bytes columns after the declared ones (`ls --hits`)."""
        return Table(
            f"{self.header}\tPackets\tBytes", f"{self.rule}\t-------\t-----", (*self.columns, Column("packets"), Column("bytes")),
            self.title, self.where, self.tail,
        )  # fmt: skip


@dataclass(frozen=True)
class Counters:
    """Hit counters an `ls --hits` adds to each row (contivd only: netctl had none): GET `path`
    (formatted with the scope's key fields), take `section` of the answer and give each object
    the counts under its `key` (formatted with the object's fields); `unanswered` names the
    nodes whose counts are missing."""

    path: str
    section: str
    key: str


@dataclass(frozen=True)
class Beside:
    """A second table an `ls` prints after its own when the path answers rows (Kubernetes
    Services beside Contiv's service load balancers; none outside Kubernetes mode, so netctl's
    output is unchanged there); `--json` and `-q` keep netctl's shape."""

    path: str
    table: Table


STANDARD_VERBS: tuple[tuple[str, str], ...] = (("create", "create"), ("rm", "rm"), ("ls", "ls"), ("inspect", "inspect"))


@dataclass(frozen=True)
class Resource:
    """An object collection and the commands netctl has for it.

    `key` lists the fields that make the object's key, in order (`tenantName:networkName`).
    `args` are the positional arguments of create; rm and inspect take those that are key
    fields. A key field no argument fills is `tenantName`, which becomes `-t/--tenant`.
    `verbs` maps each action (create, update, rm, ls, inspect) to its command name, and
    `group` mounts the commands in another group (rules live under `policy`).
    `said` is what netctl prints once an action succeeded, per action (a format string over
    `key` and the fields; an action missing from it prints nothing, as in netctl).
    `check` refuses input as netctl does before sending (checks.py); `order_by` sorts
    every `ls` format (netctl lists rules by priority). `model` names the Go struct netctl
    prints the objects as (fieldorder.py): `ls --json` in its field order, `inspect` in
    `<model>Inspect`'s.
    """

    name: str
    collection: str
    model: str
    key: tuple[str, ...]
    args: tuple[Arg, ...]
    tables: tuple[Table, ...]
    options: tuple[Option, ...] = ()
    verbs: tuple[tuple[str, str], ...] = STANDARD_VERBS
    group: str | None = None
    beside: Beside | None = None
    said: tuple[tuple[str, str], ...] = ()
    check: Callable[[Mapping[str, Any]], str | None] | None = None
    order_by: str | None = None
    counters: Counters | None = None

    @property
    def group_name(self) -> str:
        return self.group or self.name

    @property
    def tenant_option(self) -> bool:
        """Whether the tenant comes from `-t/--tenant` rather than a positional argument."""
        return "tenantName" in self.key and all(arg.field != "tenantName" for arg in self.args)

    @property
    def identity_args(self) -> tuple[Arg, ...]:
        """The positional arguments of rm/inspect: those naming key fields."""
        return tuple(arg for arg in self.args if arg.field in self.key)

    @property
    def scope_args(self) -> tuple[Arg, ...]:
        """The positional arguments of ls: the enclosing object (a rule's policy), if any."""
        return self.identity_args[:-1]

    @property
    def all_tenants_flag(self) -> bool:
        """ls offers `-a/--all` when only the tenant scopes it (netctl: not for rule-ls)."""
        return self.tenant_option and not self.scope_args

    def key_of(self, fields: Mapping[str, Any]) -> str:
        return ":".join(str(fields[name]) for name in self.key)

    def message(self, action: str, fields: Mapping[str, Any]) -> str:
        """What netctl prints after `action` succeeded (empty when it prints nothing)."""
        template = dict(self.said).get(action)
        return template.format(key=self.key_of(fields), **fields) + "\n" if template else ""

    def body(self, fields: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON object a create/update sends: the named fields plus the flags given."""
        return {**fields, **encode_options(self.options, flags)}


_NUMBER = views.number
_RULE_TAIL = (Column("toIpAddress"), Column("protocol"), Column("port", _NUMBER), Column("action"))

RESOURCES: tuple[Resource, ...] = (
    Resource(
        "tenant", "tenants", "Tenant", ("tenantName",), (Arg("tenant", "tenantName"),),
        (Table("Name\t", "------\t", (Column("tenantName"),), tail="\t"),),
        said=(("create", "Creating tenant: {key}"), ("rm", "Deleting tenant {key}")),
    ),
    Resource(
        "network", "networks", "Network", ("tenantName", "networkName"), (Arg("network", "networkName"),),
        (Table(
            "Tenant\tNetwork\tNw Type\tEncap type\tPacket tag\tSubnet\tGateway\tIPv6Subnet\tIPv6Gateway\tCfgd Tag ",
            "------\t-------\t-------\t----------\t----------\t-------\t------\t----------\t-----------\t---------",
            (
                Column("tenantName"), Column("networkName"), Column("nwType"), Column("encap"), Column("pktTag", _NUMBER),
                Column("subnet"), Column("gateway"), Column("ipv6Subnet"), Column("ipv6Gateway"), Column("cfgdTag"),
            ),
        ),),
        (
            Option(("--nw-type", "-n"), "nwType", "Network type: data or infra.", default="data"),
            Option(("--encap", "-e"), "encap", "Encapsulation: vxlan or vlan.", default="vxlan"),
            Option(("--pkt-tag", "-p"), "pktTag", "VLAN id or VXLAN VNI (0: allocate one).", kind="int"),
            Option(("--subnet", "-s"), "subnet", "IPv4 subnet a.b.c.d/len (or a.b.c.d-e.f.g.h/len).", required=True),
            Option(("--gateway", "-g"), "gateway", "IPv4 gateway inside the subnet."),
            Option(("--subnetv6", "--s6"), "ipv6Subnet", "IPv6 subnet."),
            Option(("--gatewayv6", "--g6"), "ipv6Gateway", "IPv6 gateway."),
            Option(("--nw-tag", "--tag"), "cfgdTag", "Configured tag of the network."),
        ),
        said=(("create", "Creating network {key}"), ("rm", "Deleting network {key}")),
        check=checks.network,
    ),
    Resource(
        "group", "endpointGroups", "EndpointGroup", ("tenantName", "groupName"),
        (Arg("network", "networkName"), Arg("group", "groupName")),
        (Table(
            "Tenant\tGroup\tNetwork\tIP Pool\tCfgdTag\tPolicies\tNetwork profile",
            "------\t-----\t-------\t-------\t-------\t--------\t---------------",
            (
                Column("tenantName"), Column("groupName"), Column("networkName"), Column("ipPool"), Column("cfgdTag"),
                Column("policies"), Column("netProfile"),
            ),
        ),),
        (
            Option(("--policy", "-p"), "policies", "Policy to apply (repeatable).", kind="list"),
            Option(("--networkprofile", "-n"), "netProfile", "Network profile to apply."),
            Option(("--external-contract", "-e"), "extContractsGrps", "External contracts group (repeatable).", kind="list"),
            Option(("--ip-pool", "-r"), "ipPool", "Address range for the group, e.g. 10.36.0.1-10.36.0.10."),
            Option(("--epg-tag", "--tag"), "cfgdTag", "Configured tag of the group."),
        ),
        said=(("create", "Creating EndpointGroup {key}"),),
    ),
    Resource(
        "policy", "policys", "Policy", ("tenantName", "policyName"), (Arg("policy", "policyName"),),
        (Table("Tenant\tPolicy", "------\t------", (Column("tenantName"), Column("policyName"))),),
        said=(("create", "Creating policy {key}"), ("rm", "Deleting policy {key}")),
    ),
    Resource(
        "rule", "rules", "Rule", ("tenantName", "policyName", "ruleId"), (Arg("policy", "policyName"), Arg("rule_id", "ruleId")),
        (
            Table(
                "Rule\tPriority\tFrom EndpointGroup\tFrom Network\tFrom IpAddress\tTo IpAddress\tProtocol\tPort\tAction",
                "----\t--------\t------------------\t------------\t---------\t------------\t--------\t----\t------",
                (Column("ruleId"), Column("priority", _NUMBER), Column("fromEndpointGroup"), Column("fromNetwork"),
                 Column("fromIpAddress"), *_RULE_TAIL),
                title="Incoming Rules:", where=(("direction", "in"),),
            ),
            Table(
                "Rule\tPriority\tTo EndpointGroup\tTo Network\tTo IpAddress\tProtocol\tPort\tAction",
                "----\t--------\t----------------\t----------\t---------\t--------\t----\t------",
                (Column("ruleId"), Column("priority", _NUMBER), Column("toEndpointGroup"), Column("toNetwork"), *_RULE_TAIL),
                title="Outgoing Rules:", where=(("direction", "out"),),
            ),
        ),
        (
            Option(("--priority", "-p"), "priority", "Priority 1-100.", kind="int", default=1),
            Option(("--direction", "-d"), "direction", "Direction: in or out.", default="in"),
            Option(("--from-group", "-g"), "fromEndpointGroup", "From endpoint group (incoming rules)."),
            Option(("--to-group", "-e"), "toEndpointGroup", "To endpoint group (outgoing rules)."),
            Option(("--from-network", "-n"), "fromNetwork", "From network (incoming rules)."),
            Option(("--to-network", "-o"), "toNetwork", "To network (outgoing rules)."),
            Option(("--from-ip-address", "-i"), "fromIpAddress", "From address or CIDR (incoming rules)."),
            Option(("--to-ip-address", "-s"), "toIpAddress", "To address or CIDR (outgoing rules)."),
            Option(("--protocol", "-l"), "protocol", "Protocol: tcp, udp, icmp or a number."),
            Option(("--port", "-P"), "port", "Destination port.", kind="int"),
            Option(("--action", "-j"), "action", "Action: allow or deny.", default="allow"),
        ),
        verbs=(("create", "rule-add"), ("rm", "rule-rm"), ("ls", "rule-ls")),
        group="policy",
        check=checks.rule,
        order_by="priority",
        counters=Counters("/policy/hits/{tenantName}:{policyName}", "rules", "{tenantName}:{policyName}:{ruleId}"),
    ),
    Resource(
        "netprofile", "netprofiles", "Netprofile", ("tenantName", "profileName"), (Arg("name", "profileName"),),
        (Table(
            "Name\tTenant\tBandwidth\tDSCP\tburst size", "------\t------\t---------\t--------\t----------",
            (
                Column("profileName"), Column("tenantName"), Column("bandwidth", views.bandwidth), Column("DSCP", _NUMBER),
                Column("burst", _NUMBER, only_if="bandwidth"),
            ),
        ),),
        (
            Option(("--bandwidth", "-b"), "bandwidth", "Bandwidth, e.g. 10gbps or 100 Mbps."),
            Option(("--dscp", "-d"), "DSCP", "DSCP value 0-63.", kind="int"),
            Option(("--burst", "-s"), "burst", "Burst size in kilobytes.", kind="int"),
        ),
        said=(("create", "Creating netprofile {key}"),),
    ),
    Resource(
        "service", "serviceLBs", "ServiceLB", ("tenantName", "serviceName"), (Arg("name", "serviceName"),),
        (Table(
            "ServiceName\tTenant\tNetwork\tSelectors", "---------\t--------\t-------\t-------",
            (Column("serviceName"), Column("tenantName"), Column("networkName"), Column("selectors", views.go_list)),
            tail="\t",
        ),),
        (
            Option(("--network", "-s"), "networkName", "Network the service address is allocated from."),
            Option(("--selector", "-l"), "selectors", "Provider label selector key=value (repeatable).", kind="list"),
            Option(("--port", "-p"), "ports", "Port mapping svcPort:providerPort:protocol (repeatable).", kind="list"),
            Option(("--preferred-ip", "--ip"), "ipAddress", "Preferred service address."),
        ),
        said=(("create", "Creating ServiceLB {key}"), ("rm", "Deleting Service  {serviceName},{tenantName}")),
        beside=Beside("/kubernetes/services", Table(
            "Kind\tNamespace\tName\tClusterIP\tPorts\tBackends", "----\t---------\t----\t---------\t-----\t--------",
            (Column("kind"), Column("namespace"), Column("name"), Column("clusterIP"), Column("ports", views.kube_ports), Column("ports", views.kube_backends)),
            title="Kubernetes services (all namespaces)",
        )),
    ),
    Resource(
        "bgp", "Bgps", "Bgp", ("hostname",), (Arg("hostname", "hostname"),),
        (Table(
            "HostName\tRouterIP\tAS\tNeighbor\tNeighborAS", "---------\t--------\t-------\t--------\t-------",
            (Column("hostname"), Column("routerip"), Column("as"), Column("neighbor"), Column("neighbor-as")),
        ),),
        (
            Option(("--router-ip",), "routerip", "Router interface address in CIDR form a.b.c.d/len."),
            Option(("--as",), "as", "Local AS number."),
            Option(("--neighbor-as",), "neighbor-as", "Neighbor AS number."),
            Option(("--neighbor",), "neighbor", "Neighbor address."),
        ),
        said=(("rm", "Deleting Bgp router config: {hostname}"),),
        check=checks.bgp,
    ),
    Resource(
        "app-profile", "appProfiles", "AppProfile", ("tenantName", "appProfileName"), (Arg("name", "appProfileName"),),
        (Table(
            "Tenant\tAppProfile\tGroups", "------\t----------\t------",
            (Column("tenantName"), Column("appProfileName"), Column("endpointGroups")),
        ),),
        (Option(("--group", "-g"), "endpointGroups", "Endpoint groups, comma-separated.", kind="csv"),),
        verbs=(*STANDARD_VERBS, ("update", "update")),
        said=(("create", "Creating AppProfile {key}"),),
    ),
    Resource(
        "external-contracts", "extContractsGroups", "ExtContractsGroup", ("tenantName", "contractsGroupName"),
        (Arg("name", "contractsGroupName"),),
        (Table(
            "Tenant\tName\t\tType\t\tContracts", "------\t------\t\t------\t\t-------",
            (Column("tenantName"), Column("contractsGroupName"), Column(""), Column("contractsType"), Column("contracts", views.go_list)),
        ),),
        (
            Option(("--consumed", "-c"), "contractsType", "The contracts are consumed.", flag_value="consumed"),
            Option(("--provided", "-p"), "contractsType", "The contracts are provided.", flag_value="provided"),
            Option(("--contract", "-a"), "contracts", "Contract DN (repeatable).", kind="list"),
        ),
        said=(
            ("create", "Creating ExternalContracts {key}"),
            ("rm", "Deleting external contracts group {contractsGroupName} in tenant {tenantName}"),
        ),
        check=checks.external_contracts,
    ),
)  # fmt: skip


def parents(resource: Resource) -> tuple[Resource, ...]:
    """The resources whose keys prefix this one's, outermost first (a rule: tenant, policy):
    `ls` checks they exist, so a typo in `-t` is an error and not an empty table."""
    by_key = {r.key: r for r in RESOURCES}
    return tuple(by_key[resource.key[:n]] for n in range(1, len(resource.key)) if resource.key[:n] in by_key)


@dataclass(frozen=True)
class Show:
    """A read-only command: one GET (path formatted with the arguments and `tenant`), rendered.
    `ignored` names netctl flags it accepts without effect (netctl's `global info -t`), so
    scripts that pass them still run."""

    group: str | None  # None: a top-level command
    name: str
    path: str
    render: Callable[[Any], str]
    help: str
    args: tuple[str, ...] = ()
    tenant: bool = False
    ignored: tuple[str, ...] = ()  # netctl's flags that change nothing here ("tenant", "all", "quiet")
    optional: tuple[str, ...] = ()  # trailing arguments that may be left out ("" in the path)
    failure: Callable[[Any], str | None] | None = None  # an answer that is printed, then exits non-zero (EXIT_ANSWER_FAILED)
    model: str | None = None  # the Go type netctl prints the answer as (fieldorder.py); None: contivd's own, printed as sent


GLOBAL_INFO = (
    ("Fabric mode", "networkInfraType"), ("Forward mode", "fwdMode"), ("ARP mode", "arpMode"),
    ("Vlan Range", "vlans"), ("Vxlan range", "vxlans"), ("Private subnet", "pvtSubnet"),
)  # fmt: skip
ACI_GW_INFO = (
    ("Path bindings", "pathBindings"), ("Node bindings", "nodeBindings"), ("Physical domain", "physicalDomain"),
    ("Enforce policies", "enforcePolicies"), ("Include Common-Tenant", "includeCommonTenant"),
)  # fmt: skip

SHOWS: tuple[Show, ...] = (
    Show(None, "version", "/version", partial(views.version, client_version=__version__), "Client and server versions."),
    Show("cluster", "status", "/info", views.cluster_status, "Raft leader, term, commit index, members and registered nodes."),
    Show(None, "trace", "/kubernetes/trace/{src}/{dst}/{proto_port}", views.trace,
         "Contiv's and NetworkPolicy's verdict for a packet SRC -> DST (IP, endpoint id or namespace/name; PROTO/PORT e.g. tcp/5432),"
         " the rules deciding it and both nodes' OVS answers; exits 4 when a datapath disagrees with the model.",
         args=("src", "dst"), optional=("proto_port",), failure=views.trace_failure),
    Show("policy", "hits", "/policy/hits/{tenant}:{policy}", views.policy_hits,
         "Packets and bytes per rule summed over the nodes: Contiv's and NetworkPolicy's (-t: the namespace), and default drops.",
         tenant=True, optional=("policy",)),
    Show("endpoint", "inspect", "/api/v1/inspect/endpoints/{endpoint}/", output.as_json,
         "An endpoint's state, by endpoint id, container id or name (substring).", args=("endpoint",), model="EndpointInspect"),
    Show("global", "info", "/api/v1/globals/", partial(views.labelled, GLOBAL_INFO), "The global settings.",
         ignored=("tenant", "all"), model="[]Global"),
    Show("global", "inspect", "/api/v1/inspect/globals/global/", output.as_json, "Global settings and state.", model="GlobalInspect"),
    Show("aci-gw", "info", "/api/v1/aciGws/", partial(views.labelled, ACI_GW_INFO), "The ACI gateway settings (nothing if unset).",
         ignored=("tenant", "all"), model="[]AciGw"),
    Show("aci-gw", "inspect", "/api/v1/inspect/aciGws/aciGw/", output.as_json, "ACI gateway settings and state.", model="AciGwInspect"),
    Show("app-profile", "group-ls", "/api/v1/appProfiles/{tenant}:{app_profile}/", partial(views.joined, "endpointGroups"),
         "The endpoint groups of an application profile.", args=("app_profile",), tenant=True, ignored=("all", "quiet"),
         model="AppProfile"),
)  # fmt: skip


@dataclass(frozen=True)
class Setter:
    """`<group> set`: read the singleton (or start from `initial` if it does not exist yet),
    overlay the flags given, write it back. Unlike netctl, a flag not given is never sent:
    netctl's `global set` always re-sent `--private-subnet`'s default, silently undoing a
    custom private subnet whenever another knob was changed."""

    group: str
    path: str
    options: tuple[Option, ...]
    initial: tuple[tuple[str, str], ...]
    help: str


SETTERS: tuple[Setter, ...] = (
    Setter(
        "global", "/api/v1/globals/global/",
        (
            Option(("--fabric-mode", "-f"), "networkInfraType", "Fabric mode: default, aci or aci-opflex."),
            Option(("--vlan-range", "-v"), "vlans", "VLAN range, e.g. 1-4094."),
            Option(("--vxlan-range", "-x"), "vxlans", "VXLAN range, e.g. 1-10000."),
            Option(("--fwd-mode", "-b"), "fwdMode", "Forwarding mode: bridge or routing."),
            Option(("--arp-mode", "-a"), "arpMode", "ARP mode: proxy or flood."),
            Option(("--private-subnet", "-s"), "pvtSubnet", "Private /16 subnet for host access."),
        ),
        (("name", "global"),),
        "Change global settings (only the flags given).",
    ),
    Setter(
        "aci-gw", "/api/v1/aciGws/aciGw/",
        (
            Option(("--path-bindings", "-p"), "pathBindings", "Path bindings, comma-separated."),
            Option(("--node-bindings", "-n"), "nodeBindings", "Node bindings, comma-separated."),
            Option(("--phys-dom", "-d"), "physicalDomain", "Physical domain."),
            Option(("--enforce-policies", "-e"), "enforcePolicies", "Enforce policies: yes or no (new objects: yes)."),
            Option(("--include-common-tenant", "-i"), "includeCommonTenant", "Include the common tenant: yes or no (new objects: no)."),
        ),
        (("name", "aciGw"), ("enforcePolicies", "yes"), ("includeCommonTenant", "no")),
        "Change the ACI gateway settings (only the flags given).",
    ),
)  # fmt: skip

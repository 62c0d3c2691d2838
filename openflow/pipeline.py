"""The node agent's OpenFlow pipeline, declared once as data, and the checked Table handle.

Code names tables only by name; table ids are positions in :data:`PIPELINE`.
Every flow is built through :meth:`Table.flow`, which rejects match fields,
set fields and next tables (``goto_table`` or ``ct(table=...)``) the table
does not declare, so a pipeline mistake fails a unit test rather than a live
switch.  docs/pipeline.md describes each table; keep the two in step.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from openflow.flow import (
    Action,
    Bucket,
    Ct,
    Flow,
    Group,
    MatchArg,
    Move,
    PipelineError,
    Resubmit,
    SetField,
    make_match,
)


@dataclass(frozen=True)
class TableSpec:
    """What one table is for: what it may match and set, where it may continue, what a miss does."""

    name: str
    stage: str
    doc: str
    match: frozenset[str]
    set_fields: frozenset[str] = frozenset()
    next: tuple[str, ...] = ()
    miss: str | None = None
    """Table a miss continues to (``goto_table``); None means a miss drops."""
    resubmit: tuple[str, ...] = ()
    """Tables a ``resubmit`` or ``ct(table=...)`` may run besides ``next``, earlier ones too
    (OVS forbids only a goto_table backwards)."""
    learned: bool = False
    """Its flows are written by the switch (``learn``), never by the agent: audits skip it."""
    miss_resubmit: str | None = None
    """Table a miss runs by ``resubmit`` (one of ``resubmit``): how a table declared after the
    table it continues to sends its misses there."""


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


PIPELINE: tuple[TableSpec, ...] = (
    TableSpec(
        "classifier", "classification",
        "in_port (+ tun_id or VLAN tag, or the host port's destination IP) -> network, source EPG, REMOTE bit in metadata;"
        " the source IP tells cluster pods and the node from outside hosts (OUTSIDE bit)",
        _f("in_port", "tun_id", "vlan_vid", "eth_type", "ipv4_src", "ipv4_dst"), next=("spoof_guard", "conntrack"),
    ),
    TableSpec(
        "spoof_guard", "classification",
        "local ports may only send from their own MAC and IP (IPv4 and ARP)",
        _f("in_port", "eth_type", "eth_src", "ipv4_src", "arp_spa", "arp_sha"),
        next=("arp_responder", "conntrack"),
    ),
    TableSpec(
        "arp_responder", "classification",
        "answer ARP requests for known endpoint IPs and service VIPs from the switch",
        _f("eth_type", "arp_op", "arp_tpa", "metadata"),
        set_fields=_f("eth_src", "eth_dst", "arp_op", "arp_sha", "arp_tha", "arp_spa", "arp_tpa"),
        next=("conntrack",), miss="conntrack",
    ),
    TableSpec(
        "conntrack", "service",
        "IPv4 through conntrack with nat: un-NAT replies and established service flows",
        _f("eth_type"), next=("service_lb",), miss="service_lb",
    ),
    TableSpec(
        "service_lb", "service",
        "new connections to a VIP:port go to a select group that commits the DNAT; remote traffic skips policy,"
        " but what came from outside the cluster goes to np_ingress (its replies excepted)",
        _f("ct_state", "eth_type", "ip_proto", "ipv4_src", "ipv4_dst", "tp_dst", "metadata"), set_fields=_f("reg0", "reg1"),
        next=("dst_epg", "forward", "np_ingress"), miss="dst_epg", resubmit=("session_affinity", "endpoint_dnat"),
    ),
    TableSpec(
        "dst_epg", "policy",
        "destination IP -> destination EPG in metadata and the endpoint's MAC as eth_dst",
        _f("eth_type", "metadata", "ipv4_dst"), set_fields=_f("eth_dst"), next=("policy",), miss="policy",
    ),
    TableSpec(
        "policy", "policy",
        "Contiv rules: EPGs, IPs, protocol, ports, TCP flags; allow continues (to NetworkPolicy), deny drops; default allow",
        _f("eth_type", "metadata", "ipv4_src", "ipv4_dst", "ip_proto", "tp_src", "tp_dst", "tcp_flags"),
        next=("np_egress",), miss="np_egress",
    ),
    TableSpec(
        "qos", "egress",
        "DSCP marking of IPv4 from local ports whose EPG has a netprofile DSCP",
        _f("eth_type", "in_port"), set_fields=_f("ip_dscp"), next=("forward",), miss="forward",
    ),
    TableSpec(
        "forward", "egress",
        "L2 by network and eth_dst: local port, tunnel (tun_id = VNI) or VLAN uplink; flood groups; the node's address to the host port;"
        " routing mode: local /32s and learned routes (L3, MACs rewritten)",
        _f("metadata", "eth_dst", "eth_type", "ipv4_dst"), set_fields=_f("tun_id", "vlan_vid", "eth_src", "eth_dst"),
    ),
    TableSpec(
        "session_affinity", "service",
        "sessionAffinity ClientIP: learned flows client, VIP, port -> the client's backend in reg0/reg1 (run by resubmit)",
        _f("eth_type", "ip_proto", "ipv4_src", "ipv4_dst", "tp_dst"), set_fields=_f("reg0", "reg1"), learned=True,
    ),
    TableSpec(
        "endpoint_dnat", "service",
        "affinity services (run by resubmit): the backend in reg0/reg1 gets the DNAT (and is learned); none yet -> select group",
        _f("reg0", "reg1", "eth_type", "ip_proto", "ipv4_dst", "tp_dst"), resubmit=("dst_epg",),
    ),
    # NetworkPolicy comes last in table ids (earlier ids keep their numbers) but runs right after
    # Contiv's policy; it returns to qos by resubmit or ct(table=qos), as a goto cannot go back.
    TableSpec(
        "np_egress", "policy",
        "Kubernetes NetworkPolicy, the source pod's egress: replies pass, allows continue, an isolated pod's rest drops",
        _f("ct_state", "eth_type", "ipv4_src", "ipv4_dst", "ip_proto", "tp_dst"),
        next=("np_ingress",), miss="np_ingress", resubmit=("qos",),
    ),
    TableSpec(
        "np_ingress", "policy",
        "Kubernetes NetworkPolicy, the destination pod's ingress: allows commit the connection (replies pass) and go on to qos",
        _f("eth_type", "ipv4_src", "ipv4_dst", "ip_proto", "tp_dst"),
        resubmit=("qos",), miss_resubmit="qos",
    ),
)  # fmt: skip


_BUILT: dict[tuple[object, ...], Flow] = {}
_BUILT_MAX = 200_000  # flows kept for reuse; cleared when full (a bridge holds far fewer)
_CHECKED_BUCKETS: dict[tuple[TableSpec, int], dict[int, Bucket]] = {}
_CHECKED_BUCKETS_MAX = 100_000  # per table; cleared when full


@dataclass(frozen=True)
class Table:
    """A declared table with its id; the only way flows are made."""

    spec: TableSpec
    id: int
    next_ids: Mapping[str, int]
    resubmit_ids: Mapping[str, int]

    @property
    def name(self) -> str:
        return self.spec.name

    def flow(
        self,
        priority: int,
        match: MatchArg,
        *,
        cookie: int,
        actions: tuple[Action, ...] = (),
        write_metadata: tuple[int, int] | None = None,
        goto: str | None = None,
    ) -> Flow:
        """Build a flow in this table, checked against the spec (PipelineError naming the table).

        Flows are immutable and a bridge's flows barely change between syncs, so each distinct
        flow is built and checked once and then shared (the agent recomputes every flow of the
        bridge on each change)."""
        key = (self.id, priority, tuple(match.items()), cookie, actions, write_metadata, goto)
        built = _BUILT.get(key)
        if built is None:
            if len(_BUILT) >= _BUILT_MAX:
                _BUILT.clear()
            built = _BUILT[key] = self._build(priority, match, cookie, actions, write_metadata, goto)
        return built

    def _build(
        self, priority: int, match: MatchArg, cookie: int, actions: tuple[Action, ...], write_metadata: tuple[int, int] | None, goto: str | None
    ) -> Flow:
        where = f"table {self.name}"
        extra = set(match) - self.spec.match
        if extra:
            raise PipelineError(f"{where}: may not match {sorted(extra)}")
        self._check_actions(actions)
        if not 0 <= priority <= 0xFFFF:
            raise PipelineError(f"{where}: priority {priority} is not 0..65535")
        return Flow(self.id, priority, make_match(match), actions, write_metadata, self._next(goto), cookie)

    def group(self, group_id: int, type_: str, buckets: tuple[Bucket, ...]) -> Group:
        """Build a group that flows of this table use; its buckets obey the table's spec like its flows.

        A flood group is rebuilt with all its buckets on every attach, mostly the same bucket
        objects as before (builders share them), so buckets already checked are found by
        identity with set operations and only new ones are checked."""
        checked = _CHECKED_BUCKETS.setdefault((self.spec, self.id), {})
        by_identity = dict(zip(map(id, buckets), buckets, strict=True))
        for key in set(by_identity).difference(checked):  # iterates the buckets, not all checked
            self._check_actions(by_identity[key])
        if len(checked) >= _CHECKED_BUCKETS_MAX:
            checked.clear()
        checked.update(by_identity)  # holding the buckets keeps their ids from being reused
        return Group(group_id, type_, buckets)

    def _check_actions(self, actions: tuple[Action, ...]) -> None:
        for action in actions:
            written = action.field if isinstance(action, SetField) else action.dst if isinstance(action, Move) else None
            if written is not None and written not in self.spec.set_fields:
                raise PipelineError(f"table {self.name}: may not set {written}")
            if isinstance(action, Ct | Resubmit) and action.table not in self.next_ids.values() and action.table not in self.resubmit_ids.values():
                kind = "ct" if isinstance(action, Ct) else "resubmit"
                raise PipelineError(f"table {self.name}: {kind} may not resubmit to table {action.table}")

    def _next(self, name: str | None) -> int | None:
        if name is None:
            return None
        if name not in self.next_ids:
            raise PipelineError(f"table {self.name}: goto {name!r} is not an allowed next table")
        return self.next_ids[name]

    def goto_id(self, name: str) -> int:
        """Id of allowed next or resubmit table ``name`` (for ct(table=...) and resubmit actions)."""
        if name in self.resubmit_ids:
            return self.resubmit_ids[name]
        result = self._next(name)
        assert result is not None
        return result


class Tables(Mapping[str, Table]):
    """The pipeline's tables by name, with ids assigned in declaration order."""

    def __init__(self, specs: tuple[TableSpec, ...] = PIPELINE) -> None:
        ids: dict[str, int] = {}
        for index, spec in enumerate(specs):
            if spec.name in ids:
                raise PipelineError(f"table {spec.name}: declared twice")
            ids[spec.name] = index
        self._tables: dict[str, Table] = {}
        for spec in specs:
            for name in spec.next:
                if name not in ids or ids[name] <= ids[spec.name]:
                    raise PipelineError(f"table {spec.name}: next table {name!r} is unknown or not later")
            if spec.miss is not None and spec.miss not in spec.next:
                raise PipelineError(f"table {spec.name}: miss target {spec.miss!r} is not a next table")
            for name in spec.resubmit:
                if name not in ids or name == spec.name:
                    raise PipelineError(f"table {spec.name}: resubmit table {name!r} is unknown or itself")
            if spec.miss_resubmit is not None and (spec.miss_resubmit not in spec.resubmit or spec.miss is not None):
                raise PipelineError(
                    f"table {spec.name}: miss resubmit {spec.miss_resubmit!r} is not a resubmit table, or the table has a miss goto too"
                )
            next_ids, resubmit_ids = {n: ids[n] for n in spec.next}, {n: ids[n] for n in spec.resubmit}
            self._tables[spec.name] = Table(spec, ids[spec.name], next_ids, resubmit_ids)

    def __getitem__(self, name: str) -> Table:
        try:
            return self._tables[name]
        except KeyError:
            raise PipelineError(f"table {name!r} is not in the pipeline") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def by_id(self, table_id: int) -> Table:
        return next(t for t in self._tables.values() if t.id == table_id)


TABLES = Tables()
"""The default pipeline; builders take a Tables argument so tests can pass another."""

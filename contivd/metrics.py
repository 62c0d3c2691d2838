"""Prometheus metrics: a registry per API app, with gauges read from live state at scrape time.

Counters and histograms of things that happen (API requests, CNI ADD/DEL) are observed where
they happen. Everything that *is* (Raft term and indices, IPAM usage, endpoints per node,
flows per table, the switch connection) is read by `StateCollector` when Prometheus scrapes,
so nothing has to keep gauges up to date. The store-derived part is read from the node's
StateCache (records parsed once, as they change) and summarised once per snapshot revision: a
scrape with 10,000 endpoints recounts them only when something changed.

The CNI server calls `observe_cni(op, seconds, ok)`; its histogram lives at module level (not
in prometheus-client's global registry) and every app registry exports it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as EventCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from openflow.pipeline import TABLES

from .k8s.status import PHASES
from .model.rulehits import add_up, contiv_labels, default_drop_of, netpol_labels
from .state import EndpointState, StateCache, StateSnapshot
from .state.usage import address_usage, groups_by_network

if TYPE_CHECKING:  # a node without the OVS datapath, or a follower, loads neither the agent nor PySyncObj
    from .agent.netpolstats import RuleHits
    from .agent.service import Agent
    from .k8s.status import KubeHealth, KubeStatusView
    from .nodes import NodeStore

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

CNI_SECONDS = Histogram(
    "contivd_cni_request_seconds",
    "CNI requests handled by this node's CNI server, by operation (ADD, DEL, CHECK, VERSION) and result",
    ["op", "result"],
    buckets=LATENCY_BUCKETS,
    registry=None,
)


ORPHANS_RECLAIMED = EventCounter(
    "contivd_cni_orphans_reclaimed",
    "Endpoints this node deleted because their pod end (veth, network namespace) was gone for the grace period, by tenant/network",
    ["network"],
    registry=None,
)


def observe_orphan(endpoint: EndpointState) -> None:
    """Count one reclaimed orphaned endpoint (the CNI server's orphan reaper calls this)."""
    ORPHANS_RECLAIMED.labels(network=f"{endpoint.tenant}/{endpoint.network}").inc()


def observe_cni(op: str, seconds: float, ok: bool) -> None:
    """Record one CNI request (the CNI server calls this once per request it answered)."""
    CNI_SECONDS.labels(op=op.upper(), result="ok" if ok else "error").observe(seconds)


@dataclass(frozen=True)
class StoreSummary:
    """What the gauges and the systemd STATUS line need from the store, at one revision."""

    revision: int
    endpoints_per_node: dict[str, int] = field(default_factory=dict)
    ipam: dict[str, tuple[int, int]] = field(default_factory=dict)  # network id -> (allocated, total)


def summarize(snapshot: StateSnapshot) -> StoreSummary:
    """Endpoints per node (homingHost) and address usage per network, at the snapshot's revision."""
    per_node = Counter(ep.homing_host for ep in snapshot.endpoints.values())
    groups = groups_by_network(snapshot.groups.values())
    usage = {net_id: address_usage(network, groups[net_id]) for net_id, network in snapshot.networks.items()}
    return StoreSummary(snapshot.revision, dict(per_node), usage)


class StoreSummaries:
    """`summarize` of the node's StateCache, cached per snapshot revision."""

    def __init__(self, cache: StateCache):
        self.cache = cache
        self._last = StoreSummary(-1)

    def current(self) -> StoreSummary:
        snapshot = self.cache.catch_up()
        if snapshot.revision != self._last.revision:
            self._last = summarize(snapshot)
        return self._last


class StateCollector(Collector):
    def __init__(self, store: NodeStore, agent: Agent | None, summaries: StoreSummaries, kube: KubeHealth | None = None):
        self.store, self.agent, self.summaries, self.kube = store, agent, summaries, kube

    def collect(self) -> Iterator[Metric]:
        yield from self._raft()
        yield from self._store_objects()
        if self.agent is not None:
            yield from self._agent(self.agent)
        if self.kube is not None:
            yield from self._kubernetes(self.kube)

    def _rule_hits(self, agent: Agent) -> Iterator[Metric]:
        """Per rule on this node (Prometheus sums over nodes): Contiv's model rules (kind contiv)
        and NetworkPolicy's (kind kubernetes: tenant = namespace, policy = the NetworkPolicy,
        rule = `<direction>/<index>`), then each isolated pod's default drops."""
        labels = ["kind", "tenant", "policy", "rule"]
        packets = CounterMetricFamily(
            "contivd_policy_rule_packets", "Packets a policy rule matched on this node (kind: contiv or kubernetes)", labels=labels
        )
        octets = CounterMetricFamily(
            "contivd_policy_rule_bytes", "Bytes a policy rule matched on this node (kind: contiv or kubernetes)", labels=labels
        )
        contiv = add_up([_counts(agent.contiv_hits)], contiv_labels)
        kubernetes = add_up([_counts(agent.netpol_hits)], netpol_labels)
        for kind, table in (("contiv", contiv), ("kubernetes", kubernetes)):
            for names, counts in table.items():
                packets.add_metric([kind, *names], counts["packets"])
                octets.add_metric([kind, *names], counts["bytes"])
        drop_labels = ["tenant", "group", "direction"]
        drop_doc = "dropped on this node because no rule allowed them: a NetworkPolicy-isolated pod (tenant = namespace, group = pod)"
        drop_packets = CounterMetricFamily("contivd_policy_default_drop_packets", f"Packets {drop_doc}", labels=drop_labels)
        drop_octets = CounterMetricFamily("contivd_policy_default_drop_bytes", f"Bytes {drop_doc}", labels=drop_labels)
        for drop, counts in add_up([_counts(agent.netpol_hits)], default_drop_of).items():
            drop_packets.add_metric([drop.tenant, drop.group, drop.direction], counts["packets"])
            drop_octets.add_metric([drop.tenant, drop.group, drop.direction], counts["bytes"])
        yield from (packets, octets, drop_packets, drop_octets)

    def _kubernetes(self, kube: KubeHealth) -> Iterator[Metric]:
        view = kube.view()
        yield GaugeMetricFamily("contivd_k8s_watching", "1 on the node that watches the Kubernetes API (the Raft leader)", value=int(view.watching))
        yield GaugeMetricFamily(
            "contivd_k8s_api_up", "1 while the leader's lists and watches of the API server work", value=int(view.watching and not view.problems)
        )
        yield from kube_watch_metrics(view, kube.watch_counts(), time.time())
        skipped = CounterMetricFamily(
            "contivd_k8s_services_skipped",
            "Kubernetes Services this node (as leader) found it cannot program, by Service and reason (SCTP, a cluster IP outside the service CIDR, ...)",
            labels=["service", "reason"],
        )
        for (service, reason), count in sorted(kube.skip_counts().items()):
            skipped.add_metric([service, reason], count)
        yield skipped
        relabelled, not_applied = kube.label_counts()
        yield CounterMetricFamily(
            "contivd_k8s_endpoints_relabelled",
            "Endpoints this node (as leader) moved between groups or relabelled after their pod's labels changed",
            value=relabelled,
        )
        unapplied = CounterMetricFamily(
            "contivd_k8s_pod_label_changes_not_applied",
            "Pod label changes this node (as leader) could not apply, by pod and reason (tenant/network change, unknown group, ...)",
            labels=["pod", "reason"],
        )
        for (pod, reason), count in sorted(not_applied.items()):
            unapplied.add_metric([pod, reason], count)
        yield unapplied

    def _raft(self) -> Iterator[Metric]:
        stats = self.store.statistics()
        for name, doc, value in (
            ("contivd_raft_term", "Current Raft term", stats.term),
            ("contivd_raft_commit_index", "Raft commit index", stats.commit_index),
            ("contivd_raft_applied_index", "Last Raft log index applied on this member", stats.last_applied),
            ("contivd_raft_is_leader", "1 when this member is the Raft leader (the netmaster)", int(stats.role == "leader")),
            ("contivd_raft_has_quorum", "1 when this member sees a quorum", int(stats.has_quorum)),
            ("contivd_raft_leader_known", "1 when this member knows a leader", int(stats.leader is not None)),
            ("contivd_raft_voters", "Voting members", len(stats.voters)),
            ("contivd_raft_connected_voters", "Voting members this one is connected to", len(stats.connected_voters)),
            (
                "contivd_raft_can_commit",
                "1 when a write through this member can commit now (see /readyz for why not)",
                int(not stats.commit_blockers),
            ),
            (
                "contivd_store_data_dir_full",
                "1 while this member cannot write its data dir (writes are refused with 503)",
                int(stats.disk_problem is not None),
            ),
            ("contivd_store_keys", "Keys in the store", stats.keys),
            ("contivd_store_revision", "Store revision", stats.revision),
            ("contivd_store_followers", "Followers of the store this voter feeds", stats.followers),
            ("contivd_store_is_follower", "1 when this node is a follower of the store (not a Raft member)", int(stats.role == "store_follower")),
            (
                "contivd_store_follower_lag_revisions",
                "A follower: its voter's last reported revision minus its own (0 on a voter)",
                stats.lag_revisions,
            ),
            ("contivd_store_follower_lag_seconds", "A follower: seconds since it last heard from a voter (0 on a voter)", stats.lag_seconds),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        count, seconds = self.store.apply_latency()
        yield SummaryMetricFamily(
            "contivd_raft_apply_seconds", "Writes proposed by this member: time from proposal to applied result", count_value=count, sum_value=seconds
        )

    def _store_objects(self) -> Iterator[Metric]:
        summary = self.summaries.current()
        endpoints = GaugeMetricFamily("contivd_endpoints", "Endpoints in the cluster by node (homingHost)", labels=["node"])
        for node, count in sorted(summary.endpoints_per_node.items()):
            endpoints.add_metric([node], count)
        allocated = GaugeMetricFamily("contivd_ipam_allocated_addresses", "Addresses allocated to endpoints, per network", labels=["network"])
        total = GaugeMetricFamily(
            "contivd_ipam_total_addresses", "Allocatable addresses (host range less the gateway), per network", labels=["network"]
        )
        for network, (used, size) in sorted(summary.ipam.items()):
            allocated.add_metric([network], used)
            total.add_metric([network], size)
        yield from (endpoints, allocated, total)

    def _agent(self, agent: Agent) -> Iterator[Metric]:
        yield from self._rule_hits(agent)
        stats = agent.statistics()
        flows = GaugeMetricFamily(
            "contivd_agent_flows", "OpenFlow flows installed on the node's bridges, per bridge and table", labels=["bridge", "table"]
        )
        for datapath in agent.datapaths.values():
            for table_id, count in sorted(datapath.pusher.flows_per_table().items()):
                flows.add_metric([datapath.bridge.name, _table_name(table_id)], count)
        yield flows
        for name, doc, value in (
            ("contivd_agent_groups", "OpenFlow groups installed", stats.groups),
            ("contivd_agent_switch_connected", "1 while every bridge's OpenFlow connection is up", int(stats.switch_connected)),
            ("contivd_agent_first_reconcile_done", "1 once a full reconcile against the switch has completed", int(stats.first_sync_done)),
            ("contivd_agent_last_reconcile_seconds", "Duration of the last successful reconcile", stats.last_sync_seconds),
            ("contivd_agent_last_reconcile_timestamp_seconds", "Unix time the last successful reconcile ended", stats.last_sync_unix),
            ("contivd_agent_problems", "Inputs the last reconcile skipped (see the log)", len(stats.problems)),
            ("contivd_agent_drift_flows", "Flows and groups the last audit found different from a full recomputation or the switch", stats.drift),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily("contivd_agent_reconciles", "Reconciles attempted", value=stats.syncs)
        yield CounterMetricFamily("contivd_agent_reconcile_failures", "Reconciles that failed", value=stats.sync_failures)
        yield CounterMetricFamily(
            "contivd_agent_drift_found", "Flows and groups found drifted over every audit (repaired each time)", value=stats.drift_total
        )
        yield CounterMetricFamily("contivd_agent_audits", "Audits of the installed flows against a full recomputation", value=stats.audits)
        yield CounterMetricFamily("contivd_agent_flow_mods", "Flow-mods sent to the switches", value=stats.flow_mods)
        syncs = CounterMetricFamily("contivd_agent_syncs", "Syncs by kind: incremental (changed objects only) or full", labels=["kind"])
        syncs.add_metric(["incremental"], stats.incremental_syncs)
        syncs.add_metric(["full"], stats.full_syncs)
        yield syncs


def _counts(hits: Mapping[str, RuleHits]) -> dict[str, dict[str, int]]:
    return {owner: asdict(counts) for owner, counts in hits.items()}


def _table_name(table_id: int) -> str:
    try:
        return TABLES.by_id(table_id).name
    except StopIteration:
        return str(table_id)


class Metrics:
    """One app's registry: request histograms, the CNI histogram and the state collector."""

    def __init__(self, store: NodeStore, agent: Agent | None, summaries: StoreSummaries, kube: KubeHealth | None = None):
        self.registry = CollectorRegistry(auto_describe=False)
        self.summaries = summaries
        self.requests = Histogram(
            "contivd_api_request_seconds",
            "REST API requests answered by this node, by route template, method and status",
            ["route", "method", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(CNI_SECONDS)
        self.registry.register(ORPHANS_RECLAIMED)
        self.registry.register(StateCollector(store, agent, self.summaries, kube))

    def observe_request(self, route: str, method: str, status: int, started: float) -> None:
        self.requests.labels(route=route, method=method, status=str(status)).observe(time.perf_counter() - started)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def kube_watch_metrics(view: KubeStatusView, counts: tuple[dict[str, int], dict[str, int]], now: float) -> Iterator[Metric]:
    """Each watched kind's state (a gauge per kind and state, 1 for the one it is in), how old
    its resourceVersion is, and how often it relisted or failed."""
    state = GaugeMetricFamily(
        "contivd_k8s_watch_state",
        "1 for the state each watched Kubernetes kind is in (listing, watching, resuming, backing_off)",
        labels=["kind", "state"],
    )
    age = GaugeMetricFamily(
        "contivd_k8s_resource_version_age_seconds",
        "Seconds since the kind's resourceVersion last moved (list, event or bookmark; bookmarks come about every minute)",
        labels=["kind"],
    )
    for kind, kind_state in sorted(view.kinds.items()):
        for phase in PHASES:
            state.add_metric([kind, phase], int(kind_state.phase == phase))
        if kind_state.version_seen:
            age.add_metric([kind], max(0.0, now - kind_state.version_seen))
    relists, failures = counts
    relisted = CounterMetricFamily("contivd_k8s_relists", "Lists of a kind after its first (410: its history was gone), by kind", labels=["kind"])
    failed = CounterMetricFamily("contivd_k8s_watch_failures", "Failed lists or watches of a kind (each retry counts), by kind", labels=["kind"])
    for kind, count in sorted(relists.items()):
        relisted.add_metric([kind], count)
    for kind, count in sorted(failures.items()):
        failed.add_metric([kind], count)
    yield from (state, age, relisted, failed)

"""Policy rule hits on this node: packets and bytes per rule id from the flow statistics of the
rules' tables (each flow's cookie names its rule). NetworkPolicy's (np tables) for `/netpolstats`
and /metrics, Contiv's compiled rules (the policy table) for `/rulestats` and /metrics
(contivd.model.rulehits sums and labels them).

An allow's hits passed it; an isolation's (`<ns>/<pod>/<direction>/isolation`) were dropped by
default. Summed over nodes they are the rule's hits (policy is judged at the source node).
Not responsible for the flows themselves (openflow.flows.netpol, openflow.flows.policy).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from openflow.fields import ROUND_MASK, Category, cookie
from openflow.pipeline import TABLES

from ..state import StateSnapshot
from .datapath import BridgeDatapath

_U64 = (1 << 64) - 1
STATS_SECONDS = 15.0
"""How often the agent refreshes the counters /metrics shows (a dump of three tables per bridge)."""


@dataclass(frozen=True)
class RuleHits:
    flows: int = 0
    packets: int = 0
    bytes: int = 0


async def netpol_hits(datapaths: Iterable[BridgeDatapath], snapshot: StateSnapshot) -> dict[str, RuleHits]:
    """Every rule id of the snapshot's NetworkPolicy records with its hits on these bridges
    (0 when none); OpenFlowError when a bridge cannot be asked."""
    rule_ids = (r.rule_id for pod in snapshot.k8s_netpol.values() for r in pod.rules)
    return await _hits(datapaths, Category.NETPOL, rule_ids, ("np_egress", "np_ingress"))


async def contiv_rule_hits(datapaths: Iterable[BridgeDatapath], snapshot: StateSnapshot) -> dict[str, RuleHits]:
    """Every compiled Contiv rule id of the snapshot with its hits on these bridges (0 when none);
    OpenFlowError when a bridge cannot be asked."""
    return await _hits(datapaths, Category.POLICY, (r.rule_id for r in snapshot.rules.values()), ("policy",))


async def _hits(datapaths: Iterable[BridgeDatapath], category: Category, rule_ids: Iterable[str], tables: tuple[str, ...]) -> dict[str, RuleHits]:
    by_cookie = {cookie(category, rule_id): rule_id for rule_id in rule_ids}
    totals = {rule_id: [0, 0, 0] for rule_id in sorted(set(by_cookie.values()))}
    for datapath in datapaths:
        connection = datapath.pusher.connection
        if connection is None or connection.closed:
            continue
        for table in tables:
            for record in await connection.dump_flows(table=TABLES[table].id):
                rule_id = by_cookie.get(record.cookie & ~ROUND_MASK & _U64)
                if rule_id is not None:
                    counts = totals[rule_id]
                    counts[0] += 1
                    counts[1] += record.packet_count
                    counts[2] += record.byte_count
    return {rule_id: RuleHits(*counts) for rule_id, counts in totals.items()}

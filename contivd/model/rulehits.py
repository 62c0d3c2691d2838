"""Rule hit counters added up and named, as pure functions over the nodes' answers.

Each node agent answers packets and bytes per flow owner: Contiv's compiled rule ids at
`/rulestats` (`<attachment>:<tenant>:<policy>:<ruleId>:<direction>`, contivd.model.policy) and
NetworkPolicy's rule ids at `/netpolstats` (`<ns>/<policy>/<direction>/<index>` for a rule,
`<ns>/<pod>/<direction>/isolation` for a pod's default drop). Policy is judged at the source
node, so the cluster's hits of a rule are the sum over nodes; `policy_hits` does that sum keyed
by what an operator asks about (a model rule, a NetworkPolicy rule, a group's default drop) and
the label functions name them as /metrics does. Not responsible for reading the counters
(contivd.agent.netpolstats) nor for asking the nodes (the API).

Contiv's policy table allows what no rule matches (Contiv's default), so Contiv's groups drop
nothing by default: a "deny all" is a rule of lowest priority and is counted as that rule.
The default drops are NetworkPolicy's isolations, per pod and direction: Kubernetes isolates
pods, not groups, so the pod is the group (`tenant` = namespace, `group` = the pod's name).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .policy import rule_key_of

K = TypeVar("K", str, "DefaultDrop", tuple[str, str, str])
"""What counters are summed per: a rule id or key, a default drop, /metrics labels."""
Counts = dict[str, int]
"""`{"packets": n, "bytes": n}`."""
Answer = Mapping[str, Mapping[str, int]]
"""One node's answer: flow owner id → its counters (packets, bytes, flows)."""
ISOLATION = "isolation"


@dataclass(frozen=True, order=True)
class DefaultDrop:
    """Whose default dropped: a NetworkPolicy-isolated pod (`tenant` its namespace, `group` its
    name) in one direction (`ingress` or `egress`)."""

    tenant: str
    group: str
    direction: str


def add_up(answers: Iterable[Answer], key: Callable[[str], K | None]) -> dict[K, Counts]:
    """Packets and bytes of every flow owner id of every answer, summed per `key(id)` (ids whose
    key is None are left out), sorted by key."""
    totals: dict[K, Counts] = {}
    for answer in answers:
        for owner, hits in answer.items():
            found = key(owner)
            if found is None:
                continue
            total = totals.setdefault(found, {"packets": 0, "bytes": 0})
            total["packets"] += int(hits.get("packets", 0))
            total["bytes"] += int(hits.get("bytes", 0))
    return {k: totals[k] for k in sorted(totals)}


def default_drop_of(rule_id: str) -> DefaultDrop | None:
    """The default drop a NetworkPolicy rule id counts (None: a rule, not an isolation)."""
    parts = rule_id.split("/")
    if len(parts) != 4 or parts[3] != ISOLATION:
        return None
    return DefaultDrop(parts[0], parts[1], parts[2])


def netpol_rule_of(rule_id: str) -> str | None:
    """A NetworkPolicy rule id as itself; None for an isolation (a default drop, not a rule)."""
    return None if default_drop_of(rule_id) is not None else rule_id


def netpol_policies(rule_ids: Iterable[str]) -> dict[str, set[str]]:
    """Namespace → the NetworkPolicies that have rules there, from NetworkPolicy rule ids (a
    namespace with only isolations is there, with no policy)."""
    found: dict[str, set[str]] = {}
    for rule_id in rule_ids:
        namespace, name = (rule_id.split("/") + [""])[:2]
        names = found.setdefault(namespace, set())
        if netpol_rule_of(rule_id) is not None:
            names.add(name)
    return found


def netpol_labels(rule_id: str) -> tuple[str, str, str] | None:
    """/metrics labels (tenant, policy, rule) of a NetworkPolicy rule id: the namespace, the
    NetworkPolicy's name and `<direction>/<index>`; None for an isolation."""
    if netpol_rule_of(rule_id) is None:
        return None
    namespace, name, direction, index = (rule_id.split("/") + ["", "", "", ""])[:4]
    return namespace, name, f"{direction}/{index}"


def contiv_labels(compiled_rule_id: str) -> tuple[str, str, str]:
    """/metrics labels (tenant, policy, rule) of a compiled Contiv rule id: its model rule's
    tenant, policy and ruleId (its directions and attachments add up into it)."""
    tenant, policy, rule = (rule_key_of(compiled_rule_id).split(":") + ["", "", ""])[:3]
    return tenant, policy, rule


@dataclass(frozen=True)
class PolicyHits:
    """The cluster's counters: Contiv's model rules (`tenant:policy:ruleId`), Contiv's compiled
    rules (the status page's matrix cells name them), NetworkPolicy's rules and default drops."""

    rules: dict[str, Counts]
    compiled: dict[str, Counts]
    netpol: dict[str, Counts]
    default_drops: dict[DefaultDrop, Counts]

    def scoped(self, tenant: str, policy: str | None = None) -> PolicyHits:
        """Only one tenant's (namespace's) rules and, when `policy` is given, one policy's (or
        NetworkPolicy's); a policy scope has no default drops (they belong to no policy)."""

        def keep(key: str, separator: str) -> bool:
            parts = key.split(separator)
            return parts[0] == tenant and (policy is None or parts[1] == policy)

        return PolicyHits(
            {k: v for k, v in self.rules.items() if keep(k, ":")},
            {k: v for k, v in self.compiled.items() if keep(rule_key_of(k), ":")},
            {k: v for k, v in self.netpol.items() if keep(k, "/")},
            {} if policy is not None else {k: v for k, v in self.default_drops.items() if k.tenant == tenant},
        )

    def to_json(self) -> dict[str, Any]:
        drops = [{"tenant": d.tenant, "group": d.group, "direction": d.direction, **counts} for d, counts in self.default_drops.items()]
        return {"rules": self.rules, "compiled": self.compiled, "netpol": self.netpol, "defaultDrops": drops}


def policy_hits(rulestats: Iterable[Answer], netpolstats: Iterable[Answer]) -> PolicyHits:
    """The nodes' `/rulestats` and `/netpolstats` answers summed."""
    contiv, kubernetes = list(rulestats), list(netpolstats)
    return PolicyHits(add_up(contiv, rule_key_of), add_up(contiv, str), add_up(kubernetes, netpol_rule_of), add_up(kubernetes, default_drop_of))

"""All flows and groups one bridge should hold, computed from its inputs (pure, deterministic)."""

from __future__ import annotations

from dataclasses import dataclass

from openflow.flow import Flow, Group, PipelineError
from openflow.flows import (
    arp,
    base,
    classifier,
    dstepg,
    forward,
    policy,
    qos,
    service,
    spoofguard,
)
from openflow.inputs import NodeInputs
from openflow.pipeline import TABLES, Tables

FLOW_BUILDERS = (base, classifier, spoofguard, arp, service, dstepg, policy, qos, forward)
GROUP_BUILDERS = (service, forward)


@dataclass(frozen=True)
class Desired:
    """Sorted flows (unique by table/priority/match) and groups (unique by id)."""

    flows: tuple[Flow, ...]
    groups: tuple[Group, ...]


def _unique(items: list[Flow]) -> tuple[Flow, ...]:
    seen: dict[object, Flow] = {}
    for flow in sorted(items):
        other = seen.setdefault(flow.key, flow)
        if other != flow:
            raise PipelineError(f"two flows with one match in table {flow.table} priority {flow.priority}: {other} / {flow}")
    return tuple(seen.values())


def desired(inputs: NodeInputs, tables: Tables = TABLES) -> Desired:
    """Every flow and group of the bridge; PipelineError if two objects collide (same match, same group id)."""
    flows = _unique([f for builder in FLOW_BUILDERS for f in builder.flows(tables, inputs)])
    groups: dict[int, Group] = {}
    for group in sorted(g for builder in GROUP_BUILDERS for g in builder.groups(tables, inputs)):
        if groups.setdefault(group.group_id, group) != group:
            raise PipelineError(f"group id {group.group_id:#x} is claimed by two objects")
    return Desired(flows, tuple(groups.values()))

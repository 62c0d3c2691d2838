"""Table-miss flows, straight from the pipeline declaration (goto the miss table, or drop)."""

from __future__ import annotations

from openflow.fields import Category, cookie
from openflow.flow import Flow, Resubmit
from openflow.inputs import NodeInputs
from openflow.pipeline import Tables

MISS_PRIORITY = 0


def pipeline_flows(tables: Tables, round_: int) -> list[Flow]:
    """One priority-0 flow per table; every table has one so no packet reaches OVS's implicit miss."""
    return [
        t.flow(
            MISS_PRIORITY,
            {},
            cookie=cookie(Category.PIPELINE, t.name, round_),
            actions=() if t.spec.miss_resubmit is None else (Resubmit(t.goto_id(t.spec.miss_resubmit)),),
            goto=t.spec.miss,
        )
        for t in tables.values()
    ]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    return sorted(pipeline_flows(tables, inputs.round))

"""Table-miss flows, straight from the pipeline declaration (goto the miss table, or drop)."""

from __future__ import annotations

from openflow.fields import Category, cookie
from openflow.flow import Flow
from openflow.inputs import NodeInputs
from openflow.pipeline import Tables

MISS_PRIORITY = 0


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    """One priority-0 flow per table; every table has one so no packet reaches OVS's implicit miss."""
    return sorted(t.flow(MISS_PRIORITY, {}, cookie=cookie(Category.PIPELINE, t.name, inputs.round), goto=t.spec.miss) for t in tables.values())

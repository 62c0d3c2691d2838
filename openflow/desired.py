"""All flows and groups one bridge should hold, computed from its inputs (pure, deterministic).

The merge of every owner's build (:mod:`openflow.owners`): what the incremental engine
(:mod:`openflow.incremental`) holds after any sequence of updates, computed from scratch.
"""

from __future__ import annotations

from openflow.inputs import NodeInputs
from openflow.owners import Ledger, all_owners
from openflow.pipeline import TABLES, Tables
from openflow.plan import Desired

__all__ = ["Desired", "desired"]


def desired(inputs: NodeInputs, tables: Tables = TABLES) -> Desired:
    """Every flow and group of the bridge; PipelineError if two objects collide (same match, same group id)."""
    return Ledger.of(all_owners(tables, inputs)).desired()

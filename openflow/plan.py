"""The two records flow computation hands over: a bridge's whole state and an ordered change to it.

Here alone so that the builders' merge (:mod:`openflow.owners`), :mod:`openflow.desired`,
:mod:`openflow.diff` and the incremental engine share them without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass

from openflow.flow import Flow, Group


@dataclass(frozen=True)
class Desired:
    """Sorted flows (unique by table/priority/match) and groups (unique by id)."""

    flows: tuple[Flow, ...]
    groups: tuple[Group, ...]


@dataclass(frozen=True)
class Plan:
    """Ordered update: add_groups, modify_groups, add_flows, delete_flows, delete_groups."""

    add_groups: tuple[Group, ...] = ()
    modify_groups: tuple[Group, ...] = ()
    add_flows: tuple[Flow, ...] = ()
    delete_flows: tuple[Flow, ...] = ()
    delete_groups: tuple[Group, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.add_groups or self.modify_groups or self.add_flows or self.delete_flows or self.delete_groups)

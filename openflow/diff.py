"""Turn desired vs installed state into an ordered, hitless update plan.

Apply the plan's fields in declaration order: groups a flow will reference
exist before the flow, every added or changed flow is an OFPFC_ADD that
replaces the old entry with the same match atomically (no window without a
flow), and only then are flows no longer desired deleted (DELETE_STRICT by
match), followed by groups nothing references any more.  A flow whose only
difference is its cookie round is re-added, so after a restart every kept
flow carries the new round.

When installed flows cannot be listed, the alternative is the round sweep:
add everything under the new round, then delete by cookie with
:func:`round_sweep` (cookie, mask) for the old round.
"""

from __future__ import annotations

from collections.abc import Iterable

from openflow.fields import ROUND_MASK, ROUND_SHIFT
from openflow.flow import Flow, Group
from openflow.plan import Desired, Plan

__all__ = ["Plan", "diff", "round_sweep"]


def diff(want: Desired, flows: Iterable[Flow] = (), groups: Iterable[Group] = ()) -> Plan:
    """Plan turning the installed ``flows``/``groups`` into ``want`` (nothing stale, nothing twice)."""
    have_flows = {f.key: f for f in flows}
    have_groups = {g.group_id: g for g in groups}
    want_keys = {f.key for f in want.flows}
    want_ids = {g.group_id for g in want.groups}
    return Plan(
        add_groups=tuple(g for g in want.groups if g.group_id not in have_groups),
        modify_groups=tuple(g for g in want.groups if g.group_id in have_groups and have_groups[g.group_id] != g),
        add_flows=tuple(f for f in want.flows if have_flows.get(f.key) != f),
        delete_flows=tuple(sorted(f for k, f in have_flows.items() if k not in want_keys)),
        delete_groups=tuple(sorted(g for i, g in have_groups.items() if i not in want_ids)),
    )


def round_sweep(old_round: int) -> tuple[int, int]:
    """(cookie, cookie_mask) of an OFPFC_DELETE removing every flow of ``old_round``."""
    return old_round << ROUND_SHIFT, ROUND_MASK

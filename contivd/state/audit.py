"""The stored audit trail (`/contivd/audit/<time>-<node>-<sequence>`): one entry per API write.

contivd.http.audit records and batches the entries; the status page and `/contivd/audit` read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from . import keys
from .stored import Family


@dataclass(frozen=True)
class AuditEntry:
    time: float  # unix time the write was answered
    node: str  # the member that executed it
    who: str  # token:<name>, node:<name>, node (a member's own call) or root (the API socket)
    method: str
    route: str  # the route's path template, e.g. /api/v1/<collection>/<key>/
    object: str  # the object key: the path's parameters, or the body's identifying fields
    status: int  # the HTTP status answered

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> AuditEntry:
        return cls(**{name: value[name] for name in cls.__dataclass_fields__})


def entry_id(entry: AuditEntry, node: str, sequence: int) -> str:
    """Sorted by time; the node and its counter keep two entries of one instant apart."""
    return f"{int(entry.time * 1e6):017d}-{node}-{sequence:09d}"


AUDIT: Family[AuditEntry] = Family(keys.AUDIT_PREFIX, AuditEntry.from_json, AuditEntry.to_json)
"""Audit entries by `entry_id`, oldest first."""

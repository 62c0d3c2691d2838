"""The cluster CA record (`/contiv.io/tls/ca`): the current CA and the CAs it replaced.

The current CA's certificate is stored in clear and its private key sealed with the cluster
secret (contivd.tls.pki.seal_key); each CA it replaced stays trusted until the end of its grace
period. Records written before rotation existed have no `retired`. What a rotation may do is
contivd.tls.authority's; issuing and following the CA is contivd.tls.material's and serving's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import keys
from .stored import Single


@dataclass(frozen=True)
class RetiredCa:
    certificate: str
    until: float  # unix time the grace period ends


@dataclass(frozen=True)
class CaRecord:
    certificate: str
    sealed_key: str
    created_by: str
    retired: tuple[RetiredCa, ...] = ()

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> CaRecord:
        retired = tuple(RetiredCa(str(r["certificate"]), float(r["until"])) for r in value.get("retired", ()))
        return cls(str(value["certificate"]), str(value["sealedKey"]), str(value.get("createdBy", "")), retired)

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"certificate": self.certificate, "sealedKey": self.sealed_key, "createdBy": self.created_by}
        if self.retired:
            record["retired"] = [{"certificate": r.certificate, "until": r.until} for r in self.retired]
        return record

    def trusted(self, now: float) -> tuple[str, ...]:
        """The CA certificates a node trusts at `now`: the current one first."""
        return (self.certificate, *(r.certificate for r in self.retired if r.until > now))

    def next_change(self, now: float) -> float | None:
        """When the trusted set shrinks next (a grace period ends), or None."""
        return min((r.until for r in self.retired if r.until > now), default=None)


CLUSTER_CA: Single[CaRecord] = Single(keys.TLS_CA, CaRecord.from_json, CaRecord.to_json)
"""The cluster CA record; absent until the first node that needs TLS creates it."""

"""The cluster CA record and what rotating it means, as pure functions.

The store holds one record under `keys.TLS_CA`: the current CA (certificate, private key sealed
with the cluster secret) and the CAs it replaced, each trusted until the end of its grace period.
Nodes trust the current CA and every retired one still in grace, so while each node re-issues
its certificate under the new CA, old and new certificates are both accepted everywhere; after
the grace period only the new CA is. Records written before rotation existed have no `retired`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

DEFAULT_GRACE_SECONDS = 3600.0
MIN_GRACE_SECONDS = 10.0  # long enough for every node to watch the change and re-issue
MAX_GRACE_SECONDS = 30 * 86400.0


class RotationRefusedError(Exception):
    """A rotation asked at the wrong time or with bad parameters; the message says why."""


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

    def rotated(self, certificate: str, sealed_key: str, by: str, grace: float, now: float) -> CaRecord:
        """The record after a rotation to the new CA; the current one retires for `grace` seconds.
        Refused while an earlier rotation is still in its grace period: nodes would otherwise
        drop a CA that some of them may still serve."""
        if not MIN_GRACE_SECONDS <= grace <= MAX_GRACE_SECONDS:
            raise RotationRefusedError(f"grace must be between {MIN_GRACE_SECONDS:g} s and {MAX_GRACE_SECONDS:g} s, got {grace:g}")
        pending = self.next_change(now)
        if pending is not None:
            raise RotationRefusedError(
                f"the previous rotation's grace period runs until {pending:.0f} (unix time, in {pending - now:.0f} s): "
                "rotate again after it, once every node serves a certificate of the current CA"
            )
        return replace(self, certificate=certificate, sealed_key=sealed_key, created_by=by, retired=(RetiredCa(self.certificate, now + grace),))


def bundle(certificates: tuple[str, ...]) -> str:
    """One PEM text holding every certificate, the first one first (what `/ca.crt` serves)."""
    return "".join(pem if pem.endswith("\n") else pem + "\n" for pem in certificates)

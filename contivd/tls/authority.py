"""What rotating the cluster CA means, as pure functions.

Nodes trust the current CA and every retired one still in grace (contivd.state.ca.CaRecord), so
while each node re-issues its certificate under the new CA, old and new certificates are both
accepted everywhere; after the grace period only the new CA is.
"""

from __future__ import annotations

from dataclasses import replace

from ..state.ca import CaRecord, RetiredCa

DEFAULT_GRACE_SECONDS = 3600.0
MIN_GRACE_SECONDS = 10.0  # long enough for every node to watch the change and re-issue
MAX_GRACE_SECONDS = 30 * 86400.0


class RotationRefusedError(Exception):
    """A rotation asked at the wrong time or with bad parameters; the message says why."""


def rotated(record: CaRecord, certificate: str, sealed_key: str, by: str, grace: float, now: float) -> CaRecord:
    """The record after a rotation to the new CA; the current one retires for `grace` seconds.
    Refused while an earlier rotation is still in its grace period: nodes would otherwise
    drop a CA that some of them may still serve."""
    if not MIN_GRACE_SECONDS <= grace <= MAX_GRACE_SECONDS:
        raise RotationRefusedError(f"grace must be between {MIN_GRACE_SECONDS:g} s and {MAX_GRACE_SECONDS:g} s, got {grace:g}")
    pending = record.next_change(now)
    if pending is not None:
        raise RotationRefusedError(
            f"the previous rotation's grace period runs until {pending:.0f} (unix time, in {pending - now:.0f} s): "
            "rotate again after it, once every node serves a certificate of the current CA"
        )
    return replace(record, certificate=certificate, sealed_key=sealed_key, created_by=by, retired=(RetiredCa(record.certificate, now + grace),))


def bundle(certificates: tuple[str, ...]) -> str:
    """One PEM text holding every certificate, the first one first (what `/ca.crt` serves)."""
    return "".join(pem if pem.endswith("\n") else pem + "\n" for pem in certificates)

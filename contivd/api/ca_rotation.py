"""The CA rotation route's work (`contivd ctl cluster ca rotate`): a new cluster CA in one write.

The leader creates the CA and writes the record in a transaction on the record's revision;
every node then follows it on its own (contivd.tls.serving): trusts old and new, re-issues its
certificate under the new CA, and drops the old one when the grace period ends. A cluster
whose nodes serve operator-supplied files has no cluster CA to rotate.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import trio

from ..http.errors import BadRequestError
from ..model import ConflictError, ValidationError
from ..state.ca import CLUSTER_CA
from ..tls.authority import DEFAULT_GRACE_SECONDS, RotationRefusedError, rotated
from ..tls.fingerprint import fingerprint_pem
from ..tls.pki import create_ca, seal_key

if TYPE_CHECKING:  # annotations only: a follower of the store never loads PySyncObj
    from ..nodes import NodeStore


def _grace(request: Any) -> float:
    """The grace period of `{"grace": seconds}` (absent or empty body: the default)."""
    if request is None or request == {}:
        return DEFAULT_GRACE_SECONDS
    if not isinstance(request, dict) or set(request) - {"grace"}:
        raise BadRequestError('the body must be {"grace": seconds} (or empty for the default of 3600)')
    grace = request.get("grace", DEFAULT_GRACE_SECONDS)
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise ValidationError("grace", f"grace must be a number of seconds, got {grace!r}")
    return float(grace)


async def rotate_ca(store: NodeStore, secret: str | None, node: str, request: Any) -> tuple[dict[str, Any], int]:
    """Replace the cluster CA; the old one stays trusted for the grace period. Answers both
    fingerprints and when the grace period ends."""
    grace = _grace(request)
    held = await CLUSTER_CA.get(store)
    if held is None or secret is None:
        raise ConflictError(
            "this cluster has no cluster CA to rotate: its nodes serve plain HTTP on loopback, or the operator's own files "
            "(--tls-cert/--tls-key/--tls-ca: replace those files on each node and restart it)"
        )
    record = held.record
    ca = await trio.to_thread.run_sync(create_ca, node)
    now = time.time()
    try:
        rotation = rotated(record, ca.certificate, seal_key(ca.key, secret), node, grace, now)
    except RotationRefusedError as exc:
        raise ConflictError(str(exc)) from None
    result = await store.txn([CLUSTER_CA.unchanged(held)], [CLUSTER_CA.put(rotation)])
    if not result.succeeded:
        raise ConflictError("the cluster CA changed meanwhile (another rotation?); nothing written")
    answer = {
        "fingerprint": fingerprint_pem(ca.certificate),
        "previousFingerprint": fingerprint_pem(record.certificate),
        "graceUntil": now + grace,
    }
    return answer, result.revision

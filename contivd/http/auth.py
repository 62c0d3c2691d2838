"""Authentication of node-to-node HTTP calls with the cluster secret.

A forwarding node signs method, path, a timestamp and the body with HMAC-SHA256 under a key
derived from the cluster secret; the receiver checks the signature and that the timestamp is
within a short window (replays of old requests fail). Operators' tools may instead send the
secret itself as a bearer token. Comparisons are constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import time
from collections.abc import Mapping

from .errors import UnauthorizedError

SIGNATURE_HEADER = "X-Contivd-Signature"
MAX_SKEW_SECONDS = 30.0


def _key(secret: str) -> bytes:
    return hashlib.sha256(b"contivd-api-v1\0" + secret.encode()).digest()


def sign(secret: str, method: str, path: str, body: bytes, now: float | None = None) -> str:
    """The header value for one request: `<unix time>:<hex hmac>`."""
    stamp = f"{(time.time() if now is None else now):.3f}"
    message = b"\n".join([method.upper().encode(), path.encode(), stamp.encode(), hashlib.sha256(body).digest()])
    return f"{stamp}:{hmac.new(_key(secret), message, hashlib.sha256).hexdigest()}"


def verify(secret: str, header: str, method: str, path: str, body: bytes, now: float | None = None) -> bool:
    stamp, _, _ = header.partition(":")
    try:
        when = float(stamp)
    except ValueError:
        return False
    current = time.time() if now is None else now
    if abs(current - when) > MAX_SKEW_SECONDS:
        return False
    expected = sign(secret, method, path, body, now=when)
    return hmac.compare_digest(expected.encode(), header.encode())


def bearer_ok(secret: str, authorization: str) -> bool:
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), secret.encode())


def _is_loopback_peer(address: str | None) -> bool:
    """A peer address (never resolved: a name is not a loopback peer) on loopback or a unix socket."""
    try:
        return address is not None and ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return address == "<local>"  # unix socket peers


def authenticate(secret: str | None, method: str, path: str, body: bytes, headers: Mapping[str, str], remote: str | None) -> None:
    """Accept a node signature, the secret as a bearer token, or a loopback caller; else raise
    UnauthorizedError. `headers` have lower-case names; `path` includes the query string."""
    signature = headers.get(SIGNATURE_HEADER.lower())
    if signature is not None:
        if not secret or not verify(secret, signature, method, path, body):
            raise UnauthorizedError("invalid node signature")
        return
    authorization = headers.get("authorization")
    if authorization:
        if not secret or not bearer_ok(secret, authorization):
            raise UnauthorizedError("invalid bearer token")
        return
    if not _is_loopback_peer(remote):
        raise UnauthorizedError("requests from other hosts must be signed by a cluster node or carry the cluster secret as a bearer token")

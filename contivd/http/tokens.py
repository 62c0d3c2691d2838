"""Operator tokens with roles: what a token looks like and how one is checked (its stored record
and the roles: contivd.state.tokens).

Operators authenticate with tokens, never with the cluster secret (that one keys Raft's
encryption and the node signatures, so it must not travel in operators' requests). A token is
`ctd1.<name>.<random>`: the name finds its record without a scan, the random part (256 bits)
makes it unguessable. The store keeps only a SHA-256 of the whole token (a fast hash is enough
for 256 random bits; a slow one would only cost every request), compared in constant time.
A revoked token keeps its record, marked, so the refusal can say "revoked" rather than "unknown".
Every node checks against its own replica, so a revocation applies wherever it has replicated.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from ..state.tokens import TOKEN_ROLES as TOKEN_ROLES  # the roles live with the records that store them; imported from here too
from ..state.tokens import Role as Role
from ..state.tokens import TokenRecord
from .errors import ForbiddenError, UnauthorizedError

TOKEN_VERSION = "ctd1"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


@dataclass(frozen=True)
class Principal:
    """Who made a request, as the audit trail names them: `token:<name>`, `node:<name>`, `root`
    (the unix socket) or `loopback` (a tokenless loopback caller)."""

    name: str
    role: Role
    refusal_hint: str = ""  # what a caller refused for its role should do instead


def require(principal: Principal, needed: Role) -> None:
    if principal.role < needed:
        hint = f": {principal.refusal_hint}" if principal.refusal_hint else ""
        raise ForbiddenError(f"{principal.name} has role {principal.role.label}; this request needs role {needed.label}{hint}")


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"token name {name!r} must be 1-63 letters, digits, '-' or '_', starting with a letter or digit")
    return name


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(name: str, role: Role, now: float, ttl: float | None) -> tuple[str, TokenRecord]:
    """A fresh token (shown once) and the record to store for it."""
    token = f"{TOKEN_VERSION}.{check_name(name)}.{secrets.token_urlsafe(32)}"
    return token, TokenRecord(name, role, digest(token), now, None if ttl is None else now + ttl)


def token_name(token: str) -> str | None:
    """The name a token claims, or None when it is not shaped like a contivd token."""
    parts = token.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == TOKEN_VERSION and _NAME.fullmatch(parts[1]) else None


def check_token(token: str, record: TokenRecord | None, now: float) -> Principal:
    """The principal `token` authenticates as against its stored record; else UnauthorizedError
    with the reason (unknown, revoked, expired)."""
    if record is None or not hmac.compare_digest(digest(token).encode(), record.digest.encode()):
        raise UnauthorizedError("unknown token")
    if record.revoked is not None:
        raise UnauthorizedError(f"token {record.name!r} has been revoked")
    if record.expires is not None and now >= record.expires:
        raise UnauthorizedError(f"token {record.name!r} expired")
    return Principal(f"token:{record.name}", record.role)

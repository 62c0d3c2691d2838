"""Operator tokens with roles: what a token looks like, how it is stored, how one is checked.

Operators authenticate with tokens, never with the cluster secret (that one keys Raft's
encryption and the node signatures, so it must not travel in operators' requests). A token is
`ctd1.<name>.<random>`: the name finds its record without a scan, the random part (256 bits)
makes it unguessable. The store keeps only a SHA-256 of the whole token (a fast hash is enough
for 256 random bits; a slow one would only cost every request), compared in constant time.
A revoked token keeps its record, marked, so the refusal can say "revoked" rather than "unknown".
Every node checks against its own replica, so a revocation applies wherever it has replicated.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from .errors import ForbiddenError, UnauthorizedError

TOKEN_VERSION = "ctd1"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")


class Role(enum.IntEnum):
    """Each role can do what the roles below it can (the order is the comparison)."""

    VIEWER = 1  # reads, the status page, /metrics, the audit trail
    OPERATOR = 2  # plus endpoint and service-level operations (ep cleanup, netprofiles, service LBs)
    ADMIN = 3  # plus everything else: tenants, networks, policy, tokens, imports, snapshots
    NODE = 4  # a cluster member's signed call; never held by a token

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def for_token(cls, text: str) -> Role:
        """The role a token may be created with, from its name; ValueError names the choices."""
        try:
            role = cls[text.upper()]
        except KeyError:
            role = cls.NODE
        if role is cls.NODE:
            raise ValueError(f"role must be one of {', '.join(r.label for r in TOKEN_ROLES)}, got {text!r}")
        return role


TOKEN_ROLES = (Role.VIEWER, Role.OPERATOR, Role.ADMIN)


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


@dataclass(frozen=True)
class TokenRecord:
    """A token as stored: never the token itself."""

    name: str
    role: Role
    digest: str  # hex SHA-256 of the whole token
    created: float  # unix time
    expires: float | None  # unix time; None: never
    revoked: float | None = None  # unix time of the revocation

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role.label,
            "digest": self.digest,
            "created": self.created,
            "expires": self.expires,
            "revoked": self.revoked,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TokenRecord:
        return cls(value["name"], Role[value["role"].upper()], value["digest"], value["created"], value.get("expires"), value.get("revoked"))

    def public(self) -> dict[str, Any]:
        """What `auth token ls` shows: everything but the digest."""
        return {k: v for k, v in self.to_json().items() if k != "digest"}


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

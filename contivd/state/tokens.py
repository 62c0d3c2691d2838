"""Operators' token records (`/contivd/auth/tokens/<name>`) and the roles they grant.

The store keeps a token's name, role, a SHA-256 of the token and its lifetime, never the token
itself (contivd.http.tokens makes and checks tokens; contivd.api.access manages them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from . import keys
from .stored import Family


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


TOKENS: Family[TokenRecord] = Family(keys.TOKENS_PREFIX, TokenRecord.from_json, TokenRecord.to_json)
"""Token records by name."""

"""Operators' routes: their tokens (`/api/v1/auth/tokens/…`, admin) and the audit trail of the
writes they made (`/api/v1/audit/`).

Thin handlers over access.py (token records) and http/audit.py (the stored trail); the only
collaborator is the store. Not responsible for checking tokens (http/auth.py) nor for
recording the trail (app.Dispatcher records every write it executes or refuses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..http.audit import stored
from ..http.hardening import parse_json_limited
from . import access
from .handler import AtRevision, handles

if TYPE_CHECKING:
    from ..nodes import NodeStore


@dataclass(frozen=True)
class Operators:
    store: NodeStore


@handles(Operators)
async def list_tokens(operators: Operators, body: bytes) -> Any:
    return await access.list_tokens(operators.store)


@handles(Operators)
async def create_token(operators: Operators, body: bytes, name: str) -> Any:
    return AtRevision(*await access.create_token(operators.store, name, parse_json_limited(body)))


@handles(Operators)
async def revoke_token(operators: Operators, body: bytes, name: str) -> Any:
    return AtRevision(*await access.revoke_token(operators.store, name))


@handles(Operators)
async def list_audit(operators: Operators, body: bytes) -> Any:
    await operators.store.sync()
    return [entry.to_json() for entry in stored(operators.store)]

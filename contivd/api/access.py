"""The token routes' work: create (the token shown once), list, revoke, on the leader's store.

Checking tokens is contivd.http's (every listener does it); managing them is the API's.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from raftstore import KeyValueStore

from ..http.errors import BadRequestError
from ..http.tokens import new_token
from ..model import ConflictError, NotFoundError, ValidationError
from ..state.tokens import TOKENS, Role


async def list_tokens(store: KeyValueStore) -> list[dict[str, Any]]:
    return [record.public() for record in await TOKENS.list(store)]


def _request(request: Any) -> tuple[Role, float | None]:
    """The role and TTL of `{"role": "viewer|operator|admin", "ttl": seconds or null}`."""
    if not isinstance(request, dict) or set(request) - {"role", "ttl"}:
        raise BadRequestError('the body must be {"role": "viewer|operator|admin", "ttl": seconds or null}')
    ttl = request.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0):
        raise ValidationError("ttl", f"ttl must be a positive number of seconds or null, got {ttl!r}")
    try:
        return Role.for_token(str(request.get("role", ""))), ttl
    except ValueError as exc:
        raise ValidationError("role", str(exc)) from None


async def create_token(store: KeyValueStore, name: str, request: Any) -> tuple[dict[str, Any], int]:
    """The new token's record with the token itself (in this answer only), and the revision.
    A revoked or expired token's name may be reused; a live one's may not."""
    role, ttl = _request(request)
    try:
        token, record = new_token(name, role, time.time(), ttl)
    except ValueError as exc:
        raise ValidationError("name", str(exc)) from None
    held = await TOKENS.get(store, name)
    if held is not None:
        old = held.record
        if old.revoked is None and (old.expires is None or old.expires > time.time()):
            raise ConflictError(f"token {name!r} exists; revoke it first (contivd ctl auth token revoke {name})")
    result = await store.txn([TOKENS.unchanged(name, held)], [TOKENS.put(name, record)])
    if not result.succeeded:
        raise ConflictError(f"token {name!r} changed meanwhile; nothing written")
    return {**record.public(), "token": token}, result.revision


async def revoke_token(store: KeyValueStore, name: str) -> tuple[dict[str, Any], int]:
    """Mark the record revoked (kept, so a refusal can say "revoked"); revoking twice is harmless."""
    held = await TOKENS.get(store, name)
    if held is None:
        raise NotFoundError(f"no token named {name!r}")
    record = held.record
    if record.revoked is not None:
        return record.public(), store.revision
    record = dataclasses.replace(record, revoked=time.time())
    return record.public(), await TOKENS.write(store, name, record)

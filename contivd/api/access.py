"""The token routes' work: create (the token shown once), list, revoke, on the leader's store.

Checking tokens is contivd.http's (every listener does it); managing them is the API's.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from raftstore import KeyValueStore, Put, mod_revision_is

from ..http.errors import BadRequestError
from ..http.tokens import Role, TokenRecord, new_token
from ..model import ConflictError, NotFoundError, ValidationError
from ..state import keys as layout


async def list_tokens(store: KeyValueStore) -> list[dict[str, Any]]:
    return [TokenRecord.from_json(kv.value).public() for kv in await store.list(layout.TOKENS_PREFIX)]


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
    key = layout.token(name)
    held = await store.get(key)
    if held is not None:
        old = TokenRecord.from_json(held.value)
        if old.revoked is None and (old.expires is None or old.expires > time.time()):
            raise ConflictError(f"token {name!r} exists; revoke it first (contivd ctl auth token revoke {name})")
    result = await store.txn([mod_revision_is(key, held.mod_revision if held else 0)], [Put(key, record.to_json())])
    if not result.succeeded:
        raise ConflictError(f"token {name!r} changed meanwhile; nothing written")
    return {**record.public(), "token": token}, result.revision


async def revoke_token(store: KeyValueStore, name: str) -> tuple[dict[str, Any], int]:
    """Mark the record revoked (kept, so a refusal can say "revoked"); revoking twice is harmless."""
    key = layout.token(name)
    held = await store.get(key)
    if held is None:
        raise NotFoundError(f"no token named {name!r}")
    record = TokenRecord.from_json(held.value)
    if record.revoked is not None:
        return record.public(), store.revision
    record = dataclasses.replace(record, revoked=time.time())
    return record.public(), await store.put(key, record.to_json())

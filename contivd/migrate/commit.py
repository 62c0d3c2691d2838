"""The leader side of `contivd import-contiv`: one route, one guarded transaction.

`POST /contivd/import` takes the Contiv tree as read from etcd (`{"values": {key: text},
"force": bool}`), plans it here on the leader (contivd.migrate.plan, the same code the CLI ran
for its preview) and commits the plan in one transaction together with a bump of the
configuration version: the import is atomic, all or nothing. Without `force` it refuses a store
holding anything beyond the default `global` and tenant `default`; the transaction compares the
configuration version it read, so a configuration write racing the import makes it fail
whole (nothing written; the user retries). With `force` every configuration object and state
key not in the plan is deleted in the same transaction; the guard also covers every network
state, so an endpoint created meanwhile fails the import instead of dangling.

Authenticated like every API write (contivd.http.auth), admin only, and audited; answered only
by the leader (others say where it is).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from quart import Response, request
from quart_trio import QuartTrio

from raftstore import KeyValueStore

from ..http import auth
from ..http.audit import AuditTrail
from ..http.errors import BadRequestError, answer_for
from ..http.hardening import parse_json_limited
from ..http.tokens import Role
from ..model import ConflictError
from ..nodes import leader_api_url
from ..state.tree import OwnedTree
from .plan import ImportPlan, plan_import
from .source import ContivTree, MigrationError

if TYPE_CHECKING:
    from ..nodes import NodeStore

IMPORT_PATH = "/contivd/import"


@dataclass(frozen=True)
class ImportContext:
    store: NodeStore
    access: auth.Authenticator
    audit: AuditTrail


async def commit_plan(store: KeyValueStore, plan: ImportPlan, force: bool) -> int:
    """Write `plan` in one transaction; the revision it committed at. ConflictError when refused."""
    await store.sync()
    owned = OwnedTree.read_nowait(store)
    if not force:
        held = owned.user_content()
        if held:
            shown = ", ".join(held[:5]) + (" …" if len(held) > 5 else "")
            raise ConflictError(f"contivd's store is not empty ({len(held)} objects: {shown}); nothing imported. Use --force to replace its contents")
    guards, ops = owned.replacement(plan.entries)
    result = await store.txn(guards, ops)
    if not result.succeeded:
        raise ConflictError("contivd's configuration changed while importing; nothing was written, run the import again")
    return result.revision


def _request(body: bytes) -> tuple[ContivTree, bool]:
    doc = parse_json_limited(body)
    values = doc.get("values") if isinstance(doc, dict) else None
    if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        raise BadRequestError('the import body must be {"values": {"<etcd key>": "<value text>", ...}, "force": false}')
    return ContivTree.from_values(values), bool(doc.get("force", False))


def register_import_route(app: QuartTrio, ctx: ImportContext) -> None:
    """Add POST IMPORT_PATH to the API app (the composition root calls this, as for the status page)."""

    def reply(status: int, value: Mapping[str, Any]) -> Response:
        return Response(json.dumps(value) + "\n", status=status, headers={"content-type": "application/json"})

    @app.post(IMPORT_PATH)
    async def import_contiv() -> Response:
        body = await request.get_data(as_text=False)
        assert isinstance(body, bytes)
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            who = ctx.access.check(request.method, request.full_path.rstrip("?"), body, headers, request.remote_addr, Role.ADMIN).name
        except Exception as exc:  # noqa: BLE001 - the API's one error mapping answers it (401/403)
            error = answer_for(exc)
            return reply(error.status, {"error": error.message})
        answer = await _import(ctx, body)
        ctx.audit.record(who, request.method, IMPORT_PATH, "", answer.status_code)
        return answer

    async def _import(ctx: ImportContext, body: bytes) -> Response:
        try:
            if not ctx.store.is_leader():
                leader = leader_api_url(ctx.store)
                return reply(503, {"error": f"not the leader: send the import to {leader or 'the leader (none elected yet)'}", "leader": leader})
            tree, force = _request(body)
            plan = await plan_import(tree)
            revision = await commit_plan(ctx.store, plan, force)
        except MigrationError as exc:
            return reply(400, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - the API's one error mapping answers the rest
            error = answer_for(exc)
            return reply(error.status, {"error": error.message})
        return reply(200, {"revision": revision, "counts": dict(plan.counts)})

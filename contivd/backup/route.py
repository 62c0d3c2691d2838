"""The leader side of `contivd ctl cluster snapshot save`: GET /contivd/snapshot.

The leader takes a linearizable image of the whole store (every key and lease at one revision,
copied in one step under the apply lock) and streams it in the backup format
(raftstore's `encode_image`: header, msgpack records, end mark and SHA-256), encoding chunk by
chunk as the client reads, so a 100 000-endpoint store never sits encoded in memory. Other
members answer 503 with the leader's API URL (as the import route does): the image must come
from the member whose state includes every acknowledged write without a forward of tens of
megabytes. Authenticated like every API call (contivd.http.auth), admin only: it holds the whole store.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import trio
from quart import Response, request
from quart_trio import QuartTrio

from raftstore import encode_image

from ..http import auth
from ..http.errors import answer_for
from ..http.tokens import Role
from ..nodes import leader_api_url
from .protocol import SNAPSHOT_PATH

if TYPE_CHECKING:
    from ..nodes import NodeStore

REVISION_HEADER = "X-Contivd-Snapshot-Revision"


@dataclass(frozen=True)
class SnapshotContext:
    store: NodeStore
    access: auth.Authenticator


def _reply(status: int, value: dict[str, object]) -> Response:
    return Response(json.dumps(value) + "\n", status=status, headers={"content-type": "application/json"})


def register_snapshot_route(app: QuartTrio, ctx: SnapshotContext) -> None:
    """Add GET SNAPSHOT_PATH to the API app (called by the composition root)."""

    @app.get(SNAPSHOT_PATH)
    async def store_backup_snapshot() -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            ctx.access.check(request.method, request.full_path.rstrip("?"), b"", headers, request.remote_addr, Role.ADMIN)
            if not ctx.store.is_leader():
                leader = leader_api_url(ctx.store)
                return _reply(503, {"error": f"not the leader: ask {leader or 'the leader (none elected yet)'}", "leader": leader})
            image = await ctx.store.export_image()
        except Exception as exc:  # noqa: BLE001 - the API's one error mapping answers the rest
            error = answer_for(exc)
            return _reply(error.status, {"error": error.message})
        created = datetime.now(UTC).isoformat(timespec="seconds")

        async def body() -> AsyncIterator[bytes]:
            for chunk in encode_image(image, created):
                yield chunk
                await trio.lowlevel.checkpoint()  # let other requests run between chunks

        return Response(body(), status=200, headers={"content-type": "application/octet-stream", REVISION_HEADER: str(image.revision)})

"""`serve`: run one store member with a JSON-lines request channel on stdin/stdout.

With a FollowerConfig (`--follow`) it runs a follower of the store instead, which imports
no PySyncObj; the membership and leadership-transfer requests are then unknown ops.

A debugging and testing tool (used by `contivd store serve`, the multi-process tests and the
benchmark): every line on stdin is a request `{"id": N, "op": ..., ...}`, every answer a line
`{"id": N, "ok": true, "result": ...}` or `{"id": N, "ok": false, "error": "Type", "message": ...}`.
A `watch` request streams `{"id": N, "event": {...}}` lines until the process ends. The first
line printed is `{"ready": true, ...}`. It never listens on a socket besides Raft's own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import trio

from ._config import FollowerConfig, StoreConfig
from ._errors import StoreError
from ._follower import FollowerStore, open_follower
from ._types import Compare, Delete, DeletePrefix, KeyValue, Op, Put, mod_revision_is

if TYPE_CHECKING:
    from ._store import Store

    AnyStore = Store | FollowerStore


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value  # EventType is a str enum: json writes its value


def _op(spec: dict[str, Any]) -> Op:
    kind = spec.get("op")
    if kind == "put":
        return Put(spec["key"], spec.get("value"), spec.get("lease"))
    if kind == "delete":
        return Delete(spec["key"])
    if kind == "delete_prefix":
        return DeletePrefix(spec["prefix"])
    raise ValueError(f"unknown txn op {kind!r}: use put, delete or delete_prefix")


def _compare(spec: dict[str, Any]) -> Compare:
    return Compare(spec["key"], spec["check"], spec.get("value"))


async def _increment(store: AnyStore, key: str) -> dict[str, Any]:
    """Compare-and-swap counter: read, then write only if nobody wrote in between."""
    attempts = 0
    while True:
        attempts += 1
        current: KeyValue | None = await store.get(key)
        value = (current.value if current else 0) + 1
        result = await store.txn([mod_revision_is(key, current.mod_revision if current else 0)], [Put(key, value)])
        if result.succeeded:
            return {"value": value, "attempts": attempts, "revision": result.revision}


class _Session:
    def __init__(self, store: AnyStore, out: trio.abc.SendStream, nursery: trio.Nursery):
        self.store, self.out, self.nursery = store, out, nursery
        self.lock = trio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self.out.send_all(json.dumps(message).encode() + b"\n")

    async def handle(self, line: bytes) -> None:
        request_id: Any = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            result = await self.dispatch(request)
        except (StoreError, ValueError, KeyError, TypeError) as exc:
            await self.send({"id": request_id, "ok": False, "error": type(exc).__name__, "message": str(exc)})
        else:
            await self.send({"id": request_id, "ok": True, "result": _jsonable(result)})

    async def dispatch(self, r: dict[str, Any]) -> Any:
        s, op = self.store, r.get("op")
        stale = bool(r.get("stale", False))
        handlers: dict[str, Callable[[], Awaitable[Any]]] = {
            "put": lambda: s.put(r["key"], r.get("value"), lease=r.get("lease")),
            "get": lambda: s.get(r["key"], stale=stale),
            "list": lambda: s.list(r["prefix"], stale=stale),
            "delete": lambda: s.delete(r["key"]),
            "delete_prefix": lambda: s.delete_prefix(r["prefix"]),
            "txn": lambda: s.txn([_compare(c) for c in r.get("if", [])], [_op(o) for o in r.get("then", [])], [_op(o) for o in r.get("else", [])]),
            "incr": lambda: _increment(s, r["key"]),
            "grant": lambda: s.grant_lease(float(r["ttl"])),
            "keepalive": lambda: s.keepalive(int(r["lease"])),
            "revoke": lambda: s.revoke_lease(int(r["lease"])),
            "wait_leader": lambda: s.wait_leader(r.get("timeout")),
            "sync": lambda: s.sync(),
            "image": lambda: s.export_image(),
        }
        if not isinstance(s, FollowerStore):
            v = s
            handlers["add_member"] = lambda: v.add_member(r["address"])
            handlers["remove_member"] = lambda: v.remove_member(r["address"])
            handlers["transfer_leadership"] = lambda: v.transfer_leadership(r.get("to"))
        if op in handlers:
            return await handlers[op]()
        if op == "status":
            return s.statistics()
        if op == "hold_lease":
            self.nursery.start_soon(s.keep_lease_alive, int(r["lease"]), float(r["ttl"]))
            return True
        if op == "watch":
            self.nursery.start_soon(self.stream_watch, r.get("id"), r["prefix"], r.get("start_revision"))
            return True
        raise ValueError(f"unknown op {op!r}")

    async def stream_watch(self, request_id: Any, prefix: str, start_revision: int | None) -> None:
        async for event in self.store.watch(prefix, start_revision=start_revision):
            await self.send({"id": request_id, "event": _jsonable(event)})


def _open(config: StoreConfig | FollowerConfig) -> AbstractAsyncContextManager[AnyStore]:
    if isinstance(config, FollowerConfig):
        return open_follower(config)
    from ._store import open_store  # only a voter or read-only member loads PySyncObj

    return open_store(config)


async def serve(config: StoreConfig | FollowerConfig) -> None:
    """Run until stdin closes or SIGTERM/SIGINT arrives, then shut the member down cleanly."""
    stdin, stdout = trio.lowlevel.FdStream(os.dup(0)), trio.lowlevel.FdStream(os.dup(1))
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with _open(config) as store, trio.open_nursery() as nursery:
            session = _Session(store, stdout, nursery)

            async def stop_on_signal() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()

            async def read_requests() -> None:
                buffer = b""
                async for chunk in stdin:
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            nursery.start_soon(session.handle, line)
                nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_signal)
            nursery.start_soon(read_requests)
            await session.send({"ready": True, "pid": os.getpid(), "listen": getattr(config, "listen", None)})

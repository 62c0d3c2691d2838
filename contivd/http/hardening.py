"""Limits and headers every HTTP listener applies before any route runs (issue 16 item 5).

One ASGI front, `Hardened`, wraps the API and the agent listeners: it reads a request's body
itself, up to a size limit (413 beyond it, before a handler sees a byte) and within a deadline
(408 for a client that trickles it), then replays it to the app; and it adds the headers every
answer should carry — `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and,
on a TLS listener only (HSTS over clear HTTP is ignored by browsers and would be a lie),
`Strict-Transport-Security`. Slow *headers* are hypercorn's to cut (`listener_timeouts`): a
connection that has not sent a whole request head within its keep-alive timeout is closed.

`parse_json_limited` is the one JSON reader for request bodies: a body nested deeper than any
Contiv object could be is a 400, not a RecursionError deep inside a handler.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope

from .answer import send_answer
from .errors import BadRequestError, accepts_json

Asgi = Callable[[Scope, ASGIReceiveCallable, ASGISendCallable], Awaitable[None]]

MAX_BODY_BYTES = 1 << 20  # the largest Contiv object or plugin request is a few kB
MAX_IMPORT_BODY_BYTES = 64 << 20  # `contivd import-contiv` posts a whole Contiv etcd tree at once
BODY_SECONDS = 30.0  # a whole body must arrive within this, however slowly it trickles
HEADER_SECONDS = 10.0  # a request head (or the next one on a kept-alive connection) within this
READ_SECONDS = 60  # no byte at all for this long: the connection is dropped (hypercorn's read_timeout)
MAX_HEAD_BYTES = 16 * 1024  # request line + headers; h11 answers 431/400 beyond it
LISTEN_BACKLOG = 1024  # a burst of connections waits in the kernel instead of being refused
MAX_JSON_DEPTH = 32  # Contiv's deepest object (a policy rule in a list in an object) is 4 levels
HSTS = "max-age=31536000"

BASE_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"))


def security_headers(scheme: str) -> list[tuple[bytes, bytes]]:
    """The headers added to every answer of a listener whose requests arrive with `scheme`."""
    headers = list(BASE_HEADERS)
    if scheme == "https":
        headers.append((b"strict-transport-security", HSTS.encode()))
    return headers


def with_security_headers(headers: list[tuple[bytes, bytes]], scheme: str) -> list[tuple[bytes, bytes]]:
    """`headers` plus the security headers it does not already set (a route's own value wins)."""
    present = {name.lower() for name, _ in headers}
    return headers + [(name, value) for name, value in security_headers(scheme) if name not in present]


def json_depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value (a scalar is 0, `[]` and `{}` are 1); iterative, so
    it measures what would make a recursive walk overflow without overflowing itself."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in item)
    return deepest


_DECODER = json.JSONDecoder()


def parse_json_limited(body: bytes) -> Any:
    """The first JSON value of the body (what follows it is ignored, as Go's `json.Decoder`,
    which Contiv's handlers used, reads one value and stops), nested at most MAX_JSON_DEPTH
    levels; BadRequestError otherwise."""
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        raise BadRequestError(f"request body is not UTF-8: {exc}") from None
    text = text.lstrip(" \t\r\n")
    if not text:
        raise BadRequestError("request body is empty: expected a JSON object", contiv="EOF")
    try:
        value = _DECODER.raw_decode(text)[0]
    except RecursionError:
        value = None  # nested beyond the decoder's own stack
    except ValueError as exc:
        raise BadRequestError(f"request body is not valid JSON: {exc}") from None
    else:
        if json_depth(value) <= MAX_JSON_DEPTH:
            return value
    raise BadRequestError(f"request body is nested deeper than {MAX_JSON_DEPTH} levels")


def listener_timeouts(hconfig: HypercornConfig) -> None:
    """Against slow clients: a request head must arrive within HEADER_SECONDS (hypercorn's idle
    timer runs until a whole head is parsed), a silent connection is dropped after READ_SECONDS,
    heads are bounded in size. Each connection is its own trio task, so the ones being cut
    cost the others nothing meanwhile."""
    hconfig.keep_alive_timeout = HEADER_SECONDS
    hconfig.read_timeout = READ_SECONDS
    hconfig.h11_max_incomplete_size = MAX_HEAD_BYTES
    hconfig.backlog = LISTEN_BACKLOG


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def _read_body(receive: ASGIReceiveCallable, declared: int | None, limit: int) -> bytes:
    if declared is not None and declared > limit:
        raise _Refused(413, f"request body of {declared} bytes is larger than the {limit} allowed")
    chunks: list[bytes] = []
    size = 0
    with trio.move_on_after(BODY_SECONDS) as deadline:
        while True:
            message = cast(dict[str, Any], await receive())
            if message["type"] == "http.disconnect":
                raise _Refused(400, "the client went away before sending its whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _Refused(413, f"request body is larger than the {limit} bytes allowed")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)
    assert deadline.cancelled_caught
    raise _Refused(408, f"request body not received within {BODY_SECONDS:g} s")


class Hardened:
    """ASGI front: body limits and deadline, security headers. `limits` maps a path to its own
    body limit (the import of a whole Contiv tree is larger than any one object)."""

    def __init__(self, app: Asgi, limits: Mapping[str, int] | None = None, default_limit: int = MAX_BODY_BYTES):
        self.app, self.limits, self.default_limit = app, dict(limits or {}), default_limit

    async def __call__(self, asgi_scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        scope = cast(dict[str, Any], asgi_scope)
        if scope["type"] != "http":
            await self.app(asgi_scope, receive, send)
            return
        scheme = scope.get("scheme", "http")

        async def send_hardened(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": with_security_headers(list(message.get("headers", [])), scheme)}
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            declared = int(headers["content-length"]) if "content-length" in headers else None
            body = await _read_body(receive, declared, self.limits.get(scope.get("path", ""), self.default_limit))
        except ValueError:
            await _refuse(send_hardened, 400, "Content-Length is not a number", headers)
            return
        except _Refused as exc:
            await _refuse(send_hardened, exc.status, str(exc), headers)
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:  # the app reads past the body only to learn of a disconnect
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(asgi_scope, replay, send_hardened)


async def _refuse(send: Callable[[Any], Awaitable[None]], status: int, message: str, headers: Mapping[str, str]) -> None:
    """JSON for clients that accept it, plain text for the others (a transport-level refusal,
    like the 4xx Go's HTTP server itself answered Contiv's clients); the connection closes."""
    if accepts_json(headers.get("accept", "")):
        content_type, body = b"application/json", (json.dumps({"error": message}) + "\n").encode()
    else:
        content_type, body = b"text/plain; charset=utf-8", (message + "\n").encode()
    await send_answer(send, status, [(b"content-type", content_type), (b"connection", b"close")], body)

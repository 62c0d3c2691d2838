"""Sending a whole answer over ASGI, with its length.

An ASGI answer without `content-length` goes out chunked: hypercorn then writes the head, the
body as one chunk and the closing empty chunk, three socket writes where two do (and three
wake-ups of the client). Every answer contivd builds whole goes through `send_answer`, which
says how long it is; Go's HTTP server, which Contiv's clients talked to, did the same for
answers this small.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any


async def send_answer(send: Callable[[Any], Awaitable[None]], status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> None:
    """`send`: the ASGI send callable, or a wrapper of it (hardening's)."""
    await send({"type": "http.response.start", "status": status, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})

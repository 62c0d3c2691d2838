"""The pure pieces of contivd.http.hardening: JSON depth, the limited parser, the headers (HSTS
only under TLS), and the ASGI front on an https scope (no TLS listener is needed to prove the
header follows the scheme the server reports)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from contivd.http.errors import BadRequestError
from contivd.http.hardening import MAX_JSON_DEPTH, Hardened, json_depth, parse_json_limited, security_headers, with_security_headers

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30
)


def recursive_depth(value: Any) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max((recursive_depth(v) for v in value), default=0)
    return 0


@given(JSON_VALUES)
def test_json_depth_matches_the_recursive_definition(value: Any) -> None:
    assert json_depth(value) == recursive_depth(value)


@given(JSON_VALUES)
def test_shallow_json_parses_to_itself_and_trailing_text_is_ignored(value: Any) -> None:
    assert parse_json_limited((json.dumps(value) + "\n trailing").encode()) == value


@pytest.mark.parametrize("body", [b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), b"[" * 100_000, b'{"a":' * 300_000])
def test_deep_json_is_a_bad_request(body: bytes) -> None:
    with pytest.raises(BadRequestError, match="nested deeper than"):
        parse_json_limited(body)


@pytest.mark.parametrize("body, words", [(b"", "empty"), (b"\xff", "UTF-8"), (b"{nope", "not valid JSON")])
def test_other_bad_bodies_name_their_problem(body: bytes, words: str) -> None:
    with pytest.raises(BadRequestError, match=words):
        parse_json_limited(body)


def test_hsts_only_under_tls_and_a_routes_own_header_wins() -> None:
    assert b"strict-transport-security" not in dict(security_headers("http"))
    assert dict(security_headers("https"))[b"strict-transport-security"].startswith(b"max-age=")
    merged = with_security_headers([(b"referrer-policy", b"same-origin")], "http")
    assert [v for k, v in merged if k == b"referrer-policy"] == [b"same-origin"]
    assert (b"x-content-type-options", b"nosniff") in merged


async def _call(app: Hardened, scope: dict[str, Any], body: bytes) -> tuple[list[dict[str, Any]], bytes]:
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body[:3], "more_body": True}, {"type": "http.request", "body": body[3:], "more_body": False}]

    async def receive() -> Any:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)  # type: ignore[arg-type]
    return sent, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


async def echo(scope: Any, receive: Any, send: Any) -> None:
    message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": message["body"], "more_body": False})


def scope(scheme: str, path: str = "/x", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "scheme": scheme, "path": path, "method": "POST", "headers": headers or []}


def test_the_front_replays_the_body_and_adds_hsts_on_https() -> None:
    sent, body = trio.run(_call, Hardened(echo), scope("https"), b"hello world")
    assert body == b"hello world"
    assert dict(sent[0]["headers"])[b"strict-transport-security"].startswith(b"max-age=")


def test_the_front_applies_per_path_limits_and_answers_json_clients_in_json() -> None:
    app = Hardened(echo, {"/big": 100}, default_limit=10)
    assert trio.run(_call, app, scope("http", "/big"), b"x" * 50)[1] == b"x" * 50
    sent, body = trio.run(_call, app, scope("http", "/small", [(b"accept", b"application/json")]), b"x" * 50)
    assert sent[0]["status"] == 413 and "larger than" in json.loads(body)["error"]
    sent, body = trio.run(_call, app, scope("http", "/small", [(b"content-length", b"nope")]), b"")
    assert sent[0]["status"] == 400 and b"Content-Length" in body

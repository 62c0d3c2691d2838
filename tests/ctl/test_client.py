"""The client's error mapping, with httpx's mock transport (shapes a real contivd rarely
produces on demand: Contiv-compat text errors, empty bodies, timeouts)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from contivd.ctl.client import Client, CtlError


def client(handler: Callable[[httpx.Request], httpx.Response], token: str | None = None) -> Client:
    return Client("http://contivd.test:9999/", token, transport=httpx.MockTransport(handler))


def failure(handler: Callable[[httpx.Request], httpx.Response]) -> CtlError:
    with client(handler) as c, pytest.raises(CtlError) as caught:
        c.get("/api/v1/networks/")
    return caught.value


def test_json_answers_are_decoded_and_bodies_sent_as_json() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"key": "default:n1"})

    with client(handler) as c:
        assert c.post("/api/v1/networks/default:n1/", {"subnet": "198.18.1.0/24"}) == {"key": "default:n1"}
    assert seen[0].content == b'{"subnet":"198.18.1.0/24"}' and str(seen[0].url) == "http://contivd.test:9999/api/v1/networks/default:n1/"
    assert "authorization" not in seen[0].headers


def test_token_is_sent_as_bearer() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json=[])

    with client(handler, token="s3cret") as c:
        c.get("/api/v1/tenants/")
    assert seen == ["Bearer s3cret"]


def test_server_error_message_and_status() -> None:
    error = failure(lambda r: httpx.Response(409, json={"error": "network n2 conflicts with subnet 198.18.0.0/24"}))
    assert (error.message, error.status) == ("network n2 conflicts with subnet 198.18.0.0/24", 409)


def test_contiv_compat_text_errors_are_shown_as_text() -> None:
    error = failure(lambda r: httpx.Response(500, text="network not found\n", headers={"content-type": "text/plain"}))
    assert (error.message, error.status) == ("network not found", 500)


def test_empty_error_body_names_the_status() -> None:
    assert failure(lambda r: httpx.Response(502)).message == "HTTP 502 Bad Gateway"


def test_success_that_is_not_json_is_an_error() -> None:
    assert "not JSON" in failure(lambda r: httpx.Response(200, text="<html>")).message


def test_timeouts_and_transport_errors_are_ctl_errors() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("peer closed connection", request=request)

    assert "did not answer GET /api/v1/networks/" in failure(timeout).message
    assert failure(broken).message == "GET http://contivd.test:9999/api/v1/networks/ failed: peer closed connection"

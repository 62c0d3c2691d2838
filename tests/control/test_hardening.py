"""Issue 16 item 5 against a real contivd process: security headers, body size limit (413),
the JSON nesting limit (400, not a RecursionError 500), and a slowloris of 500 half-open
connections that other clients do not notice and that the server cuts."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest

from contivd.http.hardening import HEADER_SECONDS, MAX_BODY_BYTES, MAX_JSON_DEPTH
from tests.support.contivd_nodes import ContivdProcess
from tests.support.waiting import wait_for

JSON = {"Accept": "application/json"}


@pytest.mark.parametrize("path", ["/version", "/api/v1/networks/", "/status/", "/metrics", "/no/such/route"])
def test_every_answer_carries_the_security_headers_and_no_hsts_over_clear_http(node: ContivdProcess, path: str) -> None:
    answer = httpx.get(node.url + path, headers=JSON, timeout=15)
    assert answer.headers["x-content-type-options"] == "nosniff", answer.headers
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert "strict-transport-security" not in answer.headers


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("GET", "/healthz", None), ("GET", "/version", None), ("POST", "/plugin/getEndpoint", b"{}"), ("POST", "/plugin/createEndpoint", b"{")],
)
def test_answers_say_their_length_instead_of_going_chunked(node: ContivdProcess, method: str, path: str, body: bytes | None) -> None:
    """A chunked answer costs a third socket write (the closing chunk) and client wake-up per request."""
    answer = httpx.request(method, node.url + path, content=body, headers=JSON, timeout=15)
    assert "transfer-encoding" not in answer.headers, answer.headers
    assert int(answer.headers["content-length"]) == len(answer.content) > 0


@pytest.mark.parametrize("path", ["/plugin/createEndpoint", "/api/v1/networks/default:big/"])
def test_a_body_over_the_limit_is_refused_413_before_any_write(node: ContivdProcess, path: str) -> None:
    before = node.get("/info").json()["cluster"]["revision"]
    big = b'{"x": "' + b"a" * MAX_BODY_BYTES + b'"}'
    answer = httpx.post(node.url + path, content=big, headers=JSON, timeout=30)
    assert answer.status_code == 413 and "larger than" in answer.json()["error"], answer.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(3):
            yield b"a" * (MAX_BODY_BYTES // 2)

    chunked = httpx.post(node.url + path, content=chunks(), headers=JSON, timeout=30)
    assert chunked.status_code == 413, chunked.text
    text = httpx.post(node.url + path, content=big, timeout=30)  # a netctl-style client: plain text
    assert text.status_code == 413 and text.headers["content-type"].startswith("text/plain")
    assert node.get("/info").json()["cluster"]["revision"] == before


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000, 200_000])
@pytest.mark.parametrize(
    "path", ["/plugin/createEndpoint", "/plugin/allocAddress", "/plugin/updateEndpoint", "/api/v1/Bgps/host1/", "/api/v1/networks/default:n/"]
)
def test_deeply_nested_json_is_a_400_naming_the_limit(node: ContivdProcess, path: str, depth: int) -> None:
    body = nested(depth) if depth < 100_000 else "[" * depth + "]" * depth
    answer = node.request("POST", path, content=body.encode(), timeout=30)
    assert answer.status_code == 400 and "nested deeper" in answer.json()["error"], answer.text


def test_json_at_the_nesting_limit_reaches_the_handler(node: ContivdProcess) -> None:
    answer = node.request("POST", "/plugin/allocAddress", content=nested(MAX_JSON_DEPTH - 1).encode(), timeout=30)
    assert answer.status_code == 400 and "nested deeper" not in answer.json()["error"], answer.text


def _host_port(node: ContivdProcess) -> tuple[str, int]:
    host, _, port = node.api_listen.rpartition(":")
    return host, int(port)


@contextmanager
def half_open_connections(node: ContivdProcess, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that each send part of a request and then nothing: half of them stop
    inside the head, half after a head announcing a body they never send."""
    with ExitStack() as stack:
        conns = []
        for i in range(count):
            conn = stack.enter_context(socket.create_connection(_host_port(node), timeout=30))
            if i % 2:
                conn.sendall(b"POST /plugin/createEndpoint HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            else:
                conn.sendall(b"POST /plugin/createEndpoint HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n{")
            conns.append(conn)
        yield conns


def closed_by_server(conn: socket.socket, timeout: float) -> bool:
    """Reads what the server sends until it closes (True) or `timeout` passes (False)."""
    conn.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if conn.recv(65536) == b"":
                return True
    except TimeoutError:
        return False
    except OSError:
        return True  # reset
    return False


def test_a_slowloris_of_500_half_open_connections_does_not_stop_other_clients(node: ContivdProcess) -> None:
    with half_open_connections(node, 500) as conns:
        started = time.monotonic()
        answers = []
        for _ in range(20):  # other clients, while every slow connection is still open
            answers.append(httpx.get(node.url + "/version", headers=JSON, timeout=15).status_code)
        assert answers == [200] * 20
        created = node.post("/api/v1/networks/default:slownet/", {"tenantName": "default", "networkName": "slownet", "encap": "vxlan",
                                                                   "subnet": "198.18.9.0/24", "gateway": "198.18.9.254"})  # fmt: skip
        assert created.status_code == 200, created.text
        # The server cuts them: slow heads after HEADER_SECONDS, unfinished bodies after BODY_SECONDS.
        results: list[bool] = []
        lock = threading.Lock()

        def watch(group: list[socket.socket]) -> None:
            for conn in group:
                outcome = closed_by_server(conn, max(1.0, 90 - (time.monotonic() - started)))
                with lock:
                    results.append(outcome)

        threads = [threading.Thread(target=watch, args=(conns[i::10],)) for i in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(results) and len(results) == 500, f"{results.count(False)} slow connections still open after 90 s"
        assert time.monotonic() - started >= HEADER_SECONDS * 0.9  # cut by the timeouts, not at once
    wait_for(lambda: node.get("/version").status_code == 200, 30, "the API after the slowloris")
    assert node.alive()


def test_an_unfinished_body_is_answered_408(node: ContivdProcess) -> None:
    with half_open_connections(node, 1) as (conn,):
        conn.settimeout(90)
        received = b""
        while not received.endswith(b"}\n") and b"\r\n\r\n" not in received:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
        assert received.startswith(b"HTTP/1.1 408"), received
        assert b"nosniff" in received.lower()
    assert json.loads(node.get("/version").text)["Version"]

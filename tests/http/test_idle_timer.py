"""The idle timer contivd gives hypercorn's connections behaves as hypercorn's own: a real
hypercorn server on loopback, raw sockets as clients."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import run as hypercorn_run
from hypercorn.trio import serve

from contivd.http import idle_timer

KEEP_ALIVE = 0.4  # the listener's keep_alive_timeout in these tests (contivd's HEADER_SECONDS is 10 s)
REQUEST = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"


def test_the_installed_hypercorn_takes_the_timer() -> None:
    assert idle_timer.fits() is None
    assert idle_timer.install() is True
    assert getattr(hypercorn_run, "TCPServer") is idle_timer.IdleTimedServer  # noqa: B009
    assert idle_timer.connection_server() is idle_timer.IdleTimedServer


def test_a_hypercorn_without_the_expected_shape_is_left_as_it_is() -> None:
    class Unlike:
        def __init__(self) -> None:
            self.timer = None

    assert idle_timer.fits(Unlike) == "TCPServer no longer keeps its idle timer in idle_task"


async def _app(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]) -> None:
    if scope["type"] == "lifespan":
        while True:
            if (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    await receive()
    if scope["path"] == "/slow":
        await trio.sleep(3 * KEEP_ALIVE)  # answering for longer than the idle timeout
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[tuple[int, trio.Event, trio.Event]]:
    """A hypercorn listener on an ephemeral loopback port, serving with contivd's timer; its
    shutdown trigger; set once `serve` has returned."""
    assert idle_timer.install()
    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.keep_alive_timeout = KEEP_ALIVE
    config.graceful_timeout = 5
    config.accesslog = None
    stop, served = trio.Event(), trio.Event()

    async def serving(task_status: trio.TaskStatus[list[str]]) -> None:
        try:
            await serve(_app, config, shutdown_trigger=stop.wait, task_status=task_status)
        finally:
            served.set()

    binds = await nursery.start(serving)
    yield int(binds[0].rsplit(":", 1)[1]), stop, served
    stop.set()


async def _connect(port: int) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", port)


async def _answer(stream: trio.SocketStream) -> bytes:
    data = b""
    while not data.endswith(b"ok"):
        chunk = await stream.receive_some(4096)
        assert chunk, f"connection closed before the answer: {data!r}"
        data += chunk
    return data


async def _closed_after(stream: trio.SocketStream) -> float:
    """Seconds until the server closes `stream` (reads until EOF, at most 5 s)."""
    started = trio.current_time()
    with trio.fail_after(5):
        while await stream.receive_some(4096):
            pass
    return trio.current_time() - started


async def test_a_kept_alive_connection_is_closed_once_idle_for_the_timeout(server: tuple[int, trio.Event, trio.Event]) -> None:
    port, _, _ = server
    stream = await _connect(port)
    for _ in range(3):  # the timer stops and restarts around every request
        await stream.send_all(REQUEST)
        assert (await _answer(stream)).startswith(b"HTTP/1.1 200")
    waited = await _closed_after(stream)
    assert KEEP_ALIVE * 0.8 <= waited < KEEP_ALIVE + 2


async def test_a_request_head_that_never_completes_is_cut_at_the_timeout(server: tuple[int, trio.Event, trio.Event]) -> None:
    port, _, _ = server
    stream = await _connect(port)
    await stream.send_all(b"GET /x HTTP/1.1\r\nHost: t\r\n")  # no blank line: the head never ends
    waited = await _closed_after(stream)
    assert KEEP_ALIVE * 0.8 <= waited < KEEP_ALIVE + 2


async def test_a_request_answered_for_longer_than_the_timeout_is_not_cut(server: tuple[int, trio.Event, trio.Event]) -> None:
    port, _, _ = server
    stream = await _connect(port)
    await stream.send_all(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
    with trio.fail_after(5):
        assert (await _answer(stream)).startswith(b"HTTP/1.1 200")
    await stream.send_all(REQUEST)  # and the connection is still usable
    assert (await _answer(stream)).startswith(b"HTTP/1.1 200")


async def test_shutdown_closes_idle_connections_at_once_and_lets_a_request_finish(server: tuple[int, trio.Event, trio.Event]) -> None:
    port, stop, served = server
    idle = await _connect(port)
    await idle.send_all(REQUEST)
    await _answer(idle)
    busy = await _connect(port)
    await busy.send_all(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
    await trio.sleep(0.1)  # the slow request is being answered
    stop.set()
    assert await _closed_after(idle) < KEEP_ALIVE  # not left to its timeout
    with trio.fail_after(5):
        assert (await _answer(busy)).startswith(b"HTTP/1.1 200")
    assert await _closed_after(busy) < 2  # closed once answered
    with trio.fail_after(2):  # and the server is done with it: not held until graceful_timeout (5 s)
        await served.wait()


def test_the_timer_moves_a_deadline_instead_of_starting_tasks() -> None:
    """restart/stop change the deadline of the one watching task (no task per request)."""

    async def scenario() -> None:
        class Group:
            spawned = 0

            def spawn(self, func: Callable[[], Awaitable[None]]) -> None:
                Group.spawned += 1
                nursery.start_soon(func)

        closed = trio.Event()

        async def close() -> None:
            closed.set()

        terminated = trio.Event()
        timer = idle_timer.DeadlineIdleTimer(KEEP_ALIVE, terminated, close)
        async with trio.open_nursery() as nursery:
            group = Group()
            for _ in range(50):
                await timer.restart(group, close)
                await timer.stop()
            assert timer._deadline == math.inf
            await timer.restart(group, close)
            with trio.fail_after(KEEP_ALIVE + 2):
                await closed.wait()
        assert Group.spawned == 1

    trio.run(scenario)

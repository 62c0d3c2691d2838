"""Hypercorn's per-connection idle timer, one task per connection instead of one per request.

Hypercorn's trio server (`TCPServer`) stops a connection's idle timer once a request head has
arrived and restarts it once the answer is sent, and its timer (`TrioSingleTask`) does each by
cancelling a task and starting a new one under a lock: two lock checkpoints, a task start and a
task exit per request, ~8 % of a sequential createEndpoint's CPU. `DeadlineIdleTimer` keeps one
task per connection and moves its cancel scope's deadline instead, which wakes nobody.

Behaviour is hypercorn's: a connection idle for `keep_alive_timeout` is closed (a request head
that has not fully arrived counts as idle: that is how HEADER_SECONDS cuts slow heads), an idle
connection is closed when the server shuts down, and a request being answered is never cut by it
(shutting down, its connection closes once the answer is sent).

Hypercorn offers no hook for its timer, so `install()` replaces the server class its `serve`
uses with a subclass that swaps in this timer, after checking that the installed hypercorn still
has the shape this relies on; otherwise it leaves hypercorn as it is (slower, same behaviour) and
says so in the log.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.events import Closed, Event
from hypercorn.trio import run as hypercorn_run
from hypercorn.trio import task_group, tcp_server

log = logging.getLogger(__name__)


class DeadlineIdleTimer:
    """The `SingleTask` hypercorn's server drives (`restart` when idle, `stop` when busy)."""

    def __init__(self, timeout: float, terminated: Any, close: Callable[[], Awaitable[None]]):
        self._timeout = timeout
        self._terminated = terminated  # hypercorn's WorkerContext.terminated: set when the server shuts down
        self._close = close
        self._deadline = math.inf
        self._idle = False
        self._scope: trio.CancelScope | None = None
        self._resumed: trio.Event | None = None
        self._watching = False
        self._closed = False

    async def restart(self, task_group: Any, action: Callable[[], Awaitable[None]]) -> None:
        """Idle from now: closed after the timeout (`action`, hypercorn's own close, is the same
        close this timer makes)."""
        self._idle = True
        self._set_deadline(trio.current_time() + self._timeout)
        if not self._watching:
            self._watching = True
            task_group.spawn(self._watch)
        elif self._resumed is not None:
            self._resumed.set()

    async def stop(self) -> None:
        """Busy answering a request: no timeout until the next restart."""
        self._idle = False
        self._set_deadline(math.inf)

    def closed(self) -> None:
        """The connection is closed (hypercorn's own close, e.g. after the last answer of a
        shutdown): the watch ends without closing it again, as hypercorn's timer task did."""
        self._closed = True
        self._set_deadline(-math.inf)
        if self._resumed is not None:
            self._resumed.set()

    def _set_deadline(self, deadline: float) -> None:
        self._deadline = deadline
        if self._scope is not None:
            self._scope.deadline = deadline

    async def _watch(self) -> None:
        while True:
            with trio.CancelScope(deadline=self._deadline) as self._scope:
                await self._terminated.wait()
            self._scope = None
            if self._closed:
                return
            if self._idle:  # the deadline passed (it is finite only while idle), or a shutdown found it idle
                break
            self._resumed = trio.Event()  # a shutdown while a request is answered: close once it is
            await self._resumed.wait()
            self._resumed = None
        with trio.CancelScope(shield=True):
            await self._close()


class IdleTimedServer(tcp_server.TCPServer):
    """Hypercorn's per-connection server with `DeadlineIdleTimer` as its idle timer."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._timer = DeadlineIdleTimer(self.config.keep_alive_timeout, self.context.terminated, self._initiate_server_close)
        self.idle_task = self._timer  # type: ignore[assignment]  # typed as hypercorn's own timer; this one has its interface

    async def protocol_send(self, event: Event) -> None:
        await super().protocol_send(event)
        if isinstance(event, Closed):
            self._timer.closed()


def _served_by() -> Any:
    """The per-connection server class hypercorn's `serve` uses."""
    return getattr(hypercorn_run, "TCPServer", None)


def fits(server_class: type = tcp_server.TCPServer) -> str | None:
    """Why the installed hypercorn cannot take the timer (None: it can)."""
    init_names = vars(server_class)["__init__"].__code__.co_names
    if "idle_task" not in init_names or "TrioSingleTask" not in init_names:
        return "TCPServer no longer keeps its idle timer in idle_task"
    for name in ("_initiate_server_close", "_idle_timeout", "protocol_send"):
        if not callable(getattr(server_class, name, None)):
            return f"TCPServer has no {name}"
    if not callable(getattr(task_group.TaskGroup, "spawn", None)):
        return "hypercorn's TaskGroup has no spawn"
    if _served_by() not in (server_class, IdleTimedServer):
        return "hypercorn.trio.run no longer serves connections with TCPServer"
    return None


def install() -> bool:
    """Make hypercorn's `serve` use IdleTimedServer; False (and a log line) if it cannot."""
    if _served_by() is IdleTimedServer:
        return True
    problem = fits()
    if problem is not None:
        log.info("hypercorn's idle timer kept as it is (%s): each request costs a little more CPU", problem)
        return False
    setattr(hypercorn_run, "TCPServer", IdleTimedServer)  # noqa: B010 (not re-exported there, so not typed)
    return True


def connection_server() -> type[tcp_server.TCPServer]:
    """The per-connection server for a listener contivd accepts itself (the root-only sockets)."""
    return IdleTimedServer if install() else tcp_server.TCPServer

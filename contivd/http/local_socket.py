"""Root-only unix sockets: the API and the agent API for root on this node, without a token.

Local administration goes through a unix socket in a root-only directory (as containerd's and
Docker's do) because a loopback TCP port is open to every local user, a hostNetwork pod and any
compromised daemon alike. The kernel vouches for the caller: every accepted connection's
SO_PEERCRED uid travels in the request's scope as its peer (`unix_peer`), and a caller that is
not root is cut before it sends a byte (the directory's 0700 already keeps it out; this holds
even if an operator loosens the permissions).

Hypercorn's `serve` hands the application no socket, so connections accepted here are given to
its per-connection server directly; the HTTP handling is hypercorn's, unchanged.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import cast

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ASGIFramework, ASGIReceiveCallable, ASGISendCallable, ConnectionState, Scope

from .idle_timer import connection_server

log = logging.getLogger(__name__)

UNIX_PEER_PREFIX = "unix-uid:"  # a unix-socket caller's "address" in the ASGI scope: never a TCP peer's (those are IPs)
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class SocketInUseError(Exception):
    """Another process answers on the socket's path, or the path is not a socket."""


@dataclass(frozen=True)
class PeerCredentials:
    pid: int
    uid: int
    gid: int


def unix_peer(uid: int) -> str:
    """The scope's client address of a unix-socket caller whose uid the kernel reported."""
    return f"{UNIX_PEER_PREFIX}{uid}"


def peer_uid(remote: str | None) -> int | None:
    """The uid of a unix-socket caller from its scope address; None for TCP callers."""
    if remote is None or not remote.startswith(UNIX_PEER_PREFIX):
        return None
    try:
        return int(remote[len(UNIX_PEER_PREFIX) :])
    except ValueError:
        return None


def peer_credentials(sock: socket.socket | trio.socket.SocketType) -> PeerCredentials:
    """Who is at the other end of a connected unix socket, as the kernel saw it at connect()."""
    pid, uid, gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return PeerCredentials(pid, uid, gid)


def bind_socket(path: Path, flag: str) -> socket.socket:
    """A listening unix socket at `path` (0600, parent 0700); replaces a stale socket file,
    refuses a live one or anything that is not a socket (`flag` names the setting to change)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise SocketInUseError(f"{path} exists and is not a socket; remove it or choose another {flag}")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()  # nobody listens: a stale socket from a previous run
        else:
            raise SocketInUseError(f"{path} is served by another process (a running contivd?)")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def remove_socket(path: Path, inode: int) -> None:
    """Remove the socket file this process bound (inode `inode`), not a successor's."""
    try:
        if os.stat(path).st_ino == inode:
            path.unlink()
    except FileNotFoundError:
        pass


class _WithPeer:
    """The application as one connection's caller sees it: its scope's client is the caller's uid."""

    def __init__(self, app: ASGIFramework, uid: int):
        self.app = app
        self.client = (unix_peer(uid), 0)

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = cast(Scope, {**scope, "client": self.client})
        await self.app(scope, receive, send)


async def serve_unix(
    app: ASGIFramework,
    config: HypercornConfig,
    path: Path,
    flag: str,
    *,
    shutdown_trigger: Callable[[], Awaitable[None]],
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` to root on a unix socket at `path` until `shutdown_trigger` returns; in-flight
    requests then get `config.graceful_timeout` to finish. The application's lifespan is not run
    here (the TCP listener serving the same application runs it)."""
    sock = bind_socket(path, flag)
    inode = os.stat(path).st_ino
    context = WorkerContext(None)
    server = connection_server()
    try:
        async with trio.open_nursery() as connections:

            async def serve_connection(stream: trio.SocketStream) -> None:
                caller = peer_credentials(stream.socket)
                if caller.uid != 0:
                    log.warning("refused a connection on %s from uid %d (pid %d): root only", path, caller.uid, caller.pid)
                    await stream.aclose()
                    return
                await server(ASGIWrapper(_WithPeer(app, caller.uid)), config, context, ConnectionState({}), stream)  # type: ignore[arg-type]

            listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
            async with trio.open_nursery() as acceptor:
                acceptor.start_soon(partial(trio.serve_listeners, serve_connection, [listener], handler_nursery=connections))
                task_status.started()
                await shutdown_trigger()
                acceptor.cancel_scope.cancel()
            await context.terminated.set()
            connections.cancel_scope.deadline = trio.current_time() + config.graceful_timeout
    finally:
        sock.close()
        remove_socket(path, inode)


async def hold_socket(path: Path, flag: str, *, task_status: trio.TaskStatus[socket.socket] = trio.TASK_STATUS_IGNORED) -> None:
    """A root-only listening socket for a server that is not HTTP (the OpenFlow controller, which
    serves what `nursery.start` hands it); its file stays until this task is cancelled."""
    sock = bind_socket(path, flag)
    inode = os.stat(path).st_ino
    try:
        task_status.started(sock)
        await trio.sleep_forever()
    finally:
        sock.close()
        remove_socket(path, inode)

"""A pooled keep-alive HTTP/1.1 client (h11 over trio sockets) for leader forwarding.

Every write a follower receives is forwarded to the leader. httpx spent ~1.4 ms of CPU per
forwarded request here, more than serving the request; this client costs ~0.1 ms. It speaks
only what forwarding needs: one request per connection at a time, Content-Length bodies,
idle connections kept per leader URL and dropped when a send finds them closed. `https://`
URLs are called over TLS with the given context (the cluster CA's: the peer's certificate must
chain to it and name the address called); keep-alive makes the handshake a once-per-connection cost.
A base URL `unix:/path` is a local unix socket: the node's own agent socket, or its API socket
(benchmarks compare it with TCP using this same client).
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import h11
import trio

Answer = tuple[int, dict[str, str], bytes]


class _Connection:
    def __init__(self, stream: trio.abc.Stream):
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)

    async def exchange(self, method: str, target: str, host: str, headers: dict[str, str], body: bytes) -> Answer:
        fields = [("Host", host), ("Content-Length", str(len(body)))] + list(headers.items())
        data = self.h11.send(h11.Request(method=method, target=target, headers=fields))
        data += self.h11.send(h11.Data(data=body)) if body else b""
        data += self.h11.send(h11.EndOfMessage())
        await self.stream.send_all(data)
        status, answer_headers, chunks = 0, {}, []
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(bytes(await self.stream.receive_some(65536)))
            elif isinstance(event, h11.Response):
                status = event.status_code
                answer_headers = {k.decode().lower(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self.h11.start_next_cycle()
                return status, answer_headers, b"".join(chunks)
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the peer closed the connection")


class ForwardingClient:
    """Keep-alive connections per base URL; `request` raises OSError/TimeoutError on failure.

    `timeout` bounds a whole exchange; `connect_timeout` a new connection alone, so a peer that
    is cut off (its SYNs dropped) fails in about a second, not after the whole timeout.
    `ssl_context` verifies `https://` peers (the cluster CA's)."""

    def __init__(self, timeout: float, connect_timeout: float = 1.0, ssl_context: ssl.SSLContext | None = None):
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.ssl_context = ssl_context
        self._idle: dict[str, list[_Connection]] = {}

    async def _open(self, scheme: str, host: str, port: int) -> _Connection:
        """A new connection, TLS-wrapped and verified for `https`; `unix` connects to the socket `host`."""
        stream = await self._connect(host, port) if scheme != "unix" else await trio.open_unix_socket(host)
        if scheme != "https":
            return _Connection(stream)
        if self.ssl_context is None:
            await stream.aclose()
            raise ConnectionError(f"https://{host}:{port}: this node has no TLS context to verify it with")
        tls = trio.SSLStream(stream, self.ssl_context, server_hostname=host)
        try:
            await tls.do_handshake()
        except trio.BrokenResourceError as exc:  # the certificate did not verify, or the peer speaks no TLS
            await tls.aclose()
            raise ConnectionError(f"TLS with https://{host}:{port} failed: {exc.__cause__ or exc}") from None
        return _Connection(tls)

    async def request(self, method: str, base_url: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        parts = urlsplit(base_url)
        if parts.scheme == "unix":
            host, port = parts.path, 0
        else:
            host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
        idle = self._idle.setdefault(base_url, [])
        with trio.fail_after(self.timeout):
            for attempt in range(2):  # an idle connection may have been closed by the server
                reused = bool(idle) and attempt == 0
                conn = idle.pop() if reused else await self._open(parts.scheme, host, port)
                try:
                    answer = await conn.exchange(method, target, "localhost" if parts.scheme == "unix" else f"{host}:{port}", headers, body)
                except (OSError, ConnectionError, h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
                    await conn.stream.aclose()
                    if reused:
                        continue
                    raise ConnectionError(f"{base_url} did not answer") from None
                if conn.h11.our_state is h11.IDLE:
                    idle.append(conn)
                else:
                    await conn.stream.aclose()
                return answer
        raise AssertionError("unreachable")

    async def _connect(self, host: str, port: int) -> trio.SocketStream:
        with trio.move_on_after(self.connect_timeout):
            return await trio.open_tcp_stream(host, port)
        raise ConnectionError(f"no connection to {host}:{port} within {self.connect_timeout:g}s")

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for conn in connections:
                await conn.stream.aclose()
        self._idle.clear()

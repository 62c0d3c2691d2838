"""raftstore's message path: a PySyncObj `Transport` speaking the `_wire` format over TCP.

It replaces PySyncObj's TCPTransport/TcpConnection (pickle, zlib on every message, the
Fernet-or-nothing encryptor) and runs wherever the node ticks, always under the node's tick
lock (`_node.py`): its sockets sit in the node's `EpollPoller`, so a peer's frame wakes
whoever drives the node (the trio loop while it leads, else the node's thread), and a
message is encoded, sealed and written by the code that produced it, with no queue or
thread between. It owns connections, handshakes and reconnects; what messages mean is
PySyncObj's business, and the bytes format is `_wire`'s.

Who connects: as in PySyncObj, a read-only member connects to every voter, and of two
voters the one with the greater address connects, so each pair has one connection.
Handshake: both ends send a hello (format versions, nonce); the connecting end then sends a
sealed `hello_ident` (its address, or None when read-only), the accepting end answers a
sealed `hello_welcome`; only then does either end tell PySyncObj the node is connected. A
peer that fails any step (wrong secret, garbage, a hello with no common version, silence
for `connectionTimeout`) is dropped without a callback and logged.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from pysyncobj.node import Node, TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.transport import Transport, TransportNotReadyError

from ._poller import EpollPoller
from ._wire import CURRENT_VERSION, FOLLOWER_MESSAGES, Channel, Sealer, WireError

log = logging.getLogger("raftstore.transport")

MessageHandler = Callable[[Node, dict[str, Any]], None]
# (socket, its channel after the follower's hello_follower, that message, bytes not yet sent):
# a follower of the store's connection, authenticated, handed over to the voter's feed.
FollowerHandler = Callable[[socket.socket, Channel, dict[str, Any], bytes], None]
_RECV_BYTES = 256 * 1024
_READ = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR
_SOCKET_BUFFER_BYTES = 4 * 1024 * 1024
DROP_LOG_SECONDS = 10.0


class _DropLog:
    """At most one warning per kind of dropped peer every DROP_LOG_SECONDS: a peer redialling
    twice a second with a wrong secret, or a local process probing the port, must not fill the
    log. The next warning of a kind says how many it stands for."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._last: dict[str, float] = {}
        self._quiet: dict[str, int] = {}

    def warn(self, kind: str, message: str, *args: object) -> None:
        now = self._clock()
        if now - self._last.get(kind, -DROP_LOG_SECONDS) < DROP_LOG_SECONDS:
            self._quiet[kind] = self._quiet.get(kind, 0) + 1
            return
        self._last[kind] = now
        quiet = self._quiet.pop(kind, 0)
        suffix = f" ({quiet} more like it in the last {DROP_LOG_SECONDS:g} s not logged)" if quiet else ""
        log.warning(message + suffix, *args)


class _Connection:
    """One TCP connection and its wire channel; `node` is set once the handshake is done."""

    def __init__(self, sock: socket.socket, channel: Channel, outgoing: bool, expected: Node | None):
        self.sock = sock
        self.fileno = sock.fileno()
        self.channel = channel
        self.outgoing = outgoing
        self.expected = expected  # the node an outgoing connection dials
        self.node: Node | None = None
        self.connecting = outgoing  # a non-blocking connect() not yet completed
        self.ident_sent = False
        self.out = bytearray()
        self.opened = self.last_read = time.monotonic()
        self.closed = False


class FramedTransport(Transport):  # type: ignore[misc]  # pysyncobj is untyped
    """PySyncObj transport over `_wire` frames (see the module docstring).

    `poller` holds the sockets (whoever waits on it drives the node); `before_send(message)`
    runs before any message is written (the durability flush); `newest_version` is the newest
    wire format this member speaks (tests and rolling upgrades pin an older one)."""

    def __init__(
        self,
        syncObj: Any,
        selfNode: TCPNode | None,
        otherNodes: Any,
        *,
        poller: EpollPoller,
        sealer: Sealer | None,
        newest_version: int = CURRENT_VERSION,
        before_send: Callable[[dict[str, Any]], None] = lambda message: None,
    ):
        super().__init__(syncObj, selfNode, otherNodes)
        Channel(sealer, newest_version)  # refuse an unknown version now, not on the first connection
        self._syncobj = syncObj
        self._poller = poller
        self._conf = syncObj.conf
        self._sealer = sealer
        self._newest = newest_version
        self.before_send = before_send
        self.follower_handler: FollowerHandler | None = None  # set by the Store that feeds followers
        self._self_node = selfNode
        self._nodes: set[TCPNode] = set()
        self._by_address: dict[str, TCPNode] = {}
        self._readonly: set[Node] = set()
        self._readonly_counter = 0
        self._links: dict[Node, _Connection] = {}  # handshake done
        self._pending: set[_Connection] = set()  # handshake under way
        self._last_attempt: dict[TCPNode, float] = {}
        self._down_since: dict[str, float] = {}  # voter address → wall-clock time its link went down (or we started)
        self._drops = _DropLog()
        self._server: socket.socket | None = None
        self._bind_attempts = 0
        self._last_bind = 0.0
        self._bind_over = threading.Event()
        self._ready = selfNode is None
        if self._ready:
            self._bind_over.set()
        syncObj.addOnTickCallback(self._on_tick)
        for node in otherNodes:
            self.addNode(node)

    # ---- PySyncObj's Transport interface ---------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._ready

    def tryGetReady(self) -> None:
        self._maybe_bind()

    def waitReady(self) -> None:
        self._bind_over.wait()
        if not self._ready:
            raise TransportNotReadyError

    def addNode(self, node: TCPNode) -> None:
        self._nodes.add(node)
        self._by_address[node.address] = node
        if node not in self._links:
            self._down_since.setdefault(node.address, time.time())

    def dropNode(self, node: Node) -> None:
        connection = self._links.pop(node, None)
        if connection is not None:
            self._close(connection)
        for pending in [c for c in self._pending if c.expected == node]:
            self._close(pending)
        if isinstance(node, TCPNode):
            self._nodes.discard(node)
            self._by_address.pop(node.address, None)
            self._down_since.pop(node.address, None)
        self._readonly.discard(node)
        self._last_attempt.pop(node, None)

    def send(self, node: Node, message: dict[str, Any]) -> bool:
        connection = self._links.get(node)
        if connection is None or connection.closed:
            return False
        self.before_send(message)
        try:
            self._write(connection, connection.channel.frame(message))
        except WireError:
            log.exception("cannot encode a raft message for %s", node)
            return False
        return not connection.closed

    def wrap_message_handler(self, wrap: Callable[[MessageHandler], MessageHandler]) -> None:
        """Put `wrap(handler)` in place of the handler PySyncObj (or an earlier wrapper) set."""
        self.setOnMessageReceivedCallback(wrap(self._onMessageReceivedCallback))

    def destroy(self) -> None:
        self.setOnMessageReceivedCallback(None)
        self.setOnNodeConnectedCallback(None)
        self.setOnNodeDisconnectedCallback(None)
        self.setOnReadonlyNodeConnectedCallback(None)
        self.setOnReadonlyNodeDisconnectedCallback(None)
        for connection in [*self._links.values(), *self._pending]:
            self._close(connection)
        self._links.clear()
        self._pending.clear()
        if self._server is not None:
            self._poller.unsubscribe(self._server.fileno())
            self._server.close()
            self._server = None

    # ---- binding and dialling (under the tick lock) ------------------------------------------------

    def _maybe_bind(self) -> None:
        if self._ready or self._self_node is None or time.monotonic() < self._last_bind + self._conf.bindRetryTime:
            return
        self._last_bind = time.monotonic()
        host, port = self._self_node.address.rsplit(":", 1)
        try:
            server = socket.create_server((self._self_node.ip or host, int(port)), backlog=16)
        except OSError as exc:
            self._bind_attempts += 1
            log.warning("cannot bind raft address %s: %s", self._self_node.address, exc)
            if self._conf.maxBindRetries and self._bind_attempts >= self._conf.maxBindRetries:
                self._bind_over.set()
                raise TransportNotReadyError from None
            return
        server.setblocking(False)
        self._server = server
        self._poller.subscribe(server.fileno(), self._on_accept, _READ)
        self._ready = True
        self._bind_over.set()

    def _on_tick(self) -> None:
        try:
            self._maybe_bind()
        except TransportNotReadyError:
            pass
        now = time.monotonic()
        for connection in [c for c in self._pending if now - c.opened > self._conf.connectionTimeout]:
            self._drops.warn("silent", "raft peer %s: no handshake within %.1f s, dropped", self._describe(connection), self._conf.connectionTimeout)
            self._drop(connection)
        for node in self._nodes:
            self._dial_if_needed(node, now)

    def _should_dial(self, node: TCPNode) -> bool:
        return self._self_node is None or self._self_node.address > node.address

    def _dial_if_needed(self, node: TCPNode, now: float) -> None:
        if node in self._links or not self._should_dial(node) or any(c.expected == node for c in self._pending):
            return
        if now - self._last_attempt.get(node, -1e9) < self._conf.connectionRetryTime:
            return
        self._last_attempt[node] = now
        try:
            sock = socket.socket(socket.AF_INET6 if ":" in (node.ip or "") else socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            return
        self._tune(sock)
        try:
            sock.connect((node.ip, node.port))
        except BlockingIOError:
            pass
        except OSError:
            sock.close()
            return
        self._track(_Connection(sock, Channel(self._sealer, self._newest), outgoing=True, expected=node))

    def _on_accept(self, descr: int, event: int) -> None:
        if self._server is None:
            return
        while True:
            try:
                sock, _ = self._server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("raft listener: accept failed: %s", exc)
                return
            self._tune(sock)
            connection = _Connection(sock, Channel(self._sealer, self._newest), outgoing=False, expected=None)
            self._track(connection)
            self._write(connection, connection.channel.hello())

    def _tune(self, sock: socket.socket) -> None:
        """Non-blocking, no Nagle delay, and dead peers noticed by the kernel: bytes left
        unacknowledged for `connectionTimeout` (a partition, a powered-off host) and idle
        links that fail PySyncObj's keepalive probes raise an error event, so PySyncObj hears
        of the disconnect without this transport dropping idle but healthy links."""
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER_BYTES)
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(self._conf.connectionTimeout * 1000))
        if self._conf.tcp_keepalive is not None and hasattr(socket, "TCP_KEEPIDLE"):
            idle, interval, count = self._conf.tcp_keepalive
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, count)

    def _track(self, connection: _Connection) -> None:
        self._pending.add(connection)
        mask = _READ | (POLL_EVENT_TYPE.WRITE if connection.connecting else 0)
        self._poller.subscribe(connection.fileno, functools.partial(self._on_event, connection), mask)

    # ---- I/O (under the tick lock) -----------------------------------------------------------------

    def _on_event(self, connection: _Connection, descr: int, event: int) -> None:
        if connection.closed:
            return
        if event & POLL_EVENT_TYPE.ERROR:
            self._drop(connection)
            return
        if connection.connecting:
            if connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self._drop(connection)
                return
            connection.connecting = False
            connection.last_read = time.monotonic()
            self._write(connection, connection.channel.hello())
            if connection.closed:
                return
        if event & POLL_EVENT_TYPE.WRITE:
            self._flush_out(connection)
        if event & POLL_EVENT_TYPE.READ and not connection.closed:
            self._read(connection)

    def _read(self, connection: _Connection) -> None:
        chunks = []
        while True:
            try:
                data = connection.sock.recv(_RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._drop(connection)
                return
            if not data:
                self._drop(connection)
                return
            chunks.append(data)
            if len(data) < _RECV_BYTES:
                break
        connection.last_read = time.monotonic()
        try:
            messages = connection.channel.feed(b"".join(chunks))
        except WireError as exc:
            self._drops.warn("wire", "raft peer %s dropped: %s", self._describe(connection), exc)
            self._drop(connection)
            return
        if connection.outgoing and not connection.ident_sent and connection.channel.negotiated is not None:
            connection.ident_sent = True
            self._write(
                connection, connection.channel.frame({"type": "hello_ident", "node": None if self._self_node is None else self._self_node.address})
            )
        for message in messages:
            if connection.closed:
                return
            if connection.node is None:
                self._handshake(connection, message)
            elif message["type"] in FOLLOWER_MESSAGES:
                self._drops.warn("handshake", "raft peer %s: %s on a raft link, dropped", self._describe(connection), message["type"])
                self._drop(connection)
            else:
                self._onMessageReceived(connection.node, message)

    def _handshake(self, connection: _Connection, message: dict[str, Any]) -> None:
        if connection.outgoing and message["type"] == "hello_welcome":
            self._established(connection, connection.expected)
        elif not connection.outgoing and message["type"] == "hello_ident":
            address = message.get("node")
            node: Node | None
            if address is None:
                node = Node(f"readonly-{self._readonly_counter}")
                self._readonly_counter += 1
                self._readonly.add(node)
            elif isinstance(address, str) and address in self._by_address:
                node = self._by_address[address]
            else:
                self._drops.warn("stranger", "raft peer %s: not a member (%r), dropped", self._describe(connection), address)
                self._drop(connection)
                return
            self._write(connection, connection.channel.frame({"type": "hello_welcome"}))
            if not connection.closed:
                self._established(connection, node)
        elif not connection.outgoing and message["type"] == "hello_follower" and self.follower_handler is not None:
            self._hand_over(connection, message, self.follower_handler)
        else:
            self._drops.warn("handshake", "raft peer %s: %s during the handshake, dropped", self._describe(connection), message["type"])
            self._drop(connection)

    def _hand_over(self, connection: _Connection, message: dict[str, Any], handler: FollowerHandler) -> None:
        """A follower of the store authenticated itself (its hello_follower opened under the
        cluster key): its socket and channel leave this transport, PySyncObj never hears of it.
        It sends nothing more before the feed's welcome, so no message of it is left here."""
        connection.closed = True
        self._pending.discard(connection)
        self._poller.unsubscribe(connection.fileno)
        handler(connection.sock, connection.channel, message, bytes(connection.out))

    def _established(self, connection: _Connection, node: Node | None) -> None:
        self._pending.discard(connection)
        if node is None:
            self._drop(connection)
            return
        previous = self._links.get(node)
        if previous is not None:  # the peer restarted and reconnected: the old socket is stale
            self._close(previous)
        connection.node = node
        self._links[node] = connection
        log.info("raft peer %s connected (wire format %d)", node, connection.channel.negotiated.version if connection.channel.negotiated else 0)
        if node in self._readonly:
            self._onReadonlyNodeConnected(node)
        else:
            if isinstance(node, TCPNode):
                self._down_since.pop(node.address, None)
            self._onNodeConnected(node)

    def _write(self, connection: _Connection, frame: bytes) -> None:
        if connection.closed:
            return
        if not connection.out:
            try:
                sent = connection.sock.send(frame)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._drop(connection)
                return
            if sent == len(frame):
                return
            frame = frame[sent:]
            connection.out += frame
            self._poller.subscribe(connection.fileno, functools.partial(self._on_event, connection), _READ | POLL_EVENT_TYPE.WRITE)
        else:
            connection.out += frame
        if time.monotonic() - connection.last_read > self._conf.connectionTimeout:
            # Bytes pile up and nothing was read for that long: the peer is stuck (a stopped
            # process still lets its kernel acknowledge). Bounds the buffer, like PySyncObj.
            self._drop(connection)

    def _flush_out(self, connection: _Connection) -> None:
        while connection.out:
            try:
                sent = connection.sock.send(connection.out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._drop(connection)
                return
            del connection.out[:sent]
        self._poller.subscribe(connection.fileno, functools.partial(self._on_event, connection), _READ)

    # ---- closing ---------------------------------------------------------------------------

    def _close(self, connection: _Connection) -> None:
        """Close without telling PySyncObj (dropNode, destroy, a replaced connection)."""
        if connection.closed:
            return
        connection.closed = True
        self._pending.discard(connection)
        self._poller.unsubscribe(connection.fileno)
        connection.sock.close()

    def _drop(self, connection: _Connection) -> None:
        """Close a failed connection and tell PySyncObj if it had been connected."""
        was_closed = connection.closed
        self._close(connection)
        node = connection.node
        if was_closed or node is None or self._links.get(node) is not connection:
            return
        del self._links[node]
        if node in self._readonly:
            self._readonly.discard(node)
            self._onReadonlyNodeDisconnected(node)
        else:
            self._onNodeDisconnected(node)
            if isinstance(node, TCPNode):
                self._down_since.setdefault(node.address, time.time())
                self._dial_if_needed(node, time.monotonic())

    def _describe(self, connection: _Connection) -> str:
        if connection.expected is not None:
            return str(connection.expected)
        try:
            host, port = connection.sock.getpeername()[:2]
            return f"{host}:{port}"
        except OSError:
            return "(closed)"

    def connected_versions(self) -> tuple[tuple[str, int], ...]:
        """(peer, wire format in use) per connected peer; safe to call from any thread."""
        links = list(self._links.items())  # a copy: a tick on another thread may change the dict
        return tuple(sorted((str(node), c.channel.negotiated.version) for node, c in links if c.channel.negotiated))

    def down_since(self) -> dict[str, float]:
        """Voter address → wall-clock time since which no link to it is up; any thread."""
        return self._down_since.copy()  # one C-level copy: a tick on another thread may change the dict

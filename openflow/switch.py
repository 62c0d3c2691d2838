"""Trio shell of the OpenFlow 1.3 controller channel: the listener OVS bridges connect to.

:class:`Controller` owns one listener, the ``target`` its bridges are given
(``ovs-vsctl set-controller BR unix:PATH``, or ``tcp:HOST:PORT``): a unix
socket its owner has bound (a root-only one, so that no other local process
can connect as the switch), else a TCP port it opens.  Per accepted connection, one
:class:`SwitchConnection` wrapping a sans-IO :class:`openflow._ofp.Session`.
Several bridges (datapath ids) share one listener.  The agent learns about
switches through :meth:`Controller.subscribe` (a :class:`SwitchConnected`
for every connect *and* reconnect, so it reconciles each time) and talks to
one through :meth:`Controller.wait_connected`.

Every task lives in :meth:`Controller.run`'s nursery; cancelling it closes
the listener and all connections.  A connection that fails (EOF, liveness
timeout, protocol or version error) is closed, its waiting requests get
:class:`ConnectionClosed`, and subscribers get :class:`SwitchDisconnected`;
the switch reconnecting is the recovery path, so nothing here retries.

Not responsible for what to install (the renderer) nor for OVSDB.
"""

from __future__ import annotations

import logging
import math
import socket
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

import trio

from fastpath import Messages
from openflow._ofp import (
    ConnectionClosed,
    Event,
    FlowRecord,
    OpenFlowError,
    PacketIn,
    Ready,
    RequestDone,
    RequestFailed,
    Session,
    SessionStatistics,
    flow_records,
)

log = logging.getLogger(__name__)
_PARSE_IN_THREAD_BYTES = 64 * 1024  # about 300 flows

_RECEIVE_SIZE = 256 * 1024  # bytes per read: a large flow dump arrives in few reads
_FAREWELL_TIMEOUT_S = 1.0  # how long a failing connection may take to send its last error


@dataclass(frozen=True, slots=True)
class SwitchConnected:
    """A datapath finished the handshake (first connect or reconnect): reconcile it."""

    connection: SwitchConnection

    @property
    def datapath_id(self) -> int:
        return self.connection.datapath_id


@dataclass(frozen=True, slots=True)
class SwitchDisconnected:
    """A datapath's connection ended; ``reason`` says why (EOF, timeout, error)."""

    datapath_id: int
    reason: str


SwitchEvent = SwitchConnected | SwitchDisconnected


@dataclass(frozen=True, slots=True)
class ControllerStatistics:
    """What the status page shows about the OpenFlow channel."""

    address: str  # the target bridges connect to: unix:PATH or tcp:HOST:PORT
    port: int
    connected: tuple[int, ...]
    """Datapath ids with a live, handshaken connection."""
    connections_accepted: int
    handshake_failures: int
    packet_ins_dropped: int
    last_failure: str | None
    switches: tuple[SessionStatistics, ...]


class _Waiter:
    """One request's rendezvous between the caller and the reader task."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: tuple[bytes, ...] | None = None
        self.error: OpenFlowError | None = None


class SwitchConnection:
    """One connected datapath.  Methods may be called concurrently from many tasks.

    Each request method queues its messages in the session, flushes them and
    waits for the reader task to see the answer; it raises
    :class:`SwitchError` when the switch rejects the request and
    :class:`ConnectionClosed` when the connection ends first.
    """

    def __init__(self, stream: trio.SocketStream, session: Session, peer: str) -> None:
        self._stream = stream
        self._session = session
        self.peer = peer
        self._send_lock = trio.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._closed = trio.Event()

    @property
    def datapath_id(self) -> int:
        """The switch's datapath id (from FEATURES_REPLY)."""
        assert self._session.datapath_id is not None
        return self._session.datapath_id

    @property
    def closed(self) -> bool:
        """True once the connection ended; the switch will come back as a new SwitchConnection."""
        return self._closed.is_set()

    async def send_bundle(self, encoded: Messages | bytes) -> None:
        """Apply a fastpath bundle (``encode_bundle``) atomically: all of it or, on error, none."""
        await self._request(lambda: self._session.begin_bundle(encoded))

    async def send_flow_mods(self, encoded: Messages | bytes) -> None:
        """Send bare flow-mods (``encode_flow_mods``) or group-mods plus a barrier; raises the first error.

        Not atomic: flows before a failing one stay installed.  Prefer bundles.
        """
        await self._request(lambda: self._session.send_flow_mods(encoded))

    async def barrier(self) -> None:
        """Return once the switch has processed everything sent before."""
        await self._request(self._session.send_barrier)

    async def dump_flows(self, table: int | None = None, cookie: int | None = None, cookie_mask: int = 0) -> list[FlowRecord]:
        """Installed flows (all multipart parts), optionally filtered by table and cookie/mask;
        a large dump is parsed in a worker thread (os-ken: about a second per 2,000 flows)."""
        parts = await self.dump_flow_messages(table, cookie, cookie_mask)
        if sum(map(len, parts)) < _PARSE_IN_THREAD_BYTES:
            return flow_records(parts)
        return await trio.to_thread.run_sync(flow_records, parts)

    async def dump_flow_messages(self, table: int | None = None, cookie: int | None = None, cookie_mask: int = 0) -> tuple[bytes, ...]:
        """The FLOW_STATS reply messages of a dump, unparsed (``flow_records`` parses them)."""
        result = await self._request(lambda: self._session.request_flows(table, cookie, cookie_mask))
        assert result is not None
        return result

    async def _request(self, start: Callable[[], int]) -> tuple[bytes, ...] | None:
        """Queue a request, send it and wait for its answer.

        Cancelling the caller stops the wait, not the request: the write is
        shielded because a half-written message would corrupt the stream.
        """
        if self.closed:
            raise ConnectionClosed(f"switch {self.datapath_id:#018x} is disconnected")
        request = start()
        waiter = self._waiters[request] = _Waiter()
        with trio.CancelScope(shield=True):
            await self._flush()
        await waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    async def _flush(self) -> None:
        """Write everything the session queued; the lock keeps writers from interleaving."""
        async with self._send_lock:
            data = self._session.data_to_send()
            if data and not self.closed:
                await self._stream.send_all(data)

    def _deliver(self, event: Event, packet_ins: trio.MemorySendChannel[PacketIn]) -> bool:
        """Route one session event; returns False if a packet-in had to be dropped."""
        if isinstance(event, PacketIn):
            try:
                packet_ins.send_nowait(event)
            except (trio.WouldBlock, trio.BrokenResourceError):
                return False
        elif isinstance(event, RequestDone | RequestFailed):
            waiter = self._waiters.pop(event.request, None)
            if waiter is not None:
                if isinstance(event, RequestFailed):
                    waiter.error = event.error
                else:
                    waiter.result = event.result
                waiter.done.set()
        return True

    async def aclose(self) -> None:
        """Close the socket; the reader task then fails waiting requests and reports the disconnect."""
        self._closed.set()
        await self._stream.aclose()

    def statistics(self) -> SessionStatistics:
        """Message, error and echo counters of this connection."""
        return self._session.statistics()


class Controller:
    """The OpenFlow listener of the node agent.  Start with ``await nursery.start(controller.run)``.

    ``echo_interval``/``echo_timeout`` (seconds) set liveness: a switch
    silent for their sum is dropped.  Packet-ins go to a bounded channel
    (``packet_in_buffer`` messages); when it is full they are dropped and
    counted so a slow consumer never stalls echo handling.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 6653,
        *,
        listener: socket.socket | None = None,
        echo_interval: float = 5.0,
        echo_timeout: float = 10.0,
        packet_in_buffer: int = 256,
    ) -> None:
        self.host = host
        self.port = port
        self._listener = listener  # served instead of host:port (the caller binds it, and removes its file)
        self._echo_interval = echo_interval
        self._echo_timeout = echo_timeout
        self._connections: dict[int, SwitchConnection] = {}
        self._changed = trio.Event()
        # Connect/disconnect events are rare (one per switch (re)connect), so an
        # unbounded buffer per subscriber cannot grow without bound in practice
        # and the reader never blocks on a slow subscriber.
        self._subscribers: list[trio.MemorySendChannel[SwitchEvent]] = []
        self._packet_in_send, self._packet_in_receive = trio.open_memory_channel[PacketIn](packet_in_buffer)
        self._accepted = 0
        self._handshake_failures = 0
        self._packet_ins_dropped = 0
        self._last_failure: str | None = None

    @property
    def target(self) -> str:
        """The OVS controller target that reaches this listener (the bound port once running)."""
        if self._listener is not None and self._listener.family == socket.AF_UNIX:
            return f"unix:{self._listener.getsockname()}"
        return f"tcp:{self.host}:{self.port}"

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; reports the bound port (useful with ``port=0``; 0 on a unix
        socket) to ``nursery.start``."""
        if self._listener is not None:
            listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(self._listener))]
            self.port = 0 if self._listener.family == socket.AF_UNIX else self._listener.getsockname()[1]
        else:
            listeners = await trio.open_tcp_listeners(self.port, host=self.host)
            self.port = listeners[0].socket.getsockname()[1]
        log.info("OpenFlow controller listening on %s", self.target)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.serve_listeners, self._handle, listeners)
                task_status.started(self.port)
        finally:
            for channel in self._subscribers:
                channel.close()

    def subscribe(self) -> trio.MemoryReceiveChannel[SwitchEvent]:
        """Events from now on, starting with a SwitchConnected for each switch already connected.

        Close the returned channel to unsubscribe.
        """
        send, receive = trio.open_memory_channel[SwitchEvent](math.inf)
        for connection in self._connections.values():
            send.send_nowait(SwitchConnected(connection))
        self._subscribers.append(send)
        return receive

    def packet_ins(self) -> trio.MemoryReceiveChannel[PacketIn]:
        """The shared channel of PACKET_IN events from all switches."""
        return self._packet_in_receive

    def connection(self, datapath_id: int) -> SwitchConnection | None:
        """The live connection of ``datapath_id``, or None (the ``_nowait`` form of wait_connected)."""
        return self._connections.get(datapath_id)

    async def wait_connected(self, datapath_id: int | None = None) -> SwitchConnection:
        """Wait for ``datapath_id`` (or any switch, when None) to be connected and return it."""
        while True:
            if datapath_id is None and self._connections:
                return next(iter(self._connections.values()))
            connection = self._connections.get(datapath_id) if datapath_id is not None else None
            if connection is not None:
                return connection
            await self._changed.wait()

    def _publish(self, event: SwitchEvent) -> None:
        self._changed.set()
        self._changed = trio.Event()
        for channel in list(self._subscribers):
            try:
                channel.send_nowait(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(channel)

    async def _handle(self, stream: trio.SocketStream) -> None:
        """Serve one switch connection until it ends (the task serve_listeners gives us)."""
        self._accepted += 1
        session = Session(trio.current_time(), echo_interval=self._echo_interval, echo_timeout=self._echo_timeout)
        connection = SwitchConnection(stream, session, _peer_name(stream.socket))
        reason = "controller shut down"
        try:
            await connection._flush()
            reason = await self._read_loop(connection, session)
        except OpenFlowError as exc:
            reason = f"{type(exc).__name__}: {exc}"
            # Best effort: tell the switch why (e.g. HELLO_FAILED) before hanging up.
            with trio.move_on_after(_FAREWELL_TIMEOUT_S), suppress(trio.BrokenResourceError, OSError):
                await connection._flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
        finally:
            for event in session.close(ConnectionClosed(f"connection to {connection.peer} ended: {reason}")):
                connection._deliver(event, self._packet_in_send)
            connection._closed.set()
            self._forget(connection, session, reason)  # before the close, so stats never lag the EOF
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _forget(self, connection: SwitchConnection, session: Session, reason: str) -> None:
        dpid = session.datapath_id
        if dpid is None or self._connections.get(dpid) is not connection:
            if dpid is None:
                self._handshake_failures += 1
                self._last_failure = f"{connection.peer}: {reason}"
                log.warning("OpenFlow handshake with %s failed: %s", connection.peer, reason)
            return
        del self._connections[dpid]
        self._last_failure = f"{dpid:#018x}: {reason}"
        log.warning("switch %#018x disconnected: %s", dpid, reason)
        self._publish(SwitchDisconnected(dpid, reason))

    async def _read_loop(self, connection: SwitchConnection, session: Session) -> str:
        """Pump bytes and timer ticks through the session until EOF (returns why) or an error (raises)."""
        stream = connection._stream
        while True:
            data = None
            with trio.move_on_at(session.next_deadline()):
                data = await stream.receive_some(_RECEIVE_SIZE)
                if not data:
                    return "connection closed by the switch"
            if data is None:
                session.tick(trio.current_time())
            else:
                for event in session.receive_data(data, trio.current_time()):
                    if isinstance(event, Ready):
                        await self._register(connection, event)
                    elif not connection._deliver(event, self._packet_in_send):
                        self._packet_ins_dropped += 1
            # Outside the cancel scope: a half-written message would corrupt the stream.
            await connection._flush()

    async def _register(self, connection: SwitchConnection, ready: Ready) -> None:
        previous = self._connections.pop(ready.datapath_id, None)
        if previous is not None:
            # The switch came back before we noticed the old connection die:
            # end the old one now so its waiting requests fail fast.
            self._publish(SwitchDisconnected(ready.datapath_id, "replaced by a new connection"))
            await previous.aclose()
        self._connections[ready.datapath_id] = connection
        log.info("switch %#018x connected from %s", ready.datapath_id, connection.peer)
        self._publish(SwitchConnected(connection))

    def statistics(self) -> ControllerStatistics:
        """Listener state plus every connected switch's counters (for the REST API/status page)."""
        return ControllerStatistics(
            address=self.target,
            port=self.port,
            connected=tuple(sorted(self._connections)),
            connections_accepted=self._accepted,
            handshake_failures=self._handshake_failures,
            packet_ins_dropped=self._packet_ins_dropped,
            last_failure=self._last_failure,
            switches=tuple(c.statistics() for c in self._connections.values()),
        )


def _peer_name(sock: trio.socket.SocketType) -> str:
    """How logs name a switch connection: its TCP address, or the unix socket it came in on."""
    if sock.family == socket.AF_UNIX:
        return f"unix:{sock.getsockname()}"
    host, port = sock.getpeername()[:2]
    return f"{host}:{port}"

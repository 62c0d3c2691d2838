"""The voter's side of followers of the store: their connections, the change feed, their requests.

A follower dials a voter's Raft port; the transport authenticates it (hello, then a sealed
`hello_follower` with its name and the revision it holds) and hands the socket and channel
over here (`adopt`), so PySyncObj never hears of it: no Raft node, no heartbeats, no
AppendEntries per follower.

Encode once: one task (`_collect`) reads every change applied since the last batch (all records
of a revision together, from the state machine's watch history) and encodes it once per wire
format into a bounded ring of batches; each follower's task frames and seals those same bytes
(AES-GCM per connection is the only per-follower work) and sends them. A follower behind the
ring is served from the history (encoded for it alone), and one behind the history gets an
image of the keys at one revision first (the latest image encoded once, shared). A follower that
cannot take a frame within SEND_TIMEOUT is dropped (it resumes from its revision elsewhere):
nothing is buffered without bound. Only applied, hence committed, entries are fed.

Heartbeats (one encoded message a second, shared) carry the voter's revision and whether it
serves: it reaches a quorum of the voters and knows a leader. A follower leaves a voter that
does not (partitioned) or that goes silent.

Requests: a follower's write (a command with its request id, so a retry elsewhere is
deduplicated) is proposed through this voter's Store, and a linearizable read asks for this
voter's `sync()` revision; the answer carries the result, the follower waits until it applied
that revision.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from ._base import StateMachineStore
from ._errors import StoreError
from ._feed_wire import changes_message, heartbeat_message, image_message
from ._wire import Channel, WireError, data_body

log = logging.getLogger("raftstore.feed")

HEARTBEAT_SECONDS = 1.0
SEND_TIMEOUT = 10.0  # a follower that cannot take one frame for that long is dropped
RING_BATCHES = 1024  # encoded batches kept for followers a little behind
FORWARDED_OPS = frozenset({"txn", "lease_grant", "lease_keepalive", "lease_revoke"})
_RECV_BYTES = 256 * 1024


class Encoded:
    """One message, encoded at most once per wire format however many followers get it."""

    __slots__ = ("message", "_bodies")

    def __init__(self, message: dict[str, Any]):
        self.message = message
        self._bodies: dict[int, bytes] = {}

    def body(self, version: int) -> bytes:
        body = self._bodies.get(version)
        if body is None:
            body = self._bodies[version] = data_body(self.message, version)
        return body


@dataclass
class _Batch:
    first: int  # the revisions it carries: first..last
    last: int
    encoded: Encoded


@dataclass(eq=False)
class _Link:
    """One follower connection."""

    name: str
    stream: trio.SocketStream
    channel: Channel
    revision: int  # what the follower holds (what it said, then what was sent)
    lock: trio.Lock = field(default_factory=trio.Lock)
    last_sent: float = 0.0


class Feed:
    """Serves the followers connected to this voter (see the module doc)."""

    def __init__(self, store: StateMachineStore, serving: Callable[[], tuple[bool, str | None]]):
        self._store = store
        self._serving = serving  # (reaches a quorum and knows a leader, the leader)
        self._links: set[_Link] = set()
        self._ring: deque[_Batch] = deque(maxlen=RING_BATCHES)
        self._ring_end = 0  # the revision the ring reaches
        self._image: Encoded | None = None  # the latest image sent, shared while current
        self._wake = trio.Event()  # a new batch or heartbeat
        self._joined = trio.Event()  # the first follower arrived
        self._heartbeat = Encoded(heartbeat_message(0, False, None))
        self._nursery: trio.Nursery | None = None

    @property
    def followers(self) -> int:
        return len(self._links)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._collect)
            nursery.start_soon(self._beat)

    def adopt(self, sock: socket.socket, channel: Channel, hello: dict[str, Any], unsent: bytes) -> None:
        """Take over an authenticated follower connection (on the trio thread)."""
        name, revision = hello.get("name"), hello.get("revision")
        if self._nursery is None or not isinstance(name, str) or type(revision) is not int or revision < 0:
            log.warning("follower %r: bad hello (revision %r), dropped", name, revision)
            sock.close()
            return
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        self._nursery.start_soon(self._serve, _Link(name, stream, channel, revision), unsent)

    # ---- the shared side: batches and heartbeats ------------------------------------------

    def _announce(self) -> None:
        wake, self._wake = self._wake, trio.Event()
        wake.set()

    async def _collect(self) -> None:
        """Encode what was applied since the last batch, once, while followers are connected."""
        store = self._store
        while True:
            if not self._links:
                await self._joined.wait()
                self._joined = trio.Event()
                self._ring.clear()
                self._ring_end = store.revision
                self._announce()
                continue
            changed = store._changed
            end = self._ring_end
            changes, current = store._read_state(lambda f: (f.changes_since(end + 1), f.revision))
            if current > end:
                if changes is None:  # the history overran the ring (a burst): links catch up alone
                    self._ring.clear()
                else:
                    self._ring.append(_Batch(end + 1, current, Encoded(changes_message(changes, current))))
                self._ring_end = current
                self._announce()
            await changed.wait()

    def _refresh_heartbeat(self) -> None:
        serving, leader = self._serving()
        self._heartbeat = Encoded(heartbeat_message(self._store.revision, serving, leader))

    async def _beat(self) -> None:
        while True:
            await trio.sleep(HEARTBEAT_SECONDS)
            if self._links:
                self._refresh_heartbeat()
                self._announce()

    # ---- one follower -----------------------------------------------------------------------

    async def _serve(self, link: _Link, unsent: bytes) -> None:
        self._links.add(link)
        self._store._open_watches += 1  # applied entries now wake the loop (see Store._on_applied)
        self._joined.set()
        log.info("follower %s connected at revision %d", link.name, link.revision)
        try:
            async with trio.open_nursery() as nursery:
                if unsent:
                    await link.stream.send_all(unsent)
                await self._send(link, Encoded({"type": "hello_welcome"}))
                self._refresh_heartbeat()  # the follower learns the leader and whether this voter serves at once
                await self._send(link, self._heartbeat)
                nursery.start_soon(self._read_requests, link, nursery)
                await self._feed(link)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, WireError, OSError) as group:
            log.info("follower %s dropped: %s", link.name, group.exceptions[0])
        finally:
            self._links.discard(link)
            self._store._open_watches -= 1
            with trio.CancelScope(shield=True):
                await link.stream.aclose()

    async def _send(self, link: _Link, encoded: Encoded) -> None:
        async with link.lock:
            with trio.fail_after(SEND_TIMEOUT):
                await link.stream.send_all(link.channel.frame_body(encoded.body(link.channel.version)))
            link.last_sent = time.monotonic()

    async def _feed(self, link: _Link) -> None:
        while True:
            wake = self._wake
            for encoded, revision in self._pending_for(link):
                await self._send(link, encoded)
                link.revision = revision
            if time.monotonic() - link.last_sent >= HEARTBEAT_SECONDS * 0.9:
                await self._send(link, self._heartbeat)
            await wake.wait()

    def _pending_for(self, link: _Link) -> list[tuple[Encoded, int]]:
        """What `link` needs next: batches from the ring, else changes from the history encoded
        for it alone, else the image. Empty when it holds the voter's revision (or more)."""
        ring, held = self._ring, link.revision
        if held >= self._ring_end:  # _collect keeps it at the applied revision while followers are connected
            return []
        if ring and ring[0].first <= held + 1 and held < self._ring_end:
            return [(b.encoded, b.last) for b in ring if b.last > held]
        changes, current = self._store._read_state(lambda f: (f.changes_since(held + 1), f.revision))
        if changes is not None:
            return [(Encoded(changes_message(changes, current)), current)] if current > held else []
        if self._image is None or self._image.message["revision"] != current:
            self._image = Encoded(image_message(self._store._read_state(lambda f: f.export_image())))
        return [(self._image, self._image.message["revision"])]

    async def _read_requests(self, link: _Link, nursery: trio.Nursery) -> None:
        while True:
            data = await link.stream.receive_some(_RECV_BYTES)
            if not data:
                raise trio.BrokenResourceError("the follower closed the connection")
            for message in link.channel.feed(data):
                if message["type"] != "feed_request":
                    raise WireError(f"unexpected {message['type']} from a follower")
                nursery.start_soon(self._answer, link, message.get("request_id"), message.get("command"))

    async def _answer(self, link: _Link, request_id: Any, command: Any) -> None:
        reply: dict[str, Any] = {"type": "feed_result", "request_id": request_id}
        try:
            if command is None:
                reply["result"] = {"revision": await self._store.sync()}
            else:
                reply["result"] = await self._store._propose(_forwarded(command))
        except StoreError as exc:
            reply.update(error=type(exc).__name__, message=str(exc))
        try:
            await self._send(link, Encoded(reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError):
            pass  # the link is going; the follower retries elsewhere (the request id deduplicates)


def _forwarded(command: Any) -> dict[str, Any]:
    """A follower's command as this voter will propose it; StoreError for anything else."""
    try:
        decoded = json.loads(command) if isinstance(command, str) else None
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict) or decoded.get("op") not in FORWARDED_OPS or not isinstance(decoded.get("rid"), str):
        raise StoreError("a follower sent a command that is not a write with a request id")
    return decoded

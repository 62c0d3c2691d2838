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
deduplicated) is proposed through this voter's Store (lease keepalives coalesced into one
command per short window, `_lease_batch.py`), and a linearizable read asks for this
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
from dataclasses import dataclass
from typing import Any

import trio

from ._base import StateMachineStore
from ._errors import StoreError
from ._feed_wire import changes_message, heartbeat_message, image_message
from ._lease_batch import KeepaliveBatcher, is_keepalive
from ._wire import Channel, WireError, data_body

log = logging.getLogger("raftstore.feed")

HEARTBEAT_SECONDS = 1.0
SEND_TIMEOUT = 10.0  # a follower that takes no bytes for that long is dropped
MAX_BACKLOG_BYTES = 16 * 1024 * 1024  # nor may more wait for it (it resumes from its revision)
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


class _Link:
    """One follower connection. Frames are written straight from the trio thread with
    non-blocking sends (no task switch per follower and batch); what the socket does not take
    waits in `backlog`, which the link's own task flushes, in order, when it becomes writable."""

    def __init__(self, name: str, sock: socket.socket, channel: Channel, revision: int):
        self.name = name
        self.sock = sock
        self.stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))  # for receiving and closing
        self.channel = channel
        self.revision = revision  # what the follower holds (what it said, then what was sent)
        self.backlog = bytearray()
        self.backlog_since = 0.0
        self.failed: OSError | None = None
        self.wake = trio.Event()  # backlog, a failure, or a catch-up to do
        self.last_sent = 0.0

    def push(self, encoded: Encoded) -> None:
        """Frame, seal and send now, or queue behind what the socket has not taken yet."""
        frame = self.channel.frame_body(encoded.body(self.channel.version))
        self.last_sent = time.monotonic()
        if self.backlog or self.failed:
            self.backlog += frame
            return
        try:
            sent = self.sock.send(frame)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self.failed, sent = exc, 0
        if sent < len(frame):
            self.backlog += frame[sent:]
            self.backlog_since = self.last_sent
            self.poke()

    def poke(self) -> None:
        wake, self.wake = self.wake, trio.Event()
        wake.set()

    async def flush(self) -> None:
        """Send the backlog; TooSlowError once it has waited SEND_TIMEOUT or grown past
        MAX_BACKLOG_BYTES (the follower resumes elsewhere from its revision)."""
        while self.backlog:
            if self.failed:
                raise self.failed
            if len(self.backlog) > MAX_BACKLOG_BYTES or time.monotonic() - self.backlog_since > SEND_TIMEOUT:
                raise trio.TooSlowError(f"follower took no frame for {SEND_TIMEOUT:g}s or fell {len(self.backlog)} bytes behind")
            with trio.move_on_after(SEND_TIMEOUT):
                await trio.lowlevel.wait_writable(self.sock)
            try:
                sent = self.sock.send(self.backlog)
            except (BlockingIOError, InterruptedError):
                continue
            del self.backlog[:sent]
            self.backlog_since = time.monotonic()
        if self.failed:
            raise self.failed


class Feed:
    """Serves the followers connected to this voter (see the module doc)."""

    def __init__(self, store: StateMachineStore, serving: Callable[[], tuple[bool, str | None]], members_apply_lease_batches: Callable[[], bool]):
        self._store = store
        self._keepalives = KeepaliveBatcher(store, members_apply_lease_batches)
        self._serving = serving  # (reaches a quorum and knows a leader, the leader)
        self._links: set[_Link] = set()
        self._ring: deque[_Batch] = deque(maxlen=RING_BATCHES)
        self._ring_end = 0  # the revision the ring reaches
        self._image: Encoded | None = None  # the latest image sent, shared while current
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
            nursery.start_soon(self._keepalives.run)

    def adopt(self, sock: socket.socket, channel: Channel, hello: dict[str, Any], unsent: bytes) -> None:
        """Take over an authenticated follower connection (on the trio thread)."""
        name, revision = hello.get("name"), hello.get("revision")
        if self._nursery is None or not isinstance(name, str) or type(revision) is not int or revision < 0:
            log.warning("follower %r: bad hello (revision %r), dropped", name, revision)
            sock.close()
            return
        self._nursery.start_soon(self._serve, _Link(name, sock, channel, revision), unsent)

    # ---- the shared side: batches and heartbeats ------------------------------------------

    def _announce(self) -> None:
        """New changes: sent at once to every link that is in step, the others are woken."""
        batch = self._ring[-1] if self._ring else None
        for link in self._links:
            if batch is not None and not link.backlog and batch.first <= link.revision + 1 <= batch.last:
                link.push(batch.encoded)
                link.revision = batch.last
            elif link.revision < self._ring_end:
                link.poke()

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
                quiet_since = time.monotonic() - HEARTBEAT_SECONDS * 0.9
                for link in self._links:
                    if link.last_sent <= quiet_since:
                        link.push(self._heartbeat)

    # ---- one follower -----------------------------------------------------------------------

    async def _serve(self, link: _Link, unsent: bytes) -> None:
        self._links.add(link)
        self._store._open_watches += 1  # applied entries now wake the loop (see Store._on_applied)
        self._joined.set()
        log.info("follower %s connected at revision %d", link.name, link.revision)
        try:
            async with trio.open_nursery() as nursery:
                link.backlog += unsent
                link.push(Encoded({"type": "hello_welcome"}))
                self._refresh_heartbeat()  # the follower learns the leader and whether this voter serves at once
                link.push(self._heartbeat)
                nursery.start_soon(self._read_requests, link, nursery)
                await self._feed(link)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, WireError, OSError) as group:
            log.info("follower %s dropped: %s", link.name, group.exceptions[0])
        finally:
            self._links.discard(link)
            self._store._open_watches -= 1
            with trio.CancelScope(shield=True):
                await link.stream.aclose()

    async def _feed(self, link: _Link) -> None:
        """Catch `link` up (history, image) and flush what its socket did not take; batches for
        a link in step and heartbeats are pushed by _announce and _beat without this task."""
        link.backlog_since = time.monotonic()
        while True:
            wake = link.wake
            await link.flush()
            for encoded, revision in self._pending_for(link):
                link.push(encoded)
                link.revision = revision
            if not link.backlog and not link.failed:
                await wake.wait()

    def _pending_for(self, link: _Link) -> list[tuple[Encoded, int]]:
        """What `link` needs next: batches from the ring, else changes from the history encoded
        for it alone, else the image. Empty when it holds the voter's revision (or more)."""
        ring, held = self._ring, link.revision
        if held >= self._ring_end:  # _collect keeps it at the applied revision while followers are connected
            return []
        if ring and ring[0].first <= held + 1:
            pending = []
            for batch in reversed(ring):  # the newest first: a link is seldom far behind
                if batch.last <= held:
                    break
                pending.append((batch.encoded, batch.last))
            return pending[::-1]
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
                forwarded = _forwarded(command)
                reply["result"] = await (self._keepalives.renew(forwarded) if is_keepalive(forwarded) else self._store._propose(forwarded))
        except StoreError as exc:
            reply.update(error=type(exc).__name__, message=str(exc))
        link.push(Encoded(reply))  # a link that went meanwhile: the follower retries elsewhere (the request id deduplicates)


def _forwarded(command: Any) -> dict[str, Any]:
    """A follower's command as this voter will propose it; StoreError for anything else."""
    try:
        decoded = json.loads(command) if isinstance(command, str) else None
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict) or decoded.get("op") not in FORWARDED_OPS or not isinstance(decoded.get("rid"), str):
        raise StoreError("a follower sent a command that is not a write with a request id")
    return decoded

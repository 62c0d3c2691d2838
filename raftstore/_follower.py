"""A follower of the store: the store's state through a voter's feed, without Raft.

`open_follower(FollowerConfig(...))` yields a `FollowerStore`: the same calls as `Store`
(reads, watches, writes, leases; a `StateMachineStore` over a local `StateMachine`), fed by
one voter at a time (`_feed.py` is the other end). No PySyncObj here: a follower is not a
Raft member, costs the leader nothing and the voter it follows one sealed frame per batch.

Order and freshness: changes are applied strictly revision after revision (`apply_changes`
refuses a gap), what is already held is skipped, and an image is taken only at or above the
held revision, so the revision served never goes back, also after moving to another voter.
Writes and linearizable reads go through the voter (a write keeps its request id across
retries, so it applies once) and return only once this follower has applied the revision
they produced or observed (read-your-writes).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from ._base import StateMachineStore, raise_for_error
from ._config import FollowerConfig, parse_address
from ._crypto import AeadSealer
from ._errors import LeaseNotFoundError, StoreClosedError, StoreError, UnavailableError
from ._feed_wire import decode_changes, decode_image
from ._fsm import StateMachine
from ._image import StoreImage
from ._types import LeadershipChange, StoreStatistics
from ._wire import Channel, WireError

log = logging.getLogger("raftstore.follower")
T = TypeVar("T")

RETRY_PAUSE = (0.05, 1.0)  # between rounds over every voter, first and largest
_RECV_BYTES = 256 * 1024
_ERRORS: dict[str, type[StoreError]] = {"UnavailableError": UnavailableError, "LeaseNotFoundError": LeaseNotFoundError}


def voter_order(name: str, voters: tuple[str, ...]) -> list[str]:
    """The voters in the order this follower tries them: by a hash of (name, voter), so the
    followers spread evenly and each moves to its own next choice when one fails."""
    return sorted(voters, key=lambda voter: hashlib.sha256(f"{name}|{voter}".encode()).digest())


class _Link:
    """The connection to the voter followed now."""

    def __init__(self, voter: str, stream: trio.SocketStream, channel: Channel):
        self.voter = voter
        self.stream = stream
        self.channel = channel
        self.lock = trio.Lock()
        self.results: dict[int, Any] = {}  # request id → feed_result message
        self.answered = trio.Event()  # any result arrived, or the link closed
        self.closed = False

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self.stream.send_all(self.channel.frame(message))

    def answer(self, request_id: int, message: dict[str, Any]) -> None:
        self.results[request_id] = message
        answered, self.answered = self.answered, trio.Event()
        answered.set()

    def close(self) -> None:
        self.closed = True
        self.answered.set()


class FollowerStore(StateMachineStore):
    """The store as a follower sees it (see the module doc). Stale reads, watches and
    `*_nowait` reads are local; the rest goes through the voter followed."""

    def __init__(self, config: FollowerConfig):
        super().__init__(time.time)
        self.config = config
        self._fsm = StateMachine(history_limit=config.history_limit)
        self._sealer = AeadSealer(config.secret) if config.secret else None
        self._link: _Link | None = None
        self._link_changed = trio.Event()
        self._applied = trio.Event()  # set (and replaced) whenever the revision moves
        self._voter_revision = 0
        self._serving = False
        self._leader: str | None = None
        self._off_leader = False  # leave the voter followed if it leads (another voter is still to try)
        self._last_heard = time.monotonic()
        self._request_ids = itertools.count(1)
        self._writes = 0
        self._write_seconds = 0.0
        self._closed = False
        self._serving_seen = False  # the voter tried last said it serves

    # ---- StateMachineStore ---------------------------------------------------------------------

    def _read_state(self, fn: Callable[[StateMachine], T]) -> T:
        if self._closed:
            raise StoreClosedError("the store is closed")
        return fn(self._fsm)  # only the trio thread touches it

    async def _propose(self, command: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        result = await self._request(json.dumps(command, separators=(",", ":")))
        self._writes += 1
        self._write_seconds += time.monotonic() - started
        return result

    async def _linearize(self) -> None:
        await self._request(None)

    async def _request(self, command: str | None) -> dict[str, Any]:
        """Send a write (or, for None, a sync) to the voter followed, moving with it until an
        answer or the request timeout; then wait until the revision it names is applied here."""
        with trio.move_on_after(self.config.request_timeout):
            while True:
                link = self._link
                if link is None or link.closed:
                    await self._link_changed.wait()
                    continue
                request_id = next(self._request_ids)
                try:
                    await link.send({"type": "feed_request", "request_id": request_id, "command": command})
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, WireError):
                    link.close()
                    continue
                while request_id not in link.results and not link.closed:
                    await link.answered.wait()
                reply = link.results.pop(request_id, None)
                if reply is None:
                    continue  # the link broke: ask the next voter (the request id deduplicates a write)
                if reply.get("error") is not None:
                    raise _ERRORS.get(reply["error"], StoreError)(reply.get("message") or reply["error"])
                result: dict[str, Any] = raise_for_error(reply.get("result"))
                if not isinstance(result, dict):
                    raise StoreError(f"the voter answered {result!r}")
                await self._wait_applied(int(result.get("revision", 0)))
                return result
        raise UnavailableError(f"no voter answered within {self.config.request_timeout:g}s; a write may still apply later — retrying it is safe")

    async def _wait_applied(self, revision: int) -> None:
        while self._fsm.revision < revision:
            await self._applied.wait()

    # ---- leadership as the voters report it -----------------------------------------------

    def is_leader(self) -> bool:
        return False

    def leader(self) -> str | None:
        """The Raft leader as the voter followed last reported it."""
        return self._leader

    async def wait_leader(self, timeout: float | None = None) -> str:
        with trio.move_on_after(self.config.request_timeout if timeout is None else timeout):
            while self._leader is None:
                await self._link_changed.wait()
            return self._leader
        raise UnavailableError("no voter reported a leader in time")

    def _leadership_view(self) -> str | None:
        """The leader as the voter followed reports it (a follower never leads)."""
        return self._leader

    async def leadership_changes(self) -> AsyncIterator[LeadershipChange]:
        """The leader as reported, then one item per change."""
        last: tuple[bool, str | None] | None = None
        while True:
            changed = self._link_changed
            if (False, self._leader) != last:
                last = (False, self._leader)
                yield LeadershipChange(False, self._leader, 0)
            await changed.wait()

    def apply_latency(self) -> tuple[int, float]:
        return self._writes, self._write_seconds

    def statistics(self) -> StoreStatistics:
        fsm, link = self._fsm, self._link
        voter = None if link is None or link.closed else link.voter
        blockers = () if voter is not None and self._serving else ("it follows no voter that reaches a quorum",)
        return StoreStatistics(
            self_address=None,
            role="store_follower",
            leader=self._leader,
            term=0,
            commit_index=0,
            last_applied=0,
            log_length=0,
            revision=fsm.revision,
            keys=fsm.key_count(),
            leases=fsm.lease_count(),
            voters=self.config.voters,
            connected_voters=() if voter is None else (voter,),
            readonly_members=0,
            has_quorum=self._serving,
            fsync=False,
            cluster_id=fsm.cluster_id,
            commit_blockers=blockers,
            feed_voter=voter,
            lag_revisions=max(0, self._voter_revision - fsm.revision),
            lag_seconds=time.monotonic() - self._last_heard,
        )

    # ---- following ------------------------------------------------------------------------

    def _set_link(self, link: _Link | None) -> None:
        if link is None and self._link is not None:
            self._link.close()
            self._serving = False
        self._link = link
        changed, self._link_changed = self._link_changed, trio.Event()
        changed.set()

    async def _follow(self) -> None:
        """Follow one voter after another, forever: in `voter_order`, but the voter known to
        lead last, and leaving it when it says it leads while another voter is still to try in
        this round. The leader's CPU goes to the writes, so its cost per write stays flat in the
        number of followers; it feeds followers only when no other voter does."""
        pause = RETRY_PAUSE[0]
        spread = voter_order(self.config.name, self.config.voters)
        while True:
            order = sorted(spread, key=lambda voter: voter == self._leader)  # stable: the spread otherwise
            for position, voter in enumerate(order):
                self._off_leader = position < len(order) - 1
                try:
                    await self._follow_one(voter)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, WireError, _Leave) as exc:
                    log.info("follower %s: left voter %s: %s", self.config.name, voter, exc or type(exc).__name__)
                finally:
                    self._set_link(None)
                if self._serving_seen:
                    pause = RETRY_PAUSE[0]
            await trio.sleep(pause)
            pause = min(pause * 2, RETRY_PAUSE[1])

    async def _follow_one(self, voter: str) -> None:
        self._serving_seen = False
        host, port = parse_address(voter, "voter address")
        with trio.fail_after(self.config.heartbeat_timeout):
            stream = await trio.open_tcp_stream(host, port)
        try:
            channel = Channel(self._sealer, self.config.wire_format)
            await stream.send_all(channel.hello())
            link = _Link(voter, stream, channel)
            welcomed = False
            while True:
                with trio.move_on_after(self.config.heartbeat_timeout) as silent:
                    data = await stream.receive_some(_RECV_BYTES)
                if silent.cancelled_caught:
                    raise _Leave(f"nothing heard for {self.config.heartbeat_timeout:g}s")
                if not data:
                    raise _Leave("the voter closed the connection")
                hello_pending = channel.negotiated is None
                messages = channel.feed(data)
                if hello_pending and channel.negotiated is not None:
                    await stream.send_all(channel.frame({"type": "hello_follower", "name": self.config.name, "revision": self._fsm.revision}))
                for message in messages:
                    if not welcomed:
                        if message["type"] != "hello_welcome":
                            raise WireError(f"expected the voter's welcome, got {message['type']}")
                        welcomed = True
                        self._set_link(link)
                        continue
                    self._receive(link, message)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _receive(self, link: _Link, message: dict[str, Any]) -> None:
        self._last_heard = time.monotonic()
        kind = message["type"]
        if kind == "feed_changes":
            changes, revision = decode_changes(message)
            self._voter_revision = max(self._voter_revision, revision)
            try:
                advanced = self._fsm.apply_changes(changes)
            except ValueError as exc:
                raise _Leave(str(exc)) from None  # a gap: resume from the held revision
            if advanced:
                self._advanced()
        elif kind == "feed_image":
            self._take_image(decode_image(message))
        elif kind == "feed_heartbeat":
            self._voter_revision = int(message.get("revision") or 0)
            leader = message.get("leader")
            if leader != self._leader:
                self._leader = leader if isinstance(leader, str) else None
                self._set_link(link)  # wakes leadership_changes and wait_leader
                self._cancel_bound(self._leader)
            self._serving = bool(message.get("serving"))
            if not self._serving:
                raise _Leave("the voter lost its quorum or knows no leader")
            self._serving_seen = True
            if self._off_leader and leader == link.voter:
                raise _Leave("it leads: another voter feeds this follower")
        elif kind == "feed_result":
            request_id = message.get("request_id")
            if isinstance(request_id, int):
                link.answer(request_id, message)
        else:
            raise WireError(f"unexpected {kind} from the voter")

    def _take_image(self, image: StoreImage) -> None:
        if image.revision < self._fsm.revision:
            raise _Leave(f"the voter's image is at revision {image.revision}, older than the {self._fsm.revision} served here")
        self._fsm = StateMachine.from_image(image, history_limit=self.config.history_limit)
        self._voter_revision = max(self._voter_revision, image.revision)
        self._advanced()

    def _advanced(self) -> None:
        applied, self._applied = self._applied, trio.Event()
        applied.set()
        if self._open_watches:
            self._fire_changed()


class _Leave(Exception):
    """Move on to the next voter (it said it does not serve or that it leads, went silent, or sent a gap)."""


@asynccontextmanager
async def open_follower(config: FollowerConfig) -> AsyncIterator[FollowerStore]:
    """Start following the voters; yield the FollowerStore; stop on exit. Returns at once:
    `await store.sync()` waits until it holds everything committed before the call."""
    store = FollowerStore(config)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(store._follow)
        try:
            yield store
        finally:
            store._closed = True  # reads after this raise StoreClosedError
            nursery.cancel_scope.cancel()

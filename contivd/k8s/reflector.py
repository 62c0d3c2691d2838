"""List then watch one kind, for ever: what client-go calls a reflector, in a worker thread.

It lists (a `Listed` with every object), then watches from the list's resourceVersion and
hands each change on (`Changed`), remembering the newest resourceVersion it saw (bookmarks
included) so a watch the server ended, or a connection that broke (API server restart), resumes
where it stopped without a relist. Only a 410 (the history was compacted) costs a relist.
Failures back off (0.5 s doubling to 15 s) and are reported to `KubeHealth`: unreachable, or
refused (401: the token). Nothing is ever torn down because the API server is away: the syncer
only acts on what the server says.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from .client import KubeApi, KubeRefused, KubeUnavailable
from .status import KubeHealth

log = logging.getLogger("contivd.k8s")
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 15.0


@dataclass(frozen=True)
class Listed:
    kind: str
    objects: list[dict[str, Any]]


@dataclass(frozen=True)
class Relisting:
    """The kind's history is gone (410): a `Listed` follows. Until it does, what is known of the
    kind is stale, so nothing should be reconciled against it."""

    kind: str


@dataclass(frozen=True)
class Changed:
    kind: str
    event: str  # ADDED, MODIFIED, DELETED
    object: dict[str, Any]


Update = Listed | Relisting | Changed


def reflect(api: KubeApi, kind: str, emit: Callable[[Update], None], health: KubeHealth, stopping: threading.Event) -> None:
    """Run until `stopping` is set (or `emit` raises: the consumer is gone)."""
    backoff = FIRST_BACKOFF
    resource_version = ""  # "": list first
    while not stopping.is_set():
        try:
            if not resource_version:
                listing = api.list(kind)
                emit(Listed(kind, listing.items))
                resource_version = listing.resource_version
                log.info("listed %d %s at resourceVersion %s", len(listing.items), kind, resource_version)
            events = api.watch(kind, resource_version)
            health.ok(kind)  # the server answered the watch: whatever failed before is over
            quiet = True
            for event in events:
                if stopping.is_set():
                    return
                quiet = False
                resource_version = str(((event.get("object") or {}).get("metadata") or {}).get("resourceVersion") or resource_version)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    emit(Changed(kind, str(event["type"]), event["object"]))
                backoff = FIRST_BACKOFF
            if not quiet:
                continue  # the server ended the watch (its timeout): resume at once
            if stopping.wait(backoff):  # ended without a word, not even a bookmark: do not spin
                return
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        except KubeRefused as exc:
            if exc.status == 410:
                log.info("watch of %s: resourceVersion %s is gone (%s): relisting", kind, resource_version, exc)
                resource_version = ""
                emit(Relisting(kind))
                continue
            token = " (check the kubeconfig's token)" if exc.status in (401, 403) else ""
            problem = f"the API server refused the {kind} list/watch: {exc}{token}"
        except KubeUnavailable as exc:
            problem = f"the API server is unreachable: {exc}"
        except ValueError as exc:  # a line or a list that is not JSON: start over from a list
            problem = f"the API server sent something unreadable: {exc}"
            resource_version = ""
        if stopping.is_set():  # the term is over: its failures are nobody's concern now
            return
        health.failed(kind, problem)
        if stopping.wait(backoff):
            return
        backoff = min(backoff * 2, MAX_BACKOFF)


Consume = Callable[[trio.MemoryReceiveChannel[Update]], Awaitable[None]]


async def reflect_kinds(api: KubeApi, health: KubeHealth, subscribers: Sequence[tuple[Iterable[str], Consume]]) -> None:
    """Reflect every kind a subscriber names, each once, in a worker thread of its own, and hand
    each update to every subscriber of its kind through a channel of that subscriber's own, until
    a subscriber returns or the caller is cancelled; then the threads and their watches end.

    One watch per kind, however many duties need it: the leader's Pods feed both the NetworkPolicy
    compiler and the label follower from one list and one watch (one copy of every pod, one load
    on the API server). Subscribers share the objects, so none may modify them. A subscriber that
    does not keep up holds back the others' updates of the same kinds (channels are bounded)."""
    channels = [trio.open_memory_channel[Update](64) for _ in subscribers]
    fan_out: dict[str, list[trio.MemorySendChannel[Update]]] = {}
    for (kinds, _), (send, _) in zip(subscribers, channels, strict=True):
        for kind in kinds:
            fan_out.setdefault(kind, []).append(send)
    stopping = threading.Event()

    async def hand_on(update: Update) -> None:
        for send in fan_out[update.kind]:
            await send.send(update)

    async def run(kind: str) -> None:
        def emit(update: Update) -> None:
            trio.from_thread.run(hand_on, update)

        await trio.to_thread.run_sync(reflect, api, kind, emit, health, stopping, abandon_on_cancel=True)

    async def consume_then_stop(consume: Consume, receive: trio.MemoryReceiveChannel[Update], term: trio.CancelScope) -> None:
        async with receive:
            await consume(receive)
        term.cancel()

    try:
        async with trio.open_nursery() as nursery:
            for kind in fan_out:
                nursery.start_soon(run, kind)
            for (_, consume), (_, receive) in zip(subscribers, channels, strict=True):
                nursery.start_soon(consume_then_stop, consume, receive, nursery.cancel_scope)
    finally:
        stopping.set()
        api.stop_watches()

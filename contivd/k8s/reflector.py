"""List then watch one kind, for ever: what client-go calls a reflector, as a trio task.

It lists (a `Listed` with every object), then watches from the list's resourceVersion and
hands each change on (`Changed`), remembering the newest resourceVersion it saw (bookmarks
included) so a watch the server ended, or a connection that broke, resumes where it stopped.
A 410 (the history is gone: compacted, or a real kube-apiserver whose watch cache restarted)
costs a relist. Failures back off (0.5 s doubling to 4 s: an API server back from a restart
is found within 4 s) and each kind's state (status.KindState: listing, watching, resuming,
backing off) is kept in `KubeHealth`, which readiness, the status page and /metrics read and
which logs one line per change, never one per retry. Nothing is ever torn down because the API
server is away: the syncer only acts on what the server says. Cancelling the task (leadership
lost) closes its connection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from . import status
from .client import KubeApi, KubeRefused, KubeUnavailable
from .status import KubeHealth

log = logging.getLogger("contivd.k8s")
FIRST_BACKOFF, MAX_BACKOFF = 0.5, 4.0


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


async def reflect(api: KubeApi, kind: str, emit: Callable[[Update], Awaitable[None]], health: KubeHealth) -> None:
    """Run until cancelled (or `emit` raises: the consumer is gone)."""
    backoff = FIRST_BACKOFF
    resource_version = ""  # "": list first

    def note(change: Callable[..., status.KindState], *args: Any) -> None:
        now = time.time()
        health.update(kind, lambda state: change(state, *args, now=now))

    while True:
        try:
            if not resource_version:
                note(status.listing)
                listing = await api.list(kind)
                await emit(Listed(kind, listing.items))
                resource_version = listing.resource_version
                note(status.listed, resource_version)
                log.info("listed %d %s at resourceVersion %s", len(listing.items), kind, resource_version)
            heard = False

            def answered() -> None:
                nonlocal backoff
                backoff = FIRST_BACKOFF  # the server is back: the next failure starts the backoff over
                note(status.watching)

            async def handle(event: dict[str, Any]) -> None:
                nonlocal resource_version, heard
                heard = True
                version = str(((event.get("object") or {}).get("metadata") or {}).get("resourceVersion") or resource_version)
                if version != resource_version:
                    resource_version = version
                    note(status.advanced, version)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    await emit(Changed(kind, str(event["type"]), event["object"]))

            await api.watch(kind, resource_version, answered, handle)
            note(status.resuming)
            if heard:
                continue  # the server ended the watch (its timeout): resume at once
            await trio.sleep(backoff)  # ended without a word, not even a bookmark: do not spin
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        except KubeRefused as exc:
            if exc.status == 410:
                note(status.expired)
                resource_version = ""
                await emit(Relisting(kind))
                continue
            token = " (check the kubeconfig's token)" if exc.status in (401, 403) else ""
            problem = f"the API server refused the {kind} list/watch: {exc}{token}"
        except KubeUnavailable as exc:
            problem = f"the API server is unreachable: {exc}"
        except ValueError as exc:  # a line or a list that is not JSON: start over from a list
            problem = f"the API server sent something unreadable: {exc}"
            resource_version = ""
        note(status.failed, problem)
        await trio.sleep(backoff)
        backoff = min(backoff * 2, MAX_BACKOFF)


Consume = Callable[[trio.MemoryReceiveChannel[Update]], Awaitable[None]]


async def reflect_kinds(api: KubeApi, health: KubeHealth, subscribers: Sequence[tuple[Iterable[str], Consume]]) -> None:
    """Reflect every kind a subscriber names, each once, in a task of its own, and hand each
    update to every subscriber of its kind through a channel of that subscriber's own, until
    a subscriber returns or the caller is cancelled; then the watches end.

    One watch per kind, however many duties need it: the leader's Pods feed both the NetworkPolicy
    compiler and the label follower from one list and one watch (one copy of every pod, one load
    on the API server). Subscribers share the objects, so none may modify them. A subscriber that
    does not keep up holds back the others' updates of the same kinds (channels are bounded)."""
    channels = [trio.open_memory_channel[Update](64) for _ in subscribers]
    fan_out: dict[str, list[trio.MemorySendChannel[Update]]] = {}
    for (kinds, _), (send, _) in zip(subscribers, channels, strict=True):
        for kind in kinds:
            fan_out.setdefault(kind, []).append(send)
    health.expect(sorted(fan_out), time.time())

    async def hand_on(update: Update) -> None:
        for send in fan_out[update.kind]:
            await send.send(update)

    async def consume_then_stop(consume: Consume, receive: trio.MemoryReceiveChannel[Update], term: trio.CancelScope) -> None:
        async with receive:
            await consume(receive)
        term.cancel()

    async with trio.open_nursery() as nursery:
        for kind in fan_out:
            nursery.start_soon(reflect, api, kind, hand_on, health)
        for (_, consume), (_, receive) in zip(subscribers, channels, strict=True):
            nursery.start_soon(consume_then_stop, consume, receive, nursery.cancel_scope)

"""A node's role in the store: a voter (a Raft member, contivd.voter) or a follower of the
store (fed by a voter, docs/raftstore.md "Followers of the store"). The composition root
(contivd.main) builds everything else the same way for both; what differs is behind
`NodeRole`, so the voter's modules are imported only by voters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import trio

from raftstore import FollowerStore, open_follower

from .config import Config

if TYPE_CHECKING:
    from .k8s import KubeHealth
    from .netmaster.service import Netmaster
    from .nodes import NodeStore


class NodeRole(Protocol):
    @property
    def store(self) -> NodeStore: ...

    @property
    def description(self) -> str:
        """For the start-up log line."""

    def start_duties(self, nursery: trio.Nursery, netmaster: Netmaster) -> KubeHealth | None:
        """Start what this role runs beside the shared services; the Kubernetes watch's health if it runs one."""

    async def before_stop(self) -> None:
        """Called once on SIGTERM/SIGINT, before the API stops."""


class FollowerRole:
    """A follower of the store: no leader duties, no Kubernetes watch (the leader runs it),
    nothing to hand over; its writes reach the leader through the API's forwarding."""

    def __init__(self, store: FollowerStore, config: Config):
        self.store = store
        self.description = f"follower of the store, voters {', '.join(config.peers)}"

    def start_duties(self, nursery: trio.Nursery, netmaster: Netmaster) -> KubeHealth | None:
        return None

    async def before_stop(self) -> None:
        return None


@asynccontextmanager
async def open_role(config: Config) -> AsyncIterator[NodeRole]:
    """The node's store, as a voter or (--follower) as a follower; closed on exit."""
    if config.follower:
        async with open_follower(config.follower_config()) as store:
            yield FollowerRole(store, config)
        return
    from .voter import open_voter  # PySyncObj, the leader's duties: voters only

    async with open_voter(config) as role:
        yield role

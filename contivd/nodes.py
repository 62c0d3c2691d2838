"""The node registry: every contivd announces itself under a lease in the store.

A node's record disappears when its lease expires (the node died or was partitioned away for
longer than the TTL), so the registry is the live membership operators and peers see: the
API finds the leader's URL here, agents find VTEP peers here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

import trio

from raftstore import KeyValueStore, LeaseNotFoundError, UnavailableError

from .state import NodeRecord, RecordError
from .state.families import NODES

if TYPE_CHECKING:  # annotations only: a follower never loads Store (it needs PySyncObj)
    from raftstore import FollowerStore, Store

    NodeStore: TypeAlias = Store | FollowerStore  # what a node holds: a voter's Raft member or a follower's copy

log = logging.getLogger("contivd.nodes")
NODE_TTL_SECONDS = 15.0


async def keep_registered(store: KeyValueStore, info: NodeRecord, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Register `info` under a lease and keep it alive; re-register if the lease was lost."""
    started = False
    while True:
        try:
            lease = await store.grant_lease(NODE_TTL_SECONDS)
            await NODES.write(store, info.name, info, lease=lease)
            log.info("registered node %s (api %s)", info.name, info.api_url)
            if not started:
                started = True
                task_status.started()
            await store.keep_lease_alive(lease, NODE_TTL_SECONDS)
        except LeaseNotFoundError:
            log.warning("node %s: registration lease expired; registering again", info.name)
        except UnavailableError as exc:
            log.warning("node %s: cannot register yet: %s", info.name, exc)
            await trio.sleep(1)


def registered_nodes(store: KeyValueStore) -> list[NodeRecord]:
    """Nodes this member has applied (possibly slightly stale), by name; an unusable record is
    logged and left out.

    Read from the store at this member's applied revision (as current as a StateCache caught up
    to it), so that callers without a cache, such as the control-plane router that forwards to
    the leader, need none."""
    nodes = []
    for name, record in NODES.each_nowait(store):
        if isinstance(record, RecordError):
            log.warning("node registry: node %s skipped: %s", name, record)
        else:
            nodes.append(record)
    return nodes


def leader_api_url(store: KeyValueStore) -> str | None:
    """The API URL of the node that currently leads Raft, if it has registered."""
    leader = store.leader()
    for node in registered_nodes(store):
        if leader is not None and node.raft_address == leader:
            return node.api_url
    return None

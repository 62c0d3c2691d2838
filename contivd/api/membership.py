"""The Raft voter routes' work: add a voter before it starts, remove one after it stopped.

What `etcdctl member add|remove` are for etcd: growing a restored or recovered single-voter
cluster back to three voters, replacing a voter whose host is gone, shrinking. Each change is
one Raft entry that the current voters commit, one voter at a time (Raft's single-server
changes; the store refuses a second change while one is under way). The routes are writes, so
they run on the leader: other nodes forward them there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raftstore import StoreConfigError, UnavailableError

from ..model import ConflictError, NotFoundError, ValidationError

if TYPE_CHECKING:  # annotations only: a follower of the store never loads PySyncObj
    from raftstore import Store

    from ..nodes import NodeStore


def _raft_member(store: NodeStore) -> Store:
    """The store as a Raft member. These routes run on the leader, which is one; a follower of
    the store forwards them (a call reaching one here is answered 503, as without a leader)."""
    from raftstore import Store  # on a voter: loading it costs nothing more

    if not isinstance(store, Store):
        raise UnavailableError("voters are changed on the Raft leader; this node is a follower of the store")
    return store


def _voters(store: NodeStore) -> dict[str, Any]:
    stats = store.statistics()
    return {"voters": list(stats.voters), "leader": stats.leader}


async def add_voter(node_store: NodeStore, address: str) -> tuple[dict[str, Any], int]:
    """Make `address` (host:port of its Raft listener) a voter; it is started afterwards with
    --peers naming the current voters, and catches up from the leader's snapshot and log."""
    store = _raft_member(node_store)
    stats = store.statistics()
    if address in stats.voters:
        raise ConflictError(f"{address} is already a voter")
    # One voter becoming two: the change takes effect as the leader appends it, and two voters
    # commit only together, so it commits once the new voter runs (until then the cluster
    # writes nothing, as etcd after `member add` to one member). Larger clusters commit it now.
    alone = stats.voters == (stats.self_address,)
    try:
        await store.add_member(address, until_committed=not alone)
    except StoreConfigError as exc:  # not host:port, or off this host without a cluster secret
        raise ValidationError("address", str(exc)) from None
    return {**_voters(store), "committed": not alone}, store.revision


async def remove_voter(node_store: NodeStore, address: str) -> tuple[dict[str, Any], int]:
    """Take `address` out of the voters. The leader itself is refused: removing it would leave
    the cluster leaderless until the others time out; stopping it first hands over at once."""
    store = _raft_member(node_store)
    stats = store.statistics()
    if address not in stats.voters:
        raise NotFoundError(f"{address} is not a voter (voters: {', '.join(stats.voters)})")
    if address == stats.self_address:
        raise ConflictError(
            f"{address} is the Raft leader: stop contivd on that node first (the other voters elect a new leader within seconds), then remove it"
        )
    await store.remove_member(address)
    return _voters(store), store.revision

"""Composition root: the one place that builds contivd's services and owns their nursery.

Today the node runs its embedded store member; the netmaster API, node agent and CNI server
are started here, in dependency order, as they arrive.
"""

from __future__ import annotations

import logging
import signal

import trio

from raftstore import Store, open_store

from . import __version__
from .config import Config

log = logging.getLogger("contivd")


async def _log_leadership(store: Store, node_name: str) -> None:
    async for change in store.leadership_changes():
        if change.is_leader:
            log.info("node %s is the leader (netmaster) in term %d", node_name, change.term)
        elif change.leader:
            log.info("leader is %s (term %d)", change.leader, change.term)
        else:
            log.warning("no leader: election in progress or no quorum")


async def run(config: Config) -> None:
    """Run the node until SIGTERM or SIGINT, then shut down cleanly (store flushed and closed)."""
    log.info("contivd %s starting: node %s, data dir %s", __version__, config.node_name, config.data_dir)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with open_store(config.store_config()) as store, trio.open_nursery() as nursery:
            role = "read-only member" if config.readonly else f"raft on {config.raft_listen}"
            log.info("store started (%s, peers: %s)", role, ", ".join(config.peers) or "none, single node")
            nursery.start_soon(_log_leadership, store, config.node_name)
            async for signum in signals:
                log.info("received %s: shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
    log.info("contivd stopped")

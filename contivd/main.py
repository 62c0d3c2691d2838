"""Composition root: the one place that builds contivd's services and owns their nursery.

Start order: the store (a voter's Raft member, or a follower's copy: contivd.roles) → the
voter's duties → node registration → node agent and CNI server (with `--datapath ovs`,
contivd.datapath) → REST API. The Raft leader is the netmaster: when a voter gains
leadership it creates Contiv's default objects if missing. Writes reaching any other node
are forwarded to the leader. SIGTERM or SIGINT stops the API gracefully (a leader first hands
the leadership over), then the store (journal flushed, sockets closed).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from raftstore import StoreStatistics

from . import __version__
from .api.agents import AgentCalls
from .api.app import ApiServer, create_app
from .api.cluster import Cluster, ClusterAdmin
from .api.debug import Debug
from .api.kubernetes import Kubernetes
from .api.objects import Objects
from .api.operators import Operators
from .api.plugin import Plugin
from .api.routes import openapi_document
from .backup.route import SnapshotContext, register_snapshot_route
from .config import Config, ConfigError
from .http import idle_timer
from .http.audit import AuditTrail
from .http.auth import Authenticator, store_lookup
from .http.forwarder import ForwardingClient
from .http.hardening import MAX_IMPORT_BODY_BYTES, Hardened, listener_timeouts
from .http.leader_forwarder import FORWARD_TIMEOUT_SECONDS, LeaderForwarder
from .http.local_socket import SocketInUseError, serve_unix
from .http.tokens import Role
from .memory import release_freed_memory
from .metrics import Metrics, StoreSummaries
from .migrate.commit import IMPORT_PATH, ImportContext, register_import_route
from .netmaster.control import LocalControlPlane
from .netmaster.service import Netmaster
from .nodes import keep_registered
from .roles import open_role
from .sdnotify import Notifier
from .state import NodeRecord, StateCache
from .status.routes import StatusContext, register_status_routes
from .tls.material import TlsFiles, issued_tls_files
from .tls.serving import ServingTls

if TYPE_CHECKING:
    from .agent.service import Agent, AgentStatistics
    from .datapath import Datapath
    from .k8s import KubeHealth, KubeStatusView
    from .nodes import NodeStore

log = logging.getLogger("contivd")
STATUS_SECONDS = 5.0  # how often the systemd STATUS= line is refreshed


async def _node_tls(store: NodeStore, config: Config) -> ServingTls | None:
    """The TLS files this node serves with: the operator's, else issued by the cluster CA
    (waits for the store on a first start); None when every listener is plain loopback HTTP."""
    if not config.uses_tls:
        return None
    if config.tls_cert is not None and config.tls_key is not None and config.tls_ca is not None:
        return ServingTls(TlsFiles(config.tls_cert, config.tls_key, config.tls_ca), issued=False)
    assert config.cluster_secret is not None  # config.load refuses TLS without files or a secret
    return ServingTls(await issued_tls_files(store, config.tls_dir, config.cluster_secret, config.node_name, config.tls_hosts), issued=True)


def _hypercorn_config(listen: str, tls: ServingTls | None) -> HypercornConfig:
    """One listener's settings; TLS with `tls` (the caller passes None for a plain listener)."""
    hconfig = HypercornConfig()
    hconfig.bind = [listen]
    if tls is not None:
        tls.hypercorn_config(hconfig)
    hconfig.accesslog = None
    hconfig.errorlog = logging.getLogger("hypercorn.error")  # our handler and format (logs.configure), not hypercorn's own
    hconfig.graceful_timeout = 5.0
    hconfig.include_server_header = False  # as Contiv's Go server: no product banner, one header less per answer
    listener_timeouts(hconfig)
    return hconfig


async def _start_datapath(
    nursery: trio.Nursery,
    config: Config,
    store: NodeStore,
    cache: StateCache,
    netmaster: Netmaster,
    forwarder: LeaderForwarder,
    tls: ServingTls | None,
    vtep_ip: str,
    stop: trio.Event,
) -> Datapath | None:
    """The node agent, BGP, the agent API and the CNI server with `--datapath ovs`; None (and
    none of their modules loaded) with `--datapath none`."""
    if config.datapath != "ovs":
        return None
    from .datapath import DatapathContext, start_ovs_datapath

    return await start_ovs_datapath(nursery, DatapathContext(config, store, cache, netmaster, forwarder, tls, vtep_ip, _hypercorn_config, stop))


async def run(config: Config, reload: Callable[[], Config] | None = None) -> None:
    """Run the node until SIGTERM or SIGINT, then shut down cleanly; SIGHUP calls `reload`."""
    log.info("contivd %s starting: node %s, data dir %s", __version__, config.node_name, config.data_dir)
    idle_timer.install()  # every HTTP listener of this process: one idle-timer task per connection, not per request
    stop = trio.Event()
    notifier = Notifier()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        http = ForwardingClient(timeout=FORWARD_TIMEOUT_SECONDS)
        async with open_role(config) as role, trio.open_nursery() as nursery:
            store = role.store
            nursery.start_soon(notifier.watchdog)  # from this loop: a stuck loop stops the pings
            log.info("store started (%s, peers: %s)", role.description, ", ".join(config.peers) or "none, single node")
            tls = await _node_tls(store, config)
            if tls is not None:
                tls.attach(http)  # peers' certificates are verified against the cluster CA(s)
                if config.cluster_secret is not None:
                    nursery.start_soon(tls.follow_rotations, store, config.cluster_secret, config.node_name, config.tls_hosts)
                log.info("TLS on non-loopback listeners%s; cluster CA sha256 %s", " and loopback" if config.tls == "always" else "", tls.fingerprint)
            netmaster = Netmaster(store, config.node_name)  # reads on every node; writes run on the leader's
            kube = role.start_duties(nursery, netmaster)
            info = NodeRecord(
                name=config.node_name,
                raft_address=None if config.follower else config.raft_listen,
                api_url=config.api_url,
                control_ip=config.node_ip,
                vtep_ip=config.vtep_ip or config.node_ip,
                readonly=config.follower,  # not a voter (readers such as netmaster-nodes list voters only)
                version=__version__,
                agent_url=config.agent_url if config.datapath == "ovs" else "",
                kubernetes=config.kubeconfig is not None,
            )
            nursery.start_soon(keep_registered, store, info)
            cache = StateCache(store)  # the typed state every node reader uses
            await nursery.start(cache.run)
            forwarder = LeaderForwarder(store, http, config.cluster_secret)  # the one door to the leader: REST writes and the CNI server's
            datapath = await _start_datapath(nursery, config, store, cache, netmaster, forwarder, tls, info.vtep_ip, stop)
            agent = None if datapath is None else datapath.agent
            # The store summary (endpoints per node, IPAM usage) the metrics and systemd's STATUS=
            # line both read: one cache, so a changed store is summarised once, not once per reader.
            summaries = StoreSummaries(cache)
            access = Authenticator(
                config.cluster_secret, store_lookup(store), loopback_role=Role.VIEWER if config.loopback_access == "viewer" else None
            )
            audit = AuditTrail(store, config.node_name)
            await nursery.start(audit.run)
            server = ApiServer(store, access, audit, forwarder, Metrics(store, agent, summaries, kube), config.contiv_error_compat)
            contexts = api_contexts(
                store,
                cache,
                netmaster,
                http,
                node_name=config.node_name,
                control_ip=config.node_ip,
                secret=config.cluster_secret,
                agent=agent,
                kube=kube,
                tls=tls,
                agent_socket=config.agent_socket_path if agent is not None else None,
            )
            api = create_app(server, contexts, agent=agent, kube=kube, tls=tls)
            status = StatusContext(
                store,
                cache,
                config.node_name,
                config.cluster_secret,
                access,
                agent,
                None if datapath is None else datapath.endpoint_datapath,
                tls,
                None if datapath is None else datapath.bgp_inspect,
                kube,
            )
            register_status_routes(api.quart, status)
            register_import_route(api.quart, ImportContext(store, access, audit))
            register_snapshot_route(api.quart, SnapshotContext(store, access))
            api_stopped = trio.Event()
            api_app = Hardened(api.asgi, {IMPORT_PATH: MAX_IMPORT_BODY_BYTES})
            api_hconfig = _hypercorn_config(config.api_listen, tls if config.listener_tls(config.api_listen) else None)

            async def serve_api(task_status: trio.TaskStatus[list[str]]) -> None:
                try:
                    await serve(api_app, api_hconfig, shutdown_trigger=stop.wait, task_status=task_status)
                finally:
                    api_stopped.set()

            bound = await nursery.start(serve_api)
            socket_bound = await _serve_api_socket(nursery, api_app, api_hconfig, config, stop)
            log.info("API listening on %s", ", ".join([*bound, *socket_bound]))
            nursery.start_soon(_report_status, store, agent, kube, summaries, notifier, config)
            async for signum in signals:
                if signum == signal.SIGHUP:
                    _reload_log_level(reload)
                    continue
                log.info("received %s: shutting down", signal.Signals(signum).name)
                notifier.notify("STOPPING=1", "STATUS=shutting down")
                await role.before_stop()
                stop.set()
                break
            with trio.move_on_after(6):  # hypercorn finishes in-flight requests once `stop` is set
                await api_stopped.wait()
            nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await http.aclose()
    log.info("contivd stopped")


def api_contexts(
    store: NodeStore,
    cache: StateCache,
    netmaster: Netmaster,
    http: ForwardingClient,
    *,
    node_name: str,
    control_ip: str,
    secret: str | None,
    agent: Agent | None = None,
    kube: KubeHealth | None = None,
    tls: ServingTls | None = None,
    agent_socket: Path | None = None,
) -> tuple[object, ...]:
    """One context per handler area of the REST API (contivd/api/handler.py), each with only the
    collaborators its routes use. `agent_socket`: this node's agent API for root, when it runs one."""
    agents = AgentCalls(store, http, node_name, secret, agent_socket)
    plane = LocalControlPlane(netmaster)  # the handlers run on the leader for writes, on any member for reads
    return (
        Objects(plane, agents),
        Plugin(netmaster),
        Cluster(store, control_ip, openapi_document(__version__), agent, kube, tls),
        ClusterAdmin(store, node_name, secret),
        Debug(cache, control_ip, plane, agents),
        Kubernetes(cache, node_name, agent, agents),
        Operators(store),
    )


async def _serve_api_socket(nursery: trio.Nursery, app: Hardened, hconfig: HypercornConfig, config: Config, stop: trio.Event) -> list[str]:
    """The API for root on this node, on its unix socket (no TLS: the kernel vouches for the
    caller); [] when the socket is another live process's: this node keeps serving TCP."""
    path = config.api_socket_path
    try:
        await nursery.start(partial(serve_unix, app, hconfig, path, "--api-socket", shutdown_trigger=stop.wait))
    except (SocketInUseError, OSError) as exc:
        log.error("API socket not served: %s", exc)
        return []
    return [f"unix:{path}"]


async def _report_status(
    store: NodeStore, agent: Agent | None, kube: KubeHealth | None, summaries: StoreSummaries, notifier: Notifier, config: Config
) -> None:
    """READY=1 once the node is usable (API up — the caller starts this after binding —, a
    leader known, the agent's first reconcile done), then keep STATUS= current."""
    async for change in store.leadership_changes():
        if change.leader:
            break
        notifier.notify("STATUS=waiting for a Raft leader (election in progress or no quorum)")
    if agent is not None:
        notifier.notify("STATUS=waiting for the node agent's first reconcile")
        while not agent.statistics().first_sync_done:
            await agent.wait_synced()

    def status() -> str:
        here = summaries.current().endpoints_per_node.get(config.node_name, 0)
        return "STATUS=" + status_line(store.statistics(), agent.statistics() if agent else None, here, kube.view() if kube else None)

    notifier.notify("READY=1", status())
    log.info("ready: %s", status().removeprefix("STATUS="))
    release_freed_memory()
    while True:
        await trio.sleep(STATUS_SECONDS)
        notifier.notify(status())


def status_line(store: StoreStatistics, agent: AgentStatistics | None, endpoints_here: int, kube: KubeStatusView | None = None) -> str:
    """What `systemctl status` shows: role, leader, members, endpoints on this node, last
    reconcile, and (Kubernetes mode, on the leader) how the watch of the API server is doing."""
    parts = [*_store_parts(store), f"{endpoints_here} endpoints on this node"]
    if agent is not None:
        if agent.last_sync_unix:
            when = datetime.fromtimestamp(agent.last_sync_unix, UTC).strftime("%H:%M:%S UTC")
            parts.append(f"last reconcile {when} ({agent.last_sync_seconds * 1000:.0f} ms, {agent.flows} flows)")
        else:
            parts.append("no reconcile yet")
        if not agent.switch_connected:
            parts.append("switch disconnected")
    if kube is not None:
        if kube.watching:
            parts.append(f"kubernetes: {kube.services} services")
        parts.extend(f"kubernetes {kind}: {why}" for kind, why in sorted(kube.problems.items()))
    return "; ".join(parts)


def _store_parts(store: StoreStatistics) -> list[str]:
    """The store's part of the STATUS= line: a voter's Raft view, or how far a follower is behind."""
    if store.role == "store_follower":
        follows = f"follows {store.feed_voter}" if store.feed_voter else "follows no voter"
        lag = f"revision {store.revision}, {store.lag_revisions} behind, last heard {store.lag_seconds:.1f} s ago"
        return [f"follower of the store ({lag})", follows, f"leader {store.leader or 'none'}"]
    role = {"readonly": "read-only member"}.get(store.role, store.role)
    members = f"{len(store.voters)} voters ({len(store.connected_voters) + (store.self_address is not None)} up), {store.readonly_members} read-only"
    return [
        f"{role} (term {store.term})",
        f"leader {store.leader or 'none'}",
        members + (f", {store.followers} followers fed here" if store.followers else ""),
    ]


def _reload_log_level(reload: Callable[[], Config] | None) -> None:
    """SIGHUP: re-read the configuration (same flags, file and environment) and apply its
    log level; other options need a restart."""
    if reload is None:
        return
    try:
        level = reload().log_level
    except ConfigError as exc:
        log.error("SIGHUP: configuration not reloaded: %s", exc)
        return
    logging.getLogger().setLevel(level)
    log.info("SIGHUP: log level is now %s", level)

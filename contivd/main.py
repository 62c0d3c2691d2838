"""Composition root: the one place that builds contivd's services and owns their nursery.

Start order: store member → netmaster → node registration → node agent and CNI server (with
`--datapath ovs`) → REST API. The Raft leader is the
netmaster: when this node gains leadership it creates Contiv's default objects if missing.
SIGTERM or SIGINT stops the API gracefully, then the store (journal flushed, sockets closed).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from raftstore import Store, StoreError, StoreStatistics, open_store

from . import __version__
from .agent.router import BgpRouting
from .agent.service import Agent, AgentSettings, AgentStatistics
from .agent_api import create_agent_app
from .api.app import FORWARD_TIMEOUT_SECONDS, ApiContext, create_app
from .backup.route import SnapshotContext, register_snapshot_route
from .bgp import BgpSpeaker
from .cni_server import CniServer
from .cni_server.orphans import OrphanReaper
from .config import Config, ConfigError
from .http import auth
from .http.control import LeaderRouter, RemoteControlPlane
from .http.forwarder import ForwardingClient
from .http.hardening import MAX_IMPORT_BODY_BYTES, Hardened, listener_timeouts
from .http.local_socket import SocketInUseError, hold_socket, serve_unix
from .http.tokens import Role
from .k8s import KubeHealth, KubernetesWatch, KubeStatusView
from .k8s.modeoff import KubernetesModeOff
from .metrics import StoreSummaries, observe_cni, observe_orphan
from .migrate import IMPORT_PATH, ImportContext, register_import_route
from .model import ModelError
from .netmaster.control import LocalControlPlane
from .netmaster.service import Netmaster
from .nodes import keep_registered
from .sdnotify import Notifier
from .state import NodeRecord, StateCache
from .status.routes import StatusContext, register_status_routes
from .tls.material import TlsFiles, issued_tls_files
from .tls.serving import ServingTls

log = logging.getLogger("contivd")
STATUS_SECONDS = 5.0  # how often the systemd STATUS= line is refreshed
HAND_OVER_SECONDS = 3.0  # longest a stopping leader waits for another voter to take over (systemd allows 15 s)


async def _leader_duties(store: Store, netmaster: Netmaster, node_name: str) -> None:
    """Log leadership changes; as the new leader, make sure Contiv's defaults exist."""
    async for change in store.leadership_changes():
        if change.is_leader:
            log.info("node %s is the leader (netmaster) in term %d", node_name, change.term)
            while store.is_leader():
                try:
                    await netmaster.ensure_defaults()
                    break
                except (StoreError, ModelError) as exc:
                    log.warning("creating default objects failed, retrying: %s", exc)
                    await trio.sleep(1)
        elif change.leader:
            log.info("leader is %s (term %d)", change.leader, change.term)
        else:
            log.warning("no leader: election in progress or no quorum")


def _start_kubernetes_watch(nursery: trio.Nursery, store: Store, netmaster: Netmaster, config: Config) -> KubeHealth | None:
    """Kubernetes mode (--kubeconfig): the leader, and only it, keeps the store's Kubernetes
    services equal to the API server's, and endpoints following their pods' labels. The
    health object says how the watch is doing. Without --kubeconfig the leader removes the
    Kubernetes records once no live node is in Kubernetes mode (None is returned)."""
    if config.kubeconfig is None:  # mode off: the leader removes what an earlier watch wrote (contivd.k8s.modeoff)
        nursery.start_soon(KubernetesModeOff(store).run)
        return None
    health = KubeHealth()
    nursery.start_soon(KubernetesWatch(store, config.kubeconfig, config.service_cidr, health, netmaster).run)
    log.info("Kubernetes mode: the Raft leader watches Services, EndpointSlices and Pods (service CIDR %s)", config.service_cidr)
    return health


async def _node_tls(store: Store, config: Config) -> ServingTls | None:
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
    listener_timeouts(hconfig)
    return hconfig


async def run(config: Config, reload: Callable[[], Config] | None = None) -> None:
    """Run the node until SIGTERM or SIGINT, then shut down cleanly; SIGHUP calls `reload`."""
    log.info("contivd %s starting: node %s, data dir %s", __version__, config.node_name, config.data_dir)
    stop = trio.Event()
    notifier = Notifier()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        http = ForwardingClient(timeout=FORWARD_TIMEOUT_SECONDS)
        async with open_store(config.store_config()) as store, trio.open_nursery() as nursery:
            nursery.start_soon(notifier.watchdog)  # from this loop: a stuck loop stops the pings
            role = "read-only member" if config.readonly else f"raft on {config.raft_listen}"
            log.info("store started (%s, peers: %s)", role, ", ".join(config.peers) or "none, single node")
            tls = await _node_tls(store, config)
            if tls is not None:
                tls.attach(http)  # peers' certificates are verified against the cluster CA(s)
                if config.cluster_secret is not None:
                    nursery.start_soon(tls.follow_rotations, store, config.cluster_secret, config.node_name, config.tls_hosts)
                log.info("TLS on non-loopback listeners%s; cluster CA sha256 %s", " and loopback" if config.tls == "always" else "", tls.fingerprint)
            netmaster = Netmaster(store, config.node_name)
            nursery.start_soon(_leader_duties, store, netmaster, config.node_name)
            kube = _start_kubernetes_watch(nursery, store, netmaster, config)
            info = NodeRecord(
                name=config.node_name,
                raft_address=None if config.readonly else config.raft_listen,
                api_url=config.api_url,
                control_ip=config.node_ip,
                vtep_ip=config.vtep_ip or config.node_ip,
                readonly=config.readonly,
                version=__version__,
                agent_url=config.agent_url if config.datapath == "ovs" else "",
                kubernetes=config.kubeconfig is not None,
            )
            nursery.start_soon(keep_registered, store, info)
            cache = StateCache(store)  # the typed state every node reader uses
            await nursery.start(cache.run)
            agent = None
            bgp_inspect: Callable[[], Mapping[str, Any]] | None = None  # the node's BGP speaker, which runs with the agent
            if config.datapath == "ovs":
                if isinstance(config.openflow_address, tuple):
                    log.warning("OpenFlow controller on TCP %s: any local process can connect to it as the switch", config.openflow_listen)
                settings = AgentSettings(
                    config.node_name,
                    config.data_dir,
                    info.vtep_ip,
                    config.ovs,
                    config.openflow_address,
                    net_mode="vlan" if config.net_mode == "vlan" else "vxlan",
                    vlan_uplinks=config.vlan_uplinks,
                    routing=config.fwd_mode == "routing",
                    audit_seconds=config.audit_interval,
                )
                agent = Agent(cache, settings, hold_socket)
                await nursery.start(agent.run)
                routed = agent.set_bgp_routing if config.fwd_mode == "routing" else None
                on_routes = None if routed is None else (lambda router_ip, learned: routed(BgpRouting(router_ip, learned)))
                bgp = BgpSpeaker(cache, config.node_name, config.data_dir / "bgp", on_routes=on_routes)  # idle until a Bgp object names this node
                await nursery.start(bgp.run)
                bgp_inspect = bgp.inspect
                agent_app = Hardened(
                    create_agent_app(agent, auth.Authenticator(config.cluster_secret, auth.store_lookup(store)), str(config.agent_socket_path), bgp)
                )
                agent_bound = await nursery.start(
                    partial(
                        serve,
                        agent_app,
                        _hypercorn_config(config.agent_listen, tls if config.listener_tls(config.agent_listen) else None),
                        shutdown_trigger=stop.wait,
                    )
                )
                agent_socket = config.agent_socket_path  # root on this node; TCP answers the netmaster's signed calls only
                await nursery.start(
                    partial(
                        serve_unix,
                        agent_app,
                        _hypercorn_config(config.agent_listen, None),
                        agent_socket,
                        "--agent-socket",
                        shutdown_trigger=stop.wait,
                    )
                )
                log.info("agent API listening on %s and %s (root)", ", ".join(agent_bound), agent_socket)
            context = ApiContext(
                store,
                cache,
                netmaster,
                config.node_name,
                config.node_ip,
                config.cluster_secret,
                http,
                config.contiv_error_compat,
                agent,
                kube,
                tls=tls,
                loopback_role=Role.VIEWER if config.loopback_access == "viewer" else None,
                agent_socket=config.agent_socket_path if agent is not None else None,
            )
            endpoint_datapath: Callable[[], Mapping[str, list[Any]]] | None = None  # the orphan scan's view, with a CNI server
            if agent is not None:  # pods need the datapath: the CNI server runs with the agent
                control = LeaderRouter(store, LocalControlPlane(netmaster), RemoteControlPlane(store, http, config.cluster_secret, config.node_name))
                cni_server = CniServer(
                    control,
                    cache,
                    agent,
                    config.node_name,
                    config.cni_socket_path,
                    config.kubeconfig,
                    observe=observe_cni,
                    service_cidr=str(config.service_cidr) if config.kubeconfig else None,  # Kubernetes Services exist in Kubernetes mode only
                )
                try:
                    await nursery.start(cni_server.run)
                except SocketInUseError as exc:  # keep serving the pods this node has; the live socket's owner answers CNI
                    log.error("CNI server not started: %s", exc)
                else:  # the socket's owner deletes this node's orphaned endpoints
                    reaper = OrphanReaper(cni_server, config.orphan_grace, on_reclaimed=observe_orphan)
                    await nursery.start(reaper.run)
                    endpoint_datapath = reaper.view
            await nursery.start(context.audit.run)
            api = create_app(context)
            status = StatusContext(
                store, cache, config.node_name, config.cluster_secret, context.access, agent, endpoint_datapath, tls, bgp_inspect, kube
            )
            register_status_routes(api.quart, status)
            register_import_route(api.quart, ImportContext(store, context.access, context.audit))
            register_snapshot_route(api.quart, SnapshotContext(store, context.access))
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
            nursery.start_soon(_report_status, store, agent, kube, context.summaries, notifier, config)
            async for signum in signals:
                if signum == signal.SIGHUP:
                    _reload_log_level(reload)
                    continue
                log.info("received %s: shutting down", signal.Signals(signum).name)
                notifier.notify("STOPPING=1", "STATUS=shutting down")
                await _hand_over_leadership(store)
                stop.set()
                break
            with trio.move_on_after(6):  # hypercorn finishes in-flight requests once `stop` is set
                await api_stopped.wait()
            nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await http.aclose()
    log.info("contivd stopped")


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


async def _hand_over_leadership(store: Store) -> None:
    """A leader that stops on purpose (a restart, a rolling upgrade) first hands the leadership
    to the most caught-up voter, as etcd does: the others lead within a round trip, instead of
    an election timeout after this node went silent, during which every write answers 503.
    Writes waiting here when it moves answer 503 at once ("retrying is safe"). Bounded: a
    stop never waits longer than HAND_OVER_SECONDS for it."""
    if not store.is_leader() or not store.statistics().connected_voters:
        return
    with trio.move_on_after(HAND_OVER_SECONDS):
        try:
            leader = await store.transfer_leadership()
        except StoreError as exc:  # refused: no voter holds the whole log yet (writes in flight)
            log.warning("stopping without handing the Raft leadership over: %s", exc)
            return
        log.info("handed the Raft leadership to %s before stopping", leader)
        return
    log.warning("stopping without handing the Raft leadership over: no voter took it within %gs", HAND_OVER_SECONDS)


async def _report_status(
    store: Store, agent: Agent | None, kube: KubeHealth | None, summaries: StoreSummaries, notifier: Notifier, config: Config
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
    while True:
        await trio.sleep(STATUS_SECONDS)
        notifier.notify(status())


def status_line(store: StoreStatistics, agent: AgentStatistics | None, endpoints_here: int, kube: KubeStatusView | None = None) -> str:
    """What `systemctl status` shows: role, leader, members, endpoints on this node, last
    reconcile, and (Kubernetes mode, on the leader) how the watch of the API server is doing."""
    role = {"readonly": "read-only member"}.get(store.role, store.role)
    parts = [
        f"{role} (term {store.term})",
        f"leader {store.leader or 'none'}",
        f"{len(store.voters)} voters ({len(store.connected_voters) + (store.self_address is not None)} up), {store.readonly_members} read-only",
        f"{endpoints_here} endpoints on this node",
    ]
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

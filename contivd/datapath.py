"""`--datapath ovs`: the node agent, its BGP speaker, the agent API, the CNI server and the
orphan reaper, started together (the CNI server needs the agent). Imported only with that
datapath, so a control-plane-only node (`--datapath none`) never loads OVS, OpenFlow,
pyroute2 or the CNI server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from hypercorn.trio import serve

from .agent.router import BgpRouting
from .agent.service import Agent, AgentSettings
from .agent_api import create_agent_app
from .bgp import BgpSpeaker
from .cni_server import CniServer
from .cni_server.orphans import OrphanReaper
from .config import Config
from .http import auth
from .http.control import LeaderRouter, RemoteControlPlane
from .http.hardening import Hardened
from .http.leader_forwarder import LeaderForwarder
from .http.local_socket import SocketInUseError, hold_socket, serve_unix
from .metrics import observe_cni, observe_orphan
from .netmaster.control import LocalControlPlane
from .netmaster.service import Netmaster
from .state import StateCache
from .tls.serving import ServingTls

if TYPE_CHECKING:
    from hypercorn.config import Config as HypercornConfig

    from .nodes import NodeStore

log = logging.getLogger("contivd")


@dataclass(frozen=True)
class Datapath:
    agent: Agent
    bgp_inspect: Callable[[], Mapping[str, Any]]  # the node's BGP speaker
    endpoint_datapath: Callable[[], Mapping[str, list[Any]]] | None  # the orphan scan's view; None without a CNI server


@dataclass(frozen=True)
class DatapathContext:
    """What the datapath takes from the composition root."""

    config: Config
    store: NodeStore
    cache: StateCache
    netmaster: Netmaster
    forwarder: LeaderForwarder  # the one door to the leader, shared with the REST API
    tls: ServingTls | None
    vtep_ip: str
    listener: Callable[[str, ServingTls | None], HypercornConfig]  # one listener's hypercorn settings
    stop: trio.Event


async def start_ovs_datapath(nursery: trio.Nursery, ctx: DatapathContext) -> Datapath:
    config = ctx.config
    if isinstance(config.openflow_address, tuple):
        log.warning("OpenFlow controller on TCP %s: any local process can connect to it as the switch", config.openflow_listen)
    settings = AgentSettings(
        config.node_name,
        config.data_dir,
        ctx.vtep_ip,
        config.ovs,
        config.openflow_address,
        net_mode="vlan" if config.net_mode == "vlan" else "vxlan",
        vlan_uplinks=config.vlan_uplinks,
        routing=config.fwd_mode == "routing",
        audit_seconds=config.audit_interval,
    )
    agent = Agent(ctx.cache, settings, hold_socket)
    await nursery.start(agent.run)
    routed = agent.set_bgp_routing if config.fwd_mode == "routing" else None
    on_routes = None if routed is None else (lambda router_ip, learned: routed(BgpRouting(router_ip, learned)))
    bgp = BgpSpeaker(ctx.cache, config.node_name, config.data_dir / "bgp", on_routes=on_routes)  # idle until a Bgp object names this node
    await nursery.start(bgp.run)
    agent_app = Hardened(
        create_agent_app(agent, auth.Authenticator(config.cluster_secret, auth.store_lookup(ctx.store)), str(config.agent_socket_path), bgp)
    )
    agent_tls = ctx.tls if config.listener_tls(config.agent_listen) else None
    agent_bound = await nursery.start(partial(serve, agent_app, ctx.listener(config.agent_listen, agent_tls), shutdown_trigger=ctx.stop.wait))
    agent_socket = config.agent_socket_path  # root on this node; TCP answers the netmaster's signed calls only
    await nursery.start(
        partial(serve_unix, agent_app, ctx.listener(config.agent_listen, None), agent_socket, "--agent-socket", shutdown_trigger=ctx.stop.wait)
    )
    log.info("agent API listening on %s and %s (root)", ", ".join(agent_bound), agent_socket)
    return Datapath(agent, bgp.inspect, await _start_cni(nursery, ctx, agent))


async def _start_cni(nursery: trio.Nursery, ctx: DatapathContext, agent: Agent) -> Callable[[], Mapping[str, list[Any]]] | None:
    """Pods need the datapath: the CNI server runs with the agent. Its ADD/DEL run on the
    leader's netmaster, here or forwarded (a follower's always are)."""
    config = ctx.config
    remote = RemoteControlPlane(ctx.forwarder, config.node_name)
    control = LeaderRouter(ctx.store, LocalControlPlane(ctx.netmaster), remote)
    cni_server = CniServer(
        control,
        ctx.cache,
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
        return None
    reaper = OrphanReaper(cni_server, config.orphan_grace, on_reclaimed=observe_orphan)  # the socket's owner deletes this node's orphaned endpoints
    await nursery.start(reaper.run)
    return reaper.view

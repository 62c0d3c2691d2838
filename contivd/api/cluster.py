"""The routes about this node and its cluster: `/version`, `/info`, the OpenAPI document, Raft
voters and the cluster CA's rotation.

Two contexts: `Cluster` for what is read (this node's parts and the store's statistics) and
`ClusterAdmin` for the admin writes, which run on the leader (membership.py, ca_rotation.py
do the work). Not responsible for: readiness and metrics (health.py, in front of the app).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..http.hardening import parse_json_limited
from ..nodes import leader_api_url, registered_nodes
from . import ca_rotation, membership
from .handler import AtRevision, handles

if TYPE_CHECKING:  # annotations only: a follower of the store, or a node without the OVS datapath, loads none of these
    from ..agent.service import Agent
    from ..k8s.status import KubeHealth
    from ..nodes import NodeStore
    from ..tls.serving import ServingTls


@dataclass(frozen=True)
class Cluster:
    """What `/info` reports besides the store: this node's address and optional parts."""

    store: NodeStore
    control_ip: str
    openapi: Mapping[str, object]  # the document, generated from the route table once at start
    agent: Agent | None = None  # None when the node runs without a datapath (--datapath none)
    kube: KubeHealth | None = None  # Kubernetes mode (--kubeconfig): how the leader's watch is doing
    tls: ServingTls | None = None  # the node's TLS (the CAs its certificate chains to); None: plain HTTP


@dataclass(frozen=True)
class ClusterAdmin:
    """The voters' and the CA's writers: the store, and this node's name and secret (the new CA's key is sealed with it)."""

    store: NodeStore
    node_name: str
    secret: str | None


@handles(Cluster)
async def version(cluster: Cluster, body: bytes) -> Any:
    return {"GitCommit": "", "Version": __version__, "BuildTime": ""}


@handles(Cluster)
async def openapi(cluster: Cluster, body: bytes) -> Any:
    return cluster.openapi


@handles(Cluster)
async def info(cluster: Cluster, body: bytes) -> Any:
    store = cluster.store
    stats = store.statistics()
    nodes = registered_nodes(store)
    return {
        "local-ip": cluster.control_ip,
        "leader-ip": leader_api_url(store) or stats.leader or "",
        "current-state": "leader" if stats.role == "leader" else "follower",
        "netplugin-nodes": [n.control_ip for n in nodes],
        "netmaster-nodes": [n.control_ip for n in nodes if not n.readonly],
        "cluster": asdict(stats),
        "nodes": [n.to_json() for n in nodes],
        "agent": asdict(cluster.agent.statistics()) if cluster.agent is not None else None,
        "kubernetes": asdict(cluster.kube.view()) if cluster.kube is not None else None,
        "tls": {"caFingerprint": cluster.tls.fingerprint} if cluster.tls else None,
    }


@handles(ClusterAdmin)
async def add_voter(admin: ClusterAdmin, body: bytes, address: str) -> Any:
    return AtRevision(*await membership.add_voter(admin.store, address))


@handles(ClusterAdmin)
async def remove_voter(admin: ClusterAdmin, body: bytes, address: str) -> Any:
    return AtRevision(*await membership.remove_voter(admin.store, address))


@handles(ClusterAdmin)
async def rotate_ca(admin: ClusterAdmin, body: bytes) -> Any:
    request = parse_json_limited(body) if body.strip() else None
    return AtRevision(*await ca_rotation.rotate_ca(admin.store, admin.secret, admin.node_name, request))

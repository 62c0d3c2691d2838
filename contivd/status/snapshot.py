"""The node's state snapshot and node reports → the status page's model, as pure functions.

The page model is plain JSON the browser renders as it is: no business logic runs in the
browser. Two parts change at different rates, so they are built separately: the *store part*
(networks, groups, endpoints, policy) is built from the node's typed StateSnapshot, changes
only with the store and is cached per snapshot revision by the caller; the *cluster part*
(members, health, agents, BGP peerings) changes with time and is rebuilt from each node's
report (`node_report`, served by every node at /status/api/node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from ipaddress import IPv4Network
from typing import TYPE_CHECKING, Any, TypeVar

from raftstore import StoreStatistics

from ..bgp import bgp_oper
from ..k8s.listing import service_rows
from ..state import EndpointGroupState, NodeRecord, StateSnapshot
from ..state.audit import AuditEntry
from ..state.records import Labels
from ..state.usage import address_usage, groups_by_network
from .policy_matrix import GroupRef, policy_matrix

if TYPE_CHECKING:  # annotations only: a follower of the store, or a node without the OVS datapath, loads none of these
    from ..agent.service import AgentStatistics
    from ..k8s.status import KubeStatusView

# "id": the endpoint's full id, which keys the cluster part's `datapath` (not shown as a column).
ENDPOINT_COLUMNS = ("name", "container", "ip", "mac", "node", "network", "group", "labels", "id")
HEALTH_ORDER = ("ok", "degraded", "unknown", "down")  # a tunnel is as healthy as its worse end
T = TypeVar("T")


def _qualified(tenant: str, name: str) -> str:
    """Names as the page shows them: the default tenant is implied."""
    return name if tenant == "default" else f"{tenant}/{name}"


def _labels(labels: Labels) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels)


def _by_id(table: Mapping[str, T]) -> list[T]:
    return [table[key] for key in sorted(table)]


def _policies(snapshot: StateSnapshot, group: EndpointGroupState) -> list[str]:
    """The policies attached to a group's configuration object (contivd.model's shape)."""
    obj = snapshot.object("endpointGroup", f"{group.tenant_name}:{group.group_name}") or {}
    return list(obj.get("policies") or [])


def store_model(snapshot: StateSnapshot) -> dict[str, Any]:
    """Networks, groups, endpoints, policy matrices and services (Contiv's and Kubernetes') of one snapshot of the store."""
    networks = _by_id(snapshot.networks)
    groups = _by_id(snapshot.groups)
    groups_of = groups_by_network(groups)
    subnets = {net.id: IPv4Network(net.subnet) for net in networks}

    network_rows = []
    for net in networks:
        allocated, total = address_usage(net, groups_of[net.id])
        network_rows.append(
            {
                "name": _qualified(net.tenant, net.network_name),
                "tenant": net.tenant,
                "subnet": net.subnet,
                "gateway": net.gateway,
                "encap": net.pkt_tag_type,
                "tag": net.pkt_tag,
                "allocated": allocated,
                "total": total,
                "endpoints": net.ep_count,
                "groups": sorted(g.group_name for g in groups_of[net.id]),
            }
        )

    group_rows = [
        {
            "name": _qualified(group.tenant_name, group.group_name),
            "network": _qualified(group.tenant_name, group.network_name),
            "id": group.endpoint_group_id,
            "pool": group.ip_pool,
            "policies": _policies(snapshot, group),
            "endpoints": group.ep_count,
        }
        for group in groups
    ]

    rows = [
        [
            ep.endpoint_id,
            ep.ep_common_name or ep.container_id,
            ep.ip_address,
            ep.mac_address,
            ep.homing_host,
            _qualified(ep.tenant, ep.network),
            _qualified(ep.tenant, ep.service_name) if ep.service_name else "",
            _labels(ep.labels or ()),
            ep.id,
        ]
        for ep in _by_id(snapshot.endpoints)
    ]

    rules = _by_id(snapshot.rules)
    matrices = []
    for tenant in sorted({g.tenant_name for g in groups}):
        tenant_groups = [g for g in groups if g.tenant_name == tenant]
        refs = [GroupRef(_qualified(tenant, g.group_name), g.endpoint_group_id, subnets.get(g.net_id)) for g in tenant_groups]
        named = {_qualified(tenant, n.network_name): subnets[n.id] for n in networks if n.tenant == tenant}
        for ref, group in zip(refs, tenant_groups, strict=True):
            if _policies(snapshot, group) or any(
                r.dst_endpoint_group == ref.group_id and r.src_port == 0 for r in rules
            ):  # policies of its own or others' outgoing rules
                matrices.append(policy_matrix(ref, refs, named, rules).to_json())

    return {
        "networks": network_rows,
        "groups": group_rows,
        "endpoints": {"columns": list(ENDPOINT_COLUMNS), "rows": rows},
        "policy": matrices,
        "services": service_rows(snapshot),
        "vlanUplinks": any(net.pkt_tag_type == "vlan" for net in networks),
    }


def bgp_model(inspect: Mapping[str, Any]) -> dict[str, Any] | None:
    """A node's BGP peering as the page shows it, from its speaker's `/inspect/bgp` answer
    (Contiv's shape, contivd.bgp.peering.inspect_answer): the neighbor, and the `Oper` fields
    Contiv's `Bgp` inspect gave (bgp_oper), plus `error` when the node's `Bgp` object is
    unusable (a session still running from the previous object keeps its row). None when no
    `Bgp` object names the node."""
    peers = inspect.get("Peers") or []
    error = str(inspect.get("Error") or "")
    if not peers and not error:
        return None
    config = (peers[0].get("Config") or {}) if peers else {}
    oper = bgp_oper(inspect)
    return {
        "neighbor": str(config.get("NeighborAddress", "")),
        "neighborAs": config.get("PeerAs"),
        "localAs": config.get("LocalAs"),
        "neighborStatus": oper.get("neighborStatus", ""),
        "adminStatus": oper.get("adminStatus", ""),
        "numRoutes": oper.get("numRoutes", 0),
        "routes": oper.get("routes", []),
        "error": error,
    }


def kube_model(view: KubeStatusView, now: float) -> dict[str, Any]:
    """The node's Kubernetes watch as the page shows it: whether it watches (the leader), why
    it cannot (a kubeconfig problem), and each kind's state, resourceVersion, its age, relists
    and last error with its time."""
    kinds = [
        {
            "kind": kind,
            "state": state.phase,
            "since": state.since,
            "resourceVersion": state.resource_version,
            "versionAge": round(now - state.version_seen, 1) if state.version_seen else None,
            "relists": state.relists,
            "lastError": state.last_error,
            "errorSince": state.error_since,
            "ready": state.ready_problem(now) is None,
        }
        for kind, state in sorted(view.kinds.items())
    ]
    problems = {what: why for what, why in view.problems.items() if what not in view.kinds}
    return {"watching": view.watching, "services": view.services, "problems": problems, "kinds": kinds}


def node_report(
    name: str,
    store: StoreStatistics,
    agent: AgentStatistics | None,
    now: float,
    datapath: Mapping[str, list[Any]] | None = None,
    bgp: Mapping[str, Any] | None = None,
    kube: KubeStatusView | None = None,
) -> dict[str, Any]:
    """What one node says about itself (served at /status/api/node, fetched by peers).
    `datapath`: its local endpoints' datapath states (endpoint id → [text, healthy]);
    `bgp`: its speaker's `/inspect/bgp` answer (None: no speaker, i.e. no datapath here);
    `kube`: its Kubernetes watch (None: not in Kubernetes mode)."""
    return {
        "name": name,
        "time": now,
        "store": asdict(store),
        "agent": None if agent is None else asdict(agent),
        "datapath": dict(datapath or {}),
        "bgp": None if bgp is None else bgp_model(bgp),
        "kubernetes": None if kube is None else kube_model(kube, now),
    }


def node_health(report: Mapping[str, Any] | None, raft_connected: bool | None) -> tuple[str, list[str]]:
    """`ok`, `degraded`, `unknown` or `down`, and why. `raft_connected`: whether this member has
    a Raft connection to the node (None: not a voter we track, e.g. a read-only member)."""
    if report is None:
        if raft_connected is False:
            return "down", ["no Raft connection and no status answer"]
        return "unknown", ["its status could not be fetched"]
    reasons = []
    store = report["store"]
    if not store.get("leader"):
        reasons.append("knows no leader")
    elif not store.get("has_quorum") and store.get("role") == "leader":
        reasons.append("leader without quorum")
    agent = report.get("agent")
    if agent is not None:
        if not agent["switch_connected"]:
            reasons.append("OVS not connected")
        elif not agent["first_sync_done"]:
            reasons.append("first reconcile pending")
        if agent["last_error"]:
            reasons.append(f"last sync failed: {agent['last_error']}")
        if agent["problems"]:
            reasons.append(f"{len(agent['problems'])} object(s) skipped")
    return ("degraded" if reasons else "ok"), reasons


_ROLE_NAMES = {"store_follower": "store follower"}  # a follower of the store (not a Raft member)


def store_position(store: Mapping[str, Any]) -> str:
    """A member's place in the store: a follower's revision, lag and the voter it follows; a
    voter's revision and how many followers it feeds ("" without a report)."""
    if "revision" not in store:
        return ""
    if store.get("role") == "store_follower":
        voter = store.get("feed_voter") or "no voter"
        return f"rev {store['revision']}, {store.get('lag_revisions', 0)} behind ({float(store.get('lag_seconds') or 0):.1f} s), via {voter}"
    followers = store.get("followers") or 0
    return f"rev {store['revision']}" + (f", feeds {followers} followers" if followers else "")


def cluster_model(
    local: StoreStatistics, self_name: str, nodes: Sequence[NodeRecord], reports: Mapping[str, Mapping[str, Any] | None]
) -> dict[str, Any]:
    """Members with role, term, commit index, health; the leader; the tunnel mesh.

    `reports`: node name → its node_report (None: it did not answer). Voters that have not
    registered (or whose registration lease expired) are listed by Raft address, down.
    """
    members: list[dict[str, Any]] = []
    registered = {n.raft_address for n in nodes if n.raft_address}
    down_since = dict(local.unreachable_voters)
    names = {n.raft_address: n.name for n in nodes if n.raft_address}
    leader_name = local.leader or ""
    for node in nodes:
        report = reports.get(node.name)
        tracked = local.role != "store_follower" and node.raft_address in local.voters and node.name != self_name  # a follower has no Raft links
        connected = (node.raft_address in local.connected_voters) if tracked else (True if node.name == self_name else None)
        health, reasons = node_health(report, connected)
        store = (report or {}).get("store") or {}
        is_leader = node.raft_address is not None and node.raft_address == local.leader
        if is_leader:
            leader_name = node.name
        members.append(
            {
                "name": node.name,
                "self": node.name == self_name,
                "leader": is_leader,
                "role": _ROLE_NAMES.get(str(store.get("role")), store.get("role"))
                or ("leader" if is_leader else "store follower" if node.readonly else "voter"),  # without a report: what this member knows
                "store": store_position(store),
                "term": store.get("term"),
                "commitIndex": store.get("commit_index"),
                "lastApplied": store.get("last_applied"),
                "raftAddress": node.raft_address or "",
                "apiUrl": node.api_url,
                "vtepIp": node.vtep_ip,
                "version": node.version,
                "health": health,
                "reasons": reasons,
                "agent": (report or {}).get("agent"),
                "bgp": (report or {}).get("bgp"),  # bgp_model of its speaker; None: no Bgp object names it (or no report)
                "kubernetes": (report or {}).get("kubernetes"),  # kube_model of its watch; None: not in Kubernetes mode (or no report)
                "unreachableSince": down_since.get(node.raft_address or ""),  # no Raft link from this node since (unix time)
            }
        )
    for address in local.voters:
        if address not in registered:
            connected = address in local.connected_voters
            members.append(
                {
                    "name": address,
                    "self": False,
                    "leader": address == local.leader,
                    "role": "leader" if address == local.leader else "voter",
                    "term": None,
                    "commitIndex": None,
                    "lastApplied": None,
                    "raftAddress": address,
                    "apiUrl": "",
                    "vtepIp": "",
                    "version": "",
                    "health": "unknown" if connected else "down",
                    "reasons": ["not registered (no node record)"],
                    "agent": None,
                    "bgp": None,
                    "kubernetes": None,
                    "unreachableSince": down_since.get(address),
                }
            )
    datapath = {endpoint: state for report in reports.values() if report for endpoint, state in (report.get("datapath") or {}).items()}
    healths: dict[str, str] = {m["name"]: m["health"] for m in members}
    meshed = sorted((m for m in members if m["vtepIp"]), key=lambda m: m["name"])
    tunnels = [
        {"a": a["name"], "b": b["name"], "health": max(healths[a["name"]], healths[b["name"]], key=HEALTH_ORDER.index)}
        for i, a in enumerate(meshed)
        for b in meshed[i + 1 :]
        if a["vtepIp"] != b["vtepIp"]
    ]
    return {
        "self": self_name,
        "leader": leader_name,
        "term": local.term,
        "hasQuorum": local.has_quorum,
        "canCommit": not local.commit_blockers,
        "commitBlockers": list(local.commit_blockers),  # why a write through this node cannot commit now
        "unreachable": [{"name": names.get(a, a), "raftAddress": a, "since": since} for a, since in local.unreachable_voters],
        "revision": local.revision,
        "members": members,
        "tunnels": tunnels,
        "datapath": datapath,  # endpoint id → [state, healthy], from the reports of the endpoints' nodes
    }


WRITES_SHOWN = 20


def recent_writes(entries: Sequence[AuditEntry], count: int = WRITES_SHOWN) -> list[dict[str, Any]]:
    """The page's "last writes": the newest `count` audit entries, newest first."""
    return [entry.to_json() for entry in reversed(entries[-count:])]

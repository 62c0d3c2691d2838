"""The node agent's REST API (Contiv netplugin's port 9090 routes) on `--agent-listen`.

The netmaster's `/debug/epcleanup` calls `DELETE /debug/reclaimEndpoint/<id>` here on the
endpoint's node; operators read `/inspect/driver`, `/svcstats`, `/netpolstats` (NetworkPolicy
rule hits per rule id) and `/rulestats` (Contiv's compiled rules' hits); the API asks `/trace/<source|destination>/...`
(one packet through this node's bridge, `ctl trace`). `/inspect/bgp` answers the node's BGP speaker (contivd/bgp);
contivd runs no DNS server, so `/inspect/nameserver` answers Contiv's shape with nothing in it.

Who may call (`agent_caller_refused`): on TCP only the netmaster's signed calls (a node signature,
role node); no operator token, whatever its role, and no loopback caller, because a loopback port is
open to every local user and hostNetwork pod. Operators go through the API, which signs its calls
here (`ctl trace`, `/policy/hits`, epcleanup); root on the node uses the agent socket (`--agent-socket`,
served by contivd.http.local_socket, whose callers arrive as `unix-uid:0`).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict
from typing import Any, cast

from quart import Response, request
from quart_trio import QuartTrio

from openflow import TABLES, OpenFlowError
from openflow.fields import ROUND_MASK, Category, cookie

from .agent.datapath import BridgeDatapath
from .agent.inputs import KUBE_SERVICE_PREFIX
from .agent.netpolstats import RuleHits, contiv_rule_hits, netpol_hits
from .agent.service import Agent
from .agent.trace import TraceError
from .bgp import BgpSpeaker
from .http import auth
from .http.errors import ForbiddenError, UnauthorizedError
from .http.local_socket import peer_uid
from .http.tokens import Role
from .ovs import OvsError
from .state import StateSnapshot

_U64 = (1 << 64) - 1


def _json(value: Any, status: int = 200) -> Response:
    return Response(json.dumps(value) + "\n", status=status, content_type="application/json")


def bridge_state(datapath: BridgeDatapath) -> dict[str, Any]:
    """One bridge as `/inspect/driver` shows it."""
    pushed = datapath.pusher.statistics()
    last = datapath.last
    return {
        "bridge": datapath.bridge.name,
        "datapathId": f"{datapath.datapath_id:016x}",
        "connected": datapath.connected,
        "round": pushed.round,
        "flows": pushed.flows,
        "groups": pushed.groups,
        "pushes": pushed.pushes,
        "fullPushes": pushed.full_pushes,
        "ports": last.ports if last else 0,
        "tunnels": last.tunnels if last else 0,
        "uplinks": list(datapath.uplink_names),
        "problems": list(last.problems) if last else [],
    }


def driver_state(agent: Agent) -> dict[str, Any]:
    stats = agent.statistics()
    return {
        **{encap: bridge_state(datapath) for encap, datapath in agent.datapaths.items()},
        "node": agent.settings.node_name,
        "syncs": stats.syncs,
        "syncFailures": stats.sync_failures,
        "lastSync": stats.last_sync_unix,
        "lastSyncSeconds": stats.last_sync_seconds,
        "lastError": stats.last_error,
    }


async def service_stats(agent: Agent) -> dict[str, Any]:
    """Packets and bytes through each service's VIP flows, summed over this node's bridges:
    Contiv's serviceLBs by name, Kubernetes Services as `k8s:<namespace>/<name>` (marked).
    The affinity path's endpoint_dnat flows are left out: they see the same new connections."""
    snapshot = agent.cache.catch_up()
    services = [(name, False) for name, lb in snapshot.services.items() if lb.ip_address]
    services += [(KUBE_SERVICE_PREFIX + name, True) for name in snapshot.k8s_services]
    repeated = TABLES["endpoint_dnat"].id
    stats: dict[str, Any] = {}
    for service, kubernetes in services:
        totals: dict[str, Any] = {"flows": 0, "packets": 0, "bytes": 0}
        for datapath in agent.datapaths.values():
            connection = datapath.pusher.connection
            if connection is None or connection.closed:
                continue
            for record in await connection.dump_flows(cookie=cookie(Category.SERVICE, service), cookie_mask=_U64 & ~ROUND_MASK):
                totals["flows"] += 1
                if record.table != repeated:
                    totals["packets"] += record.packet_count
                    totals["bytes"] += record.byte_count
        stats[service] = {**totals, "kubernetes": True} if kubernetes else totals
    return stats


async def trace_half(agent: Agent, side: str, src: str, dst: str, proto: int, port: int) -> Response:
    """One half of `ctl trace` on this node: `source` (the packet leaving a local pod) or
    `destination` (arriving from the source's node for a local pod); `skipped` when this node
    holds no such pod, 503 when OVS could not trace."""
    if side not in ("source", "destination"):
        return _json({"error": f"trace side {side!r} is not source or destination"}, 400)
    try:
        src_ip, dst_ip = int(ipaddress.IPv4Address(src)), int(ipaddress.IPv4Address(dst))
    except ValueError as exc:
        return _json({"error": f"trace: {exc}"}, 400)
    try:
        traced = await agent.trace(src_ip, dst_ip, proto, port, arrival=side == "destination")
    except TraceError as exc:
        return _json({"error": str(exc)}, 503)
    if traced is None:
        pod = src if side == "source" else dst
        return _json({"skipped": f"{pod} is not a pod on node {agent.settings.node_name}"})
    return _json(asdict(traced))


def agent_caller_refused(
    access: auth.Authenticator, method: str, path: str, body: bytes, headers: dict[str, str], remote: str | None, socket_path: str
) -> UnauthorizedError | None:
    """Why a caller may not use the agent API, or None: root on the agent socket and the
    netmaster's signed calls pass. Checked here rather than by the Authenticator's roles, which
    make loopback and unix-socket callers principals of the main API's roles (never node)."""
    if peer_uid(remote) == 0:
        return None
    if auth.SIGNATURE_HEADER.lower() in headers:
        try:
            access.check(method, path, body, headers, remote, Role.NODE)
        except (UnauthorizedError, ForbiddenError) as exc:
            return UnauthorizedError(str(exc))
        return None
    verb = "" if method == "GET" else f"-X {method} "
    return UnauthorizedError(
        "the node agent's API answers the netmaster's signed calls only (no tokens, no loopback callers): "
        "ask the API instead (`contivd ctl trace`, `/policy/hits`, `/debug/epcleanup/...`), "
        f"or as root on this node use the agent socket (curl {verb}--unix-socket {socket_path} http://agent{path})"
    )


def create_agent_app(agent: Agent, access: auth.Authenticator, socket_path: str, bgp: BgpSpeaker | None = None) -> QuartTrio:
    """The agent API; `socket_path` (the agent socket root uses) is named to refused callers."""
    app = QuartTrio("contivd-agent")

    @app.before_request
    async def authenticate() -> Response | None:
        body = cast(bytes, await request.get_data(as_text=False))
        headers = {k.lower(): v for k, v in request.headers.items()}
        refused = agent_caller_refused(access, request.method, request.full_path.rstrip("?"), body, headers, request.remote_addr, socket_path)
        return None if refused is None else _json({"error": str(refused)}, 401)

    @app.get("/inspect/driver")
    async def inspect_driver() -> Response:
        return _json(driver_state(agent))

    @app.get("/svcstats")
    async def svcstats() -> Response:
        try:
            return _json(await service_stats(agent))
        except OpenFlowError as exc:
            return _json({"error": f"reading flow statistics failed: {exc}"}, 503)

    async def rule_stats(read: Callable[[Iterable[BridgeDatapath], StateSnapshot], Awaitable[dict[str, RuleHits]]]) -> Response:
        try:
            hits = await read(agent.datapaths.values(), agent.cache.catch_up())
            return _json({rule_id: asdict(counts) for rule_id, counts in hits.items()})
        except OpenFlowError as exc:
            return _json({"error": f"reading flow statistics failed: {exc}"}, 503)

    @app.get("/netpolstats")
    async def netpolstats() -> Response:
        return await rule_stats(netpol_hits)

    @app.get("/rulestats")
    async def rulestats() -> Response:
        """Contiv's compiled policy rules: packets, bytes and flows per rule id on this node."""
        return await rule_stats(contiv_rule_hits)

    @app.get("/trace/<side>/<src>/<dst>/<int:proto>/<int:port>")
    async def trace(side: str, src: str, dst: str, proto: int, port: int) -> Response:
        return await trace_half(agent, side, src, dst, proto, port)

    @app.get("/inspect/bgp")
    async def inspect_bgp() -> Response:
        return _json(bgp.inspect() if bgp is not None else {"Peers": [], "Dsts": []})

    @app.get("/inspect/nameserver")
    async def inspect_nameserver() -> Response:
        return _json({"serviceQueue": 0, "endpointQueue": 0, "dnsRecords": {}, "stats": {}})

    @app.delete("/debug/reclaimEndpoint/<endpoint_id>")
    async def reclaim_endpoint(endpoint_id: str) -> Response:
        try:
            await agent.detach_endpoint(endpoint_id)
        except OvsError as exc:
            return _json({"error": str(exc)}, 503)
        return _json(None)

    @app.errorhandler(404)
    async def not_found(_: Exception) -> Response:
        return _json({"error": f"no route {request.method} {request.path}"}, 404)

    @app.errorhandler(405)
    async def not_allowed(_: Exception) -> Response:
        return _json({"error": f"method {request.method} not allowed on {request.path}"}, 405)

    return app

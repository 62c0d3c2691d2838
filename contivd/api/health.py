"""`/healthz`, `/readyz`, `/metrics` and `/ca.crt`: what load balancers, orchestrators,
Prometheus and TLS clients ask.

They are answered in front of the Quart app (like the plugin fast path) so a scrape or a probe
costs no routing. `/healthz` says the process and its event loop answer; `/readyz` says the node
can do its job, listing every failing check; `/metrics` is authenticated like the API (root on the
socket, a node signature, a token of any role, or a tokenless loopback caller unless
--loopback-access none) because it names nodes and networks.
`/ca.crt` is the CA the node's TLS certificate chains to (public, unauthenticated): `contivd ctl
--fingerprint` fetches it and trusts it only when its SHA-256 is the pinned one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope

from ..http.answer import send_answer
from ..metrics import CONTENT_TYPE, Metrics

if TYPE_CHECKING:  # annotations only: a node without the OVS datapath, or a follower, loads neither the agent nor PySyncObj
    from raftstore import StoreStatistics

    from ..agent.service import Agent
    from ..k8s.status import KubeHealth
    from ..nodes import NodeStore
    from ..tls.serving import ServingTls

Asgi = Callable[[Scope, ASGIReceiveCallable, ASGISendCallable], Awaitable[None]]
# A follower of the store further behind than this is not ready: its readers (agent, CNI,
# status) would act on a state the cluster has moved past. Seconds count since it last heard
# from a voter (one heartbeat a second when idle); it moves to another voter after 3.
FOLLOWER_MAX_LAG_REVISIONS = 1000
FOLLOWER_MAX_LAG_SECONDS = 5.0


def readiness_failures(store: NodeStore, agent: Agent | None, kube: KubeHealth | None = None) -> dict[str, str]:
    """Failing readiness checks by name, each with the reason; empty when the node is ready.
    In Kubernetes mode the leader (the one node that watches) is not ready until every watched
    kind has listed and is watching: not while one lists, backs off (the API server unreachable
    or refusing its token) or has not got its watch back; what is programmed stays."""
    failures: dict[str, str] = {}
    stats = store.statistics()
    if stats.leader is None or not stats.has_quorum:
        failures["store_leader"] = "no Raft leader with a quorum is known (election in progress or too few members up)"
    if stats.commit_blockers:
        failures["store_commit"] = "this node cannot commit writes: " + "; ".join(stats.commit_blockers)
    if stats.role == "store_follower" and (stats.lag_revisions > FOLLOWER_MAX_LAG_REVISIONS or stats.lag_seconds > FOLLOWER_MAX_LAG_SECONDS):
        failures["follower_lag"] = (
            f"this follower of the store is {stats.lag_revisions} revisions behind its voter and last heard from one "
            f"{stats.lag_seconds:.1f} s ago (bounds: {FOLLOWER_MAX_LAG_REVISIONS} revisions, {FOLLOWER_MAX_LAG_SECONDS:g} s)"
        )
    if agent is not None:
        agent_stats = agent.statistics()
        if not agent_stats.switch_connected:
            failures["switch_connected"] = "the bridge's OpenFlow connection is down" + (
                f": {agent_stats.last_error}" if agent_stats.last_error else ""
            )
        if not agent_stats.first_sync_done:
            failures["first_reconcile"] = "the node agent has not finished its first reconcile"
    if kube is not None:
        problems = kube.view().not_ready(time.time())
        if problems:
            failures["kubernetes_api"] = "; ".join(f"{kind}: {why}" for kind, why in sorted(problems.items()))
    return failures


def store_view(stats: StoreStatistics) -> dict[str, Any]:
    """What /readyz says of the store: the role, the revision, and on a follower how far behind."""
    if stats.role != "store_follower":
        return {"role": "voter" if stats.self_address is not None else "readonly", "revision": stats.revision, "followers": stats.followers}
    return {
        "role": "follower",
        "revision": stats.revision,
        "follows": stats.feed_voter,
        "lag_revisions": stats.lag_revisions,
        "lag_seconds": round(stats.lag_seconds, 3),
    }


def raft_view(stats: StoreStatistics, now: float) -> dict[str, Any]:
    """What /readyz adds even when ready: whether this node can commit, and the voters it
    has no link to, since when (an operator's first question when a member goes away)."""
    return {
        "can_commit": not stats.commit_blockers,
        "commit_blockers": list(stats.commit_blockers),
        "unreachable": [
            {"address": address, "since": datetime.fromtimestamp(since, UTC).isoformat(timespec="seconds"), "seconds": round(now - since)}
            for address, since in stats.unreachable_voters
        ],
    }


class OpsEndpoints:
    """ASGI front answering the three operational paths; everything else goes to `app`."""

    def __init__(
        self,
        app: Asgi,
        store: NodeStore,
        agent: Agent | None,
        metrics: Metrics,
        refusal: Callable[[dict[str, Any]], str | None],  # why a /metrics request is refused (None: allowed)
        kube: KubeHealth | None = None,
        tls: ServingTls | None = None,
    ):
        self.app, self.store, self.agent, self.metrics, self.refusal, self.kube = app, store, agent, metrics, refusal, kube
        self.tls = tls

    async def __call__(self, asgi_scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        scope = cast(dict[str, Any], asgi_scope)
        path = scope.get("path", "") if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") else None
        if path == "/healthz":
            await _respond(send, 200, "application/json", b'{"status": "ok"}\n')
        elif path == "/readyz":
            failures = readiness_failures(self.store, self.agent, self.kube)
            stats = self.store.statistics()
            body = {"ready": not failures, "failing": failures, "store": store_view(stats), "raft": raft_view(stats, time.time())}
            if self.agent is not None:  # serving, but not everything it was asked to (e.g. a NodePort backend it cannot reach)
                body["degraded"] = list(self.agent.statistics().problems)
            await _respond(send, 503 if failures else 200, "application/json", (json.dumps(body) + "\n").encode())
        elif path == "/metrics":
            refused = self.refusal(scope)
            if refused is not None:
                await _respond(send, 401, "application/json", (json.dumps({"error": refused}) + "\n").encode())
            else:
                await _respond(send, 200, CONTENT_TYPE, self.metrics.render())
        elif path == "/ca.crt" and self.tls is not None:  # during a CA rotation's grace period: the new CA, then the old
            await _respond(send, 200, "application/x-pem-file", self.tls.ca_pem.encode())
        else:
            await self.app(asgi_scope, receive, send)


async def _respond(send: ASGISendCallable, status: int, content_type: str, body: bytes) -> None:
    await send_answer(send, status, [(b"content-type", content_type.encode())], body)

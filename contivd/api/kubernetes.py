"""The routes that look at what the datapath does with policy and Kubernetes Services:
`/kubernetes/services`, `/kubernetes/trace/…` and `/policy/hits[/<scope>]`.

They read this node's typed StateCache and ask node agents (this node's in-process for a
trace, every agent node's API for counters; agents.py). A node that does not answer is named in
the answer, never an error. Not responsible for the verdict itself (model.netpolicy, tracing.py).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import trio

from ..k8s.listing import kubernetes_services as listed_services
from ..model import NotFoundError, rulehits
from ..model.netpolicy import TraceQuery, parse_trace
from ..state import StateCache
from .agents import AgentCalls
from .handler import handles

if TYPE_CHECKING:  # annotations only: a follower of the store, or a node without the OVS datapath, loads none of these
    from ..agent.service import Agent
    from .tracing import Half

log = logging.getLogger("contivd.api")


@dataclass(frozen=True)
class Kubernetes:
    """The state, this node's name and agent (None: --datapath none), and the agents' APIs."""

    cache: StateCache
    node_name: str
    agent: Agent | None
    agents: AgentCalls


@handles(Kubernetes)
async def kubernetes_services(kube: Kubernetes, body: bytes) -> Any:
    return listed_services(await kube.cache.sync())


@handles(Kubernetes)
async def kubernetes_trace(kube: Kubernetes, body: bytes, spec: str) -> Any:
    """One packet's fate (the first of a connection): the model's verdict over Contiv's and
    Kubernetes' policy, and OVS's own (ofproto/trace) on the source's node and, across nodes,
    the destination's, whichever node is asked (contivd/api/tracing.py); `agree` false is a bug."""
    from . import tracing  # here: its pure helpers live beside the agent's netlink code (pyroute2), which most nodes never load

    snapshot = await kube.cache.sync()
    routing = kube.agent.settings.routing if kube.agent is not None else snapshot.forwarding_mode() == "routing"

    async def half(node: str, side: str, query: TraceQuery, src: str, dst: str) -> Half:
        return await _trace_half(kube, node, side, query, src, dst)

    return await tracing.trace(snapshot, parse_trace(spec), kube.node_name, half, routing=routing)


async def _trace_half(kube: Kubernetes, node: str, side: str, query: TraceQuery, src: str, dst: str) -> Half:
    """One half of a trace from `node`'s agent: this node's directly, another's by the signed agent call."""
    from . import tracing

    if node == kube.node_name and kube.agent is not None:
        from ..agent.trace import TraceError  # loaded with the agent (contivd.agent.service)

        try:
            traced = await kube.agent.trace(
                int(ipaddress.IPv4Address(src)), int(ipaddress.IPv4Address(dst)), query.proto, query.port, arrival=side == "destination"
            )
        except TraceError as exc:
            return {"node": node, "error": str(exc)}
        return asdict(traced) if traced is not None else {"node": node, "skipped": f"{src if side == 'source' else dst} is not a pod on node {node}"}
    try:
        called = await kube.agents.call(node, "GET", f"/trace/{side}/{src}/{dst}/{query.proto}/{query.port}")
    except (OSError, ConnectionError, trio.TooSlowError) as exc:
        return {"node": node, "unanswered": f"node {node}'s agent did not answer: {exc or type(exc).__name__}"}
    try:
        parsed = json.loads(called[1]) if called is not None and called[0] == 200 else None
    except ValueError:
        parsed = None
    return tracing.half_from_agent(node, called, parsed)


@handles(Kubernetes)
async def policy_hits(kube: Kubernetes, body: bytes) -> Any:
    """Each node agent's `/rulestats` and `/netpolstats` summed (contivd.model.rulehits); a
    node that cannot answer is named in `unanswered` (its packets are missing from the sums,
    not an error)."""
    hits, unanswered = await _gather_hits(kube.agents)
    return {**hits.to_json(), "unanswered": unanswered}


@handles(Kubernetes)
async def policy_hits_of(kube: Kubernetes, body: bytes, scope: str) -> Any:
    """`policy_hits` of one tenant (`<tenant>`, a Kubernetes namespace too) or one policy
    (`<tenant>:<policy>`, a NetworkPolicy `<namespace>:<name>` too); unknown ones are 404."""
    tenant, _, policy = scope.partition(":")
    snapshot = await kube.cache.sync()
    netpol = rulehits.netpol_policies(rule.rule_id for pod in snapshot.k8s_netpol.values() for rule in pod.rules)
    if snapshot.object("tenant", tenant) is None and tenant not in netpol:
        raise NotFoundError(f"tenant {tenant!r} not found: no Contiv tenant nor namespace with NetworkPolicy rules has that name")
    if policy and snapshot.object("policy", f"{tenant}:{policy}") is None and policy not in netpol.get(tenant, set()):
        raise NotFoundError(f"policy {tenant}:{policy} not found: no Contiv policy nor NetworkPolicy with rules has that name")
    hits, unanswered = await _gather_hits(kube.agents)
    return {**hits.scoped(tenant, policy or None).to_json(), "unanswered": unanswered}


async def _gather_hits(agents: AgentCalls) -> tuple[rulehits.PolicyHits, list[str]]:
    """Every agent node's rule counters, asked at once, and the nodes that did not answer both."""
    nodes = agents.agent_nodes()
    answers: dict[str, tuple[Any, Any]] = {}

    async def ask(name: str) -> None:
        try:
            rules = await agents.call(name, "GET", "/rulestats")
            netpol = await agents.call(name, "GET", "/netpolstats")
        except (OSError, ConnectionError, trio.TooSlowError) as exc:
            log.info("policy hits: node %s's agent did not answer: %s", name, exc)
            return
        if rules is not None and netpol is not None and rules[0] == netpol[0] == 200:
            answers[name] = (json.loads(rules[1]), json.loads(netpol[1]))

    async with trio.open_nursery() as nursery:
        for name in nodes:
            nursery.start_soon(ask, name)
    counted = [answers[name] for name in nodes if name in answers]
    return rulehits.policy_hits((c[0] for c in counted), (c[1] for c in counted)), [name for name in nodes if name not in answers]

"""Contiv's netmaster views of the datapath state: `/services`, `/service/<id>`, `/debug/ofnet`,
and its stale-endpoint cleanup `/debug/epcleanup/…`.

Reads come from this node's typed StateCache (synced with the log first); the cleanup runs on
the leader, deletes through the control plane and asks each endpoint's node agent to drop its port
(Contiv's reclaimEndpoint). Not responsible for the configuration objects (objects.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio

from ..http.errors import BadRequestError
from ..netmaster.control import DeleteEndpoint, LocalControlPlane
from ..state import EndpointState, StateCache
from ..state.records import policy_rule_to_json
from .agents import AgentCalls
from .handler import handles

log = logging.getLogger("contivd.api")


@dataclass(frozen=True)
class Debug:
    """The state these routes show, the address `/debug/ofnet` names, and the cleanup's writers."""

    cache: StateCache
    control_ip: str
    plane: LocalControlPlane
    agents: AgentCalls


@handles(Debug)
async def services(debug: Debug, body: bytes) -> Any:
    snapshot = await debug.cache.sync()
    return [service.to_json() for _, service in sorted(snapshot.services.items())]


@handles(Debug)
async def service(debug: Debug, body: bytes, key: str) -> Any:
    """A 1-element list; a missing id answers `null`, as Contiv's did (its lookup error was
    shadowed, so the handler marshalled a nil list), e.g. `/service/netmaster`."""
    name, _, tenant = key.partition(":")
    found = (await debug.cache.sync()).services.get(f"{name}:{tenant}")
    return None if found is None else [found.to_json()]


@handles(Debug)
async def debug_ofnet(debug: Debug, body: bytes) -> Any:
    snapshot = await debug.cache.sync()
    return {
        "MyAddr": debug.control_ip,
        "EndpointDb": {id_: ep.to_json() for id_, ep in sorted(snapshot.endpoints.items())},
        "PolicyDb": {id_: policy_rule_to_json(rule) for id_, rule in sorted(snapshot.rules.items())},
    }


@handles(Debug)
async def debug_epcleanup(debug: Debug, body: bytes, tenant: str, category: str, key: str) -> Any:
    names = {"net": "Network", "group": "EPG", "ep": "Endpoint"}
    if category not in names:
        raise BadRequestError(f"category must be net, group or ep, got {category!r}")
    snapshot = await debug.cache.sync()
    for _, ep in sorted(snapshot.endpoints.items()):  # a copy: deleting changes the snapshot
        matches = {
            "net": ep.net_id == f"{key}.{tenant}",
            "group": ep.tenant == tenant and ep.service_name == key,
            "ep": ep.tenant == tenant and key in ep.endpoint_id,
        }[category]
        if matches:
            await debug.plane.delete_endpoint(DeleteEndpoint(tenant, ep.network, ep.endpoint_id))
            await _reclaim_on_node(debug.agents, ep)
    return f"Received request to cleanup {names[category]} with ID: {key}"


async def _reclaim_on_node(agents: AgentCalls, ep: EndpointState) -> None:
    """Ask the endpoint's node agent to drop its OVS port (Contiv's reclaimEndpoint); a node
    that is down or runs no agent is only logged: its next sync drops the flows anyway."""
    try:
        called = await agents.call(ep.homing_host, "DELETE", f"/debug/reclaimEndpoint/{ep.id}")
    except (OSError, ConnectionError, trio.TooSlowError) as exc:
        log.warning("reclaiming endpoint %s on node %s failed: %s", ep.id, ep.homing_host, exc)
        return
    if called is None:
        return
    status, answer = called
    if status != 200:
        log.warning("reclaiming endpoint %s on node %s: HTTP %d %s", ep.id, ep.homing_host, status, answer[:200].decode(errors="replace"))
    else:
        log.info("node %s's agent reclaimed endpoint %s", ep.homing_host, ep.id)

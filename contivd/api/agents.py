"""Calls from this node's API to node agents' APIs (`/inspect/bgp`, `/rulestats`, `/trace/…`,
`/debug/reclaimEndpoint/…`): the Bgp inspect, policy hits, traces and endpoint cleanup ask them.

This node's own agent is called over its root-only unix socket (no secret needed); any other
node's at the agent URL it registered, signed with the cluster secret and naming this node as
the principal. Not the leader forwarder: these go to agents, from any member, reads mostly.
Not responsible for decoding answers (each caller knows its route's shape).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..http import auth
from ..http.forwarder import ForwardingClient
from ..nodes import registered_nodes

if TYPE_CHECKING:
    from ..nodes import NodeStore


class AgentCalls:
    """Signed calls to registered node agents; `call` raises OSError, ConnectionError or
    trio.TooSlowError when the agent does not answer."""

    def __init__(self, store: NodeStore, http: ForwardingClient, node_name: str, secret: str | None, agent_socket: Path | None):
        self.store = store
        self.http = http
        self.node_name = node_name
        self.secret = secret
        self.agent_socket = agent_socket  # this node's agent API for root (--agent-socket); None: this node runs no agent

    def agent_nodes(self) -> list[str]:
        """The registered nodes that run an agent."""
        return [node.name for node in registered_nodes(self.store) if node.agent_url]

    async def call(self, node_name: str, method: str, path: str) -> tuple[int, bytes] | None:
        """A signed call to a node agent's API (this node's own over its root-only socket, which
        needs no cluster secret); None when the node is unknown or runs no agent."""
        node = next((n for n in registered_nodes(self.store) if n.name == node_name), None)
        if node is None or not node.agent_url:
            return None
        if node_name == self.node_name and self.agent_socket is not None:
            status, _, body = await self.http.request(method, f"unix:{self.agent_socket}", path, {}, b"")
            return status, body
        headers = {auth.SIGNATURE_HEADER: auth.sign(self.secret, method, path, b"")} if self.secret else {}
        headers[auth.PRINCIPAL_HEADER] = f"node:{self.node_name}"
        status, _, body = await self.http.request(method, node.agent_url, path, headers, b"")
        return status, body

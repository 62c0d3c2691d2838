"""The health-check nodePorts of externalTrafficPolicy Local Services, answered on every node as
kube-proxy does: a cloud load balancer asks each node `GET /` on the Service's
`healthCheckNodePort` and sends clients only to nodes that answer 200, which are those with a
local ready backend (the others answer 503), so that Local traffic is not sent where it would be
refused.

Pure first (`health_checks`, `answer`), then one hypercorn listener per port, started and stopped
as the Services come and go; the answer is read at request time from the agent's last sync.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from ..state import KubeServiceState

log = logging.getLogger("contivd.agent")


@dataclass(frozen=True)
class HealthCheck:
    namespace: str
    name: str
    local_endpoints: int  # this node's ready backends the datapath can use


def health_checks(services: Iterable[KubeServiceState], local_backends: set[str]) -> dict[int, HealthCheck]:
    """healthCheckNodePort → what it answers, for the Local Services that have one. Two Services
    naming one port (the API server allocates them apart) keep the first by key."""
    checks: dict[int, HealthCheck] = {}
    for service in sorted(services, key=lambda s: s.key):
        if service.local_traffic and 0 < service.health_check_node_port <= 0xFFFF:
            mine = {b.ip for port in service.ports for b in port.backends if b.ip in local_backends}
            checks.setdefault(service.health_check_node_port, HealthCheck(service.namespace, service.name, len(mine)))
    return checks


def answer(check: HealthCheck | None) -> tuple[int, bytes]:
    """kube-proxy's answer: 200 with local endpoints, 503 without (or for a port no longer served)."""
    if check is None:
        return 503, b'{"error":"no such service"}'
    body = {"service": {"namespace": check.namespace, "name": check.name}, "localEndpoints": check.local_endpoints}
    return (200 if check.local_endpoints else 503), json.dumps(body).encode()


class HealthCheckServers:
    """One listener per health-check port on every address of the node, kept equal to `update`'s."""

    def __init__(self) -> None:
        self.checks: dict[int, HealthCheck] = {}
        self.problems: dict[int, str] = {}  # port → why it cannot be served (already in use)
        self._stops: dict[int, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def update(self, checks: dict[int, HealthCheck]) -> None:
        self.checks = checks
        for port in self._stops.keys() - checks.keys():
            self._stops.pop(port).set()
            self.problems.pop(port, None)
        if self._nursery is None:
            return
        for port in checks.keys() - self._stops.keys():
            self._stops[port] = trio.Event()
            self._nursery.start_soon(self._serve, port, self._stops[port])

    async def _serve(self, port: int, stop: trio.Event) -> None:
        config = HypercornConfig()
        config.bind = [f"0.0.0.0:{port}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("hypercorn.error")
        config.graceful_timeout = 1.0
        try:
            await serve(self._app(port), config, shutdown_trigger=stop.wait)
        except OSError as exc:
            self.problems[port] = f"health-check nodePort {port}: {exc}"
            log.warning("agent: cannot serve the health-check nodePort %d: %s", port, exc)

    def _app(self, port: int) -> Any:
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "lifespan":
                while True:
                    message = await receive()
                    await send({"type": f"{message['type']}.complete"})
                    if message["type"] == "lifespan.shutdown":
                        return
            status, body = answer(self.checks.get(port))
            headers = [(b"content-type", b"application/json"), (b"x-content-type-options", b"nosniff")]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return app

"""Orphaned endpoints: this node's CNI endpoints whose pod end is gone, found and deleted.

A runtime that removes a container while contivd is down gets a failed DEL and forgets the
container; one that never sends CNI GC never mentions it again. The kernel keeps the record:
removing a pod's network namespace destroys its veth pair, host end included. So an endpoint
this node's CNI server made (`resolve.is_ours`) whose host end (`Attachment.host_ifname`) has
been missing for the whole grace period is an orphan, and it is deleted as a DEL would delete
it: bridge port, then the endpoint through the control plane (the leader frees its address).

Never reclaimed: a pod end moved into another namespace that is still alive (the host end
stays, so the endpoint is not even a candidate); an attachment whose ADD is under way (its
endpoint is committed while its veth is being made: such attachments are not timed, and the
final decision is taken under the CNI server's per-container lock, after any ADD or DEL of
the container has finished, on a fresh look at the link and the store —
`CniServer.reclaim_orphan`).

The same scan gives the status page each local endpoint's datapath state: whether a bridge
port names it and whether its host link is up.

This lives beside the CNI server rather than in the agent: the veth pair, its names, the
per-container lock and the DEL it reuses are the CNI server's; the agent knows ports and flows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from ..ovs import OvsError
from ..state import EndpointState
from .netlink import host_link_states
from .resolve import Attachment, attachment_of, is_ours
from .server import CniServer

log = logging.getLogger("contivd.cni.orphans")

MIN_SCAN_SECONDS, MAX_SCAN_SECONDS = 0.25, 5.0


def scan_interval(grace: float) -> float:
    """Scan often enough that an orphan goes within ~1.25 grace periods, at most every 5 s."""
    return min(MAX_SCAN_SECONDS, max(MIN_SCAN_SECONDS, grace / 4))


def missing_pod_ends(endpoints: Iterable[EndpointState], node: str, links: Mapping[str, bool], busy: Iterable[Attachment]) -> dict[str, Attachment]:
    """Endpoint id → attachment, for this node's CNI endpoints whose veth host end is absent,
    except those whose ADD is under way (`busy`)."""
    skip = set(busy)
    missing = {}
    for endpoint in endpoints:
        if is_ours(endpoint, node):
            attachment = attachment_of(endpoint)
            if attachment.host_ifname not in links and attachment not in skip:
                missing[endpoint.id] = attachment
    return missing


def track(pending: Mapping[str, float], missing: Iterable[str], now: float) -> dict[str, float]:
    """Endpoint id → when its pod end was first seen missing, for those missing now: an
    endpoint whose link came back (or whose ADD was under way) starts again from zero."""
    return {endpoint_id: pending.get(endpoint_id, now) for endpoint_id in missing}


def due(pending: Mapping[str, float], now: float, grace: float) -> list[str]:
    """The endpoints missing their pod end for at least `grace` seconds, oldest first."""
    return sorted((e for e, since in pending.items() if now - since >= grace), key=lambda e: (pending[e], e))


@dataclass(frozen=True)
class EndpointDatapath:
    """What the node's datapath holds for one local endpoint."""

    port: bool | None  # a bridge port names the endpoint (None: the bridges could not be read)
    link: str  # host end of the veth: "up", "down", "missing", or "" when its name is unknown
    reclaim_in: float | None = None  # seconds until it is deleted as an orphan

    @property
    def healthy(self) -> bool:
        return self.port is True and self.link == "up"

    def describe(self) -> str:
        port = {True: "port", False: "no port", None: "port unknown"}[self.port]
        link = {"up": "link up", "down": "link down", "missing": "veth gone", "": "link unknown"}[self.link]
        text = f"{port}, {link}"
        if self.reclaim_in is not None:
            text += f"; orphan, deleted in {max(0.0, self.reclaim_in):.0f} s"
        return text

    def to_json(self) -> list[Any]:
        """[text, healthy]: what the status page shows, and whether it is the normal state."""
        return [self.describe(), self.healthy]


def datapath_view(
    endpoints: Iterable[EndpointState],
    node: str,
    ports: Mapping[str, str] | None,
    links: Mapping[str, bool],
    pending: Mapping[str, float],
    now: float,
    grace: float,
) -> dict[str, EndpointDatapath]:
    """Each endpoint homed on `node` → its datapath state. `ports`: endpoint id → port name
    (None: unknown); the host link is the port's interface, else the CNI veth's host end."""
    view = {}
    for endpoint in endpoints:
        if endpoint.homing_host != node:
            continue
        name = (ports or {}).get(endpoint.id) or (attachment_of(endpoint).host_ifname if is_ours(endpoint, node) else "")
        link = "" if not name else "missing" if name not in links else "up" if links[name] else "down"
        since = pending.get(endpoint.id)
        view[endpoint.id] = EndpointDatapath(None if ports is None else endpoint.id in ports, link, None if since is None else grace - (now - since))
    return view


class OrphanReaper:
    """Scans every `scan_interval(grace)` seconds from start: times missing pod ends, deletes
    the endpoints whose pod end stayed missing for `grace` seconds, keeps the datapath view."""

    def __init__(self, server: CniServer, grace: float, on_reclaimed: Callable[[EndpointState], None] | None = None):
        self.server = server
        self.grace = grace
        self.on_reclaimed = on_reclaimed
        self._pending: dict[str, float] = {}
        self._view: dict[str, EndpointDatapath] = {}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        log.info("orphaned endpoints: deleted after %.0f s without their pod end (scan every %.2f s)", self.grace, scan_interval(self.grace))
        task_status.started()
        while True:
            try:
                await self.scan()
            except Exception as exc:  # noqa: BLE001 - the next scan retries; the daemon keeps running
                log.warning("orphaned endpoints: scan failed: %s", exc)
            await trio.sleep(scan_interval(self.grace))

    def view(self) -> dict[str, list[Any]]:
        """Endpoint id → [datapath state text, healthy], as of the last scan (the status page)."""
        return {endpoint_id: state.to_json() for endpoint_id, state in self._view.items()}

    async def scan(self) -> None:
        """One pass. Links are listed before the store is read: an endpoint committed after the
        listing may look missing once, which starts its clock but cannot delete it."""
        server = self.server
        links = await trio.to_thread.run_sync(host_link_states)
        snapshot = server.cache.catch_up()
        now = trio.current_time()
        endpoints = list(snapshot.endpoints.values())
        missing = missing_pod_ends(endpoints, server.node_name, links, server.adding)
        self._pending = track(self._pending, missing, now)
        try:
            ports: dict[str, str] | None = {endpoint: port.name for endpoint, port in (await server.agent.endpoint_ports()).items()}
        except OvsError as exc:
            log.debug("orphaned endpoints: bridge ports not read: %s", exc)
            ports = None
        self._view = datapath_view(endpoints, server.node_name, ports, links, self._pending, now, self.grace)
        for endpoint_id in due(self._pending, now, self.grace):
            await self._reclaim(endpoint_id, missing[endpoint_id], now - self._pending[endpoint_id])

    async def _reclaim(self, endpoint_id: str, attachment: Attachment, missing_for: float) -> None:
        try:
            deleted = await self.server.reclaim_orphan(attachment)
        except Exception as exc:  # noqa: BLE001 - kept pending: the next scan tries again
            log.warning("orphaned endpoint %s: deleting it failed, retrying: %s", endpoint_id, exc)
            return
        del self._pending[endpoint_id]
        self._view.pop(endpoint_id, None)
        for endpoint in deleted:
            log.info(
                "orphaned endpoint %s reclaimed (container %s, interface %s, address %s on %s/%s): its pod end was gone for %.1f s",
                endpoint.id,
                attachment.container_id,
                attachment.ifname,
                endpoint.ip_address,
                endpoint.tenant,
                endpoint.network,
                missing_for,
            )
            if self.on_reclaimed is not None:
                self.on_reclaimed(endpoint)

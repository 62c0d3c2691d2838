"""The node agent service: store + OVS ports → flows on the local bridge, kept in sync.

It runs (or uses) Open vSwitch, owns the OpenFlow listener its bridge connects to, and
re-computes the desired flows whenever the store changes, the switch (re)connects, or the
periodic resync fires (ports attached by the CNI server show up there). Failures are
logged and kept in statistics(); the next change or resync retries. It never stops the
daemon.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from openflow import Controller, OpenFlowError, SwitchConnected, desired
from raftstore import Store, StoreError

from ..netmaster import layout
from ..nodes import registered_nodes
from ..ovs import (
    VXLAN_BRIDGE,
    BridgeSpec,
    ManagedOvs,
    OvsBridge,
    OvsError,
    PortInfo,
    PortKind,
    PortSpec,
    kernel_datapath_available,
    open_ovsdb,
    system_db_socket,
)
from .inputs import node_inputs
from .push import Pusher

log = logging.getLogger("contivd.agent")

ENDPOINT_ID = "contivd-endpoint"  # external_ids key naming the endpoint a port belongs to
TUNNEL_PEER = "contivd-vtep"  # external_ids key naming the remote VTEP of a VXLAN port
RESYNC_SECONDS = 2.0
DEBOUNCE_SECONDS = 0.01  # coalesce a burst of store events into one recomputation


@dataclass(frozen=True)
class AgentSettings:
    node_name: str
    data_dir: Path
    vtep_ip: str
    ovs: str  # "managed", "auto" (the system OVS if its socket exists, else managed) or an OVSDB target
    openflow_listen: tuple[str, int] = ("127.0.0.1", 6653)


@dataclass(frozen=True)
class AgentStatistics:
    """What readiness, metrics, `/info` and the status page report about this node's datapath."""

    round: int
    flows: int
    groups: int
    syncs: int
    problems: tuple[str, ...]
    last_error: str
    switch_connected: bool
    first_sync_done: bool  # a full reconcile against the connected switch has completed
    last_sync_unix: float  # wall-clock end of the last successful sync (0: none yet)
    last_sync_seconds: float  # how long it took
    sync_failures: int


class Agent:
    def __init__(self, store: Store, settings: AgentSettings):
        self.store = store
        self.settings = settings
        self.pusher = Pusher()
        self._changed = trio.Event()
        self._synced = trio.Event()
        self._started = self._syncs = self._failures = 0
        self._last_sync_unix = self._last_sync_seconds = 0.0
        self._first_sync_done = False
        self._problems: tuple[str, ...] = ()
        self._bridge: OvsBridge | None = None
        self.db_socket = ""

    def poke(self) -> None:
        """Something changed (a port was attached): recompute soon."""
        self._changed.set()

    async def wait_synced(self) -> None:
        """Wait for the next completed sync (tests, readiness)."""
        await self._synced.wait()

    async def attach_endpoint(self, ifname: str, endpoint_id: str) -> int:
        """Put a pod's host-side interface on the bridge as `endpoint_id`'s port and return once
        a sync that knows the port has been pushed (its flows are on the switch). Returns the ofport."""
        bridge = self._require_bridge()
        ofport = await bridge.ensure_port(PortSpec(ifname, PortKind.SYSTEM, external_ids={ENDPOINT_ID: endpoint_id}))
        await self._sync_now()
        return ofport

    async def detach_endpoint(self, endpoint_id: str) -> list[str]:
        """Remove every bridge port of `endpoint_id` (none is fine: DEL is idempotent); returns their names."""
        bridge = self._require_bridge()
        names = [p.name for p in await bridge.list_ports() if p.external_ids.get(ENDPOINT_ID) == endpoint_id]
        for name in names:
            await bridge.remove_port(name)
        if names:
            await self._sync_now()
        return names

    def _require_bridge(self) -> OvsBridge:
        if self._bridge is None:
            raise OvsError("the node agent has not set up its bridge yet")
        return self._bridge

    async def _sync_now(self) -> None:
        """Ask for a sync and wait until one that started after this call has finished."""
        wanted = self._started + 1
        self._changed.set()
        while self._syncs < wanted:
            await self._synced.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            ovs = self.settings.ovs
            if ovs == "auto":
                ovs = system_db_socket() or "managed"
            if ovs == "managed":
                # The datapath outlives contivd: a restart (upgrade, crash) adopts the running
                # daemons and replaces flows under a new round, so pods keep their traffic.
                managed = ManagedOvs(self.settings.data_dir, leave_running=True)
                await nursery.start(managed.run)
                target, datapath_type = managed.db_socket, managed.datapath_type
            else:
                target = ovs
                datapath_type = "system" if kernel_datapath_available() else "netdev"
            self.db_socket = target
            host, port = self.settings.openflow_listen
            controller = Controller(host, port)
            port = await nursery.start(controller.run)
            async with open_ovsdb(target) as ovsdb:
                bridge = ovsdb.bridge(BridgeSpec(VXLAN_BRIDGE, datapath_type, controller=f"tcp:{host}:{port}"))
                await bridge.ensure_bridge()
                self._bridge = bridge
                nursery.start_soon(self._watch_store)
                nursery.start_soon(self._watch_switch, controller)
                nursery.start_soon(self._resync_timer)
                log.info("agent: bridge %s (%s datapath), OpenFlow on %s:%d", VXLAN_BRIDGE, datapath_type, host, port)
                task_status.started()
                await self._sync_loop(bridge)

    async def _watch_store(self) -> None:
        while True:
            try:
                async for _ in self.store.watch(f"{layout.ROOT}/"):
                    self._changed.set()
            except StoreError as exc:
                log.warning("agent: store watch failed, restarting it: %s", exc)
                await trio.sleep(1)

    async def _watch_switch(self, controller: Controller) -> None:
        async for event in controller.subscribe():
            if isinstance(event, SwitchConnected):
                try:
                    round_ = await self.pusher.attach(event.connection)
                    log.info("agent: switch %#x connected; reconciling under round %d", event.datapath_id, round_)
                except OpenFlowError as exc:
                    log.warning("agent: reading the reconnected switch failed: %s", exc)
                self._changed.set()

    async def _resync_timer(self) -> None:
        while True:
            await trio.sleep(RESYNC_SECONDS)
            self._changed.set()

    async def _sync_loop(self, bridge: OvsBridge) -> None:
        while True:
            await self._changed.wait()
            await trio.sleep(DEBOUNCE_SECONDS)
            self._changed = trio.Event()
            self._started += 1
            started = time.monotonic()
            try:
                if await self._sync(bridge):
                    self._first_sync_done = True
                    self._last_sync_unix, self._last_sync_seconds = time.time(), time.monotonic() - started
                self.pusher.last_error = ""
            except (OpenFlowError, OvsError, StoreError) as exc:
                self.pusher.last_error = str(exc)
                self._failures += 1
                log.warning("agent: sync failed, retrying on the next change: %s", exc)
            self._syncs += 1
            synced, self._synced = self._synced, trio.Event()
            synced.set()

    async def _sync(self, bridge: OvsBridge) -> bool:
        """One reconcile; False when no switch is connected to push to."""
        if self.pusher.connection is None or self.pusher.connection.closed:
            return False
        nodes = registered_nodes(self.store)
        listed = await bridge.list_ports()  # one OVSDB read per sync serves tunnels and endpoints
        peers = {n.vtep_ip for n in nodes if n.name != self.settings.node_name and n.vtep_ip}
        tunnels = await self._ensure_tunnels(bridge, listed, peers)
        attached = {p.external_ids[ENDPOINT_ID]: p for p in listed if ENDPOINT_ID in p.external_ids and p.ofport > 0}
        ports = {endpoint: port.ofport for endpoint, port in attached.items()}
        states = {kv.key: kv.value for kv in self.store.list_nowait(f"{layout.ROOT}/state/")}
        built = node_inputs(
            node=self.settings.node_name,
            encap="vxlan",
            states=states,
            ports=ports,
            tunnels=tunnels,
            nodes=nodes,
            round=self.pusher.round,
        )
        if built.problems != self._problems:
            for problem in built.problems:
                log.warning("agent: skipped %s", problem)
            self._problems = built.problems
        await self.pusher.push(desired(built.inputs))
        for local in built.inputs.local_ports:  # netprofile bandwidth: OVSDB ingress policing
            port = attached[local.endpoint_id]
            if (port.ingress_policing_rate_kbps, port.ingress_policing_burst_kb) != (local.bandwidth_kbps, local.burst_kb):
                await bridge.set_ingress_policing(port.name, local.bandwidth_kbps, local.burst_kb)
        return True

    async def _ensure_tunnels(self, bridge: OvsBridge, listed: list[PortInfo], vteps: set[str]) -> dict[str, int]:
        """One VXLAN port per peer VTEP (`vx<hex ip>`); ports of departed peers are removed."""
        existing = {p.external_ids.get(TUNNEL_PEER): p for p in listed if p.kind is PortKind.VXLAN}
        for vtep, port in existing.items():
            if vtep not in vteps:
                await bridge.remove_port(port.name)
        found: dict[str, int] = {}
        for vtep in sorted(vteps):
            name = f"vx{int(ipaddress.IPv4Address(vtep)):08x}"
            found[vtep] = await bridge.ensure_port(PortSpec.vxlan(name, vtep, external_ids={TUNNEL_PEER: vtep}))
        return found

    def statistics(self) -> AgentStatistics:
        pushed = self.pusher.statistics()
        connection = self.pusher.connection
        return AgentStatistics(
            round=pushed.round,
            flows=pushed.flows,
            groups=pushed.groups,
            syncs=self._syncs,
            problems=self._problems,
            last_error=pushed.last_error,
            switch_connected=connection is not None and not connection.closed,
            first_sync_done=self._first_sync_done,
            last_sync_unix=self._last_sync_unix,
            last_sync_seconds=self._last_sync_seconds,
            sync_failures=self._failures,
        )

"""The node agent service: store + OVS ports → flows on the local bridge, kept in sync.

It runs (or uses) Open vSwitch, owns the OpenFlow listener its bridge connects to, and
re-computes the desired flows whenever the store changes, the switch (re)connects, or the
periodic resync fires (ports attached by the CNI server show up there). Failures are
logged and kept in statistics(); the next change or resync retries. It never stops the
daemon.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from openflow import Controller, OpenFlowError, SwitchConnected
from openflow.inputs import Encap
from raftstore import Store, StoreError

from ..nodes import registered_nodes
from ..ovs import ManagedOvs, OvsError, PortKind, PortSpec, kernel_datapath_available, open_ovsdb, system_db_socket
from ..state import keys as layout
from .datapath import ENDPOINT_ID, BridgeDatapath, bridge_spec

log = logging.getLogger("contivd.agent")

RESYNC_SECONDS = 2.0
DEBOUNCE_SECONDS = 0.01  # coalesce a burst of store events into one recomputation
MIN_BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 0.1, 5.0  # between failed syncs, doubling


@dataclass(frozen=True)
class AgentSettings:
    node_name: str
    data_dir: Path
    vtep_ip: str
    ovs: str  # "managed", "auto" (the system OVS if its socket exists, else managed) or an OVSDB target
    openflow_listen: tuple[str, int] = ("127.0.0.1", 6653)
    net_mode: Encap = "vxlan"
    vlan_uplinks: tuple[str, ...] = field(default=())

    @property
    def encaps(self) -> tuple[Encap, ...]:
        """The bridges this node runs: VXLAN unless `net_mode` is vlan; VLAN when in vlan mode or given uplinks."""
        vxlan: tuple[Encap, ...] = ("vxlan",) if self.net_mode == "vxlan" else ()
        vlan: tuple[Encap, ...] = ("vlan",) if self.net_mode == "vlan" or self.vlan_uplinks else ()
        return vxlan + vlan


@dataclass(frozen=True)
class AgentStatistics:
    """What readiness, metrics, `/info` and the status page report about this node's datapath."""

    bridges: tuple[str, ...]
    round: int  # the cookie round of the first bridge
    flows: int
    groups: int
    syncs: int
    problems: tuple[str, ...]
    last_error: str
    switch_connected: bool  # every bridge has its OpenFlow session
    first_sync_done: bool  # a full reconcile against the connected switch has completed
    last_sync_unix: float  # wall-clock end of the last successful sync (0: none yet)
    last_sync_seconds: float  # how long it took
    sync_failures: int


class Agent:
    def __init__(self, store: Store, settings: AgentSettings):
        self.store = store
        self.settings = settings
        self.datapaths: dict[Encap, BridgeDatapath] = {}
        self._changed = trio.Event()
        self._urgent = False  # someone waits for the next sync (sync_now)
        self._synced = trio.Event()
        self._started = self._syncs = self._failures = 0
        self._last_sync_unix = self._last_sync_seconds = 0.0
        self._first_sync_done = False
        self._last_error = ""
        self._problems: tuple[str, ...] = ()
        self.db_socket = ""

    async def wait_synced(self) -> None:
        """Wait for the next completed sync (tests, readiness)."""
        await self._synced.wait()

    async def attach_endpoint(self, ifname: str, endpoint_id: str) -> int:
        """Put a pod's host-side interface on its network's bridge as `endpoint_id`'s port and
        return once a sync that knows the port has been pushed (its flows are on the switch).
        Returns the ofport."""
        ofport = await self.add_endpoint_port(ifname, endpoint_id, await self._encap_of(endpoint_id))
        await self.sync_now()
        return ofport

    async def add_endpoint_port(self, ifname: str, endpoint_id: str, encap: str) -> int:
        """The first half of attach_endpoint for a caller that knows the network's encapsulation
        before the endpoint exists (the CNI server, while the leader allocates the address): the
        port waits on the bridge and gets its flows from the first sync that sees the endpoint.
        Returns the ofport."""
        if not self.datapaths:
            raise OvsError("the node agent has not set up its bridges yet")
        datapath = next((d for kind, d in self.datapaths.items() if kind == encap), None)
        if datapath is None:
            raise OvsError(
                f"endpoint {endpoint_id}: its network is a {encap} network and this node runs no {encap} bridge (see --net-mode and --vlan-uplinks)"
            )
        return await datapath.bridge.ensure_port(PortSpec(ifname, PortKind.SYSTEM, external_ids={ENDPOINT_ID: endpoint_id}))

    async def detach_endpoint(self, endpoint_id: str) -> list[str]:
        """Remove every bridge port of `endpoint_id` (none is fine: DEL is idempotent); returns their names."""
        if not self.datapaths:
            raise OvsError("the node agent has not set up its bridges yet")
        names = []
        for datapath in self.datapaths.values():
            for port in await datapath.bridge.list_ports():
                if port.external_ids.get(ENDPOINT_ID) == endpoint_id:
                    await datapath.bridge.remove_port(port.name)
                    names.append(port.name)
        if names:
            await self.sync_now()
        return names

    async def _encap_of(self, endpoint_id: str) -> str:
        """The encapsulation of the endpoint's network, read after one log barrier (the
        endpoint was just created, maybe on the leader)."""
        await self.store.sync()
        endpoint = self.store.get_nowait(layout.ep_state(endpoint_id))
        if endpoint is None:
            raise OvsError(f"endpoint {endpoint_id} does not exist")
        network = self.store.get_nowait(f"{layout.NETS_PREFIX}{endpoint.value.get('netID', '')}")
        if network is None:
            raise OvsError(f"endpoint {endpoint_id}: its network {endpoint.value.get('netID')!r} does not exist")
        return str(network.value.get("pktTagType", ""))

    async def sync_now(self) -> None:
        """Ask for a sync and wait until one that started after this call has finished; the
        waiting caller (a pod being attached) skips the debounce meant for bursts of events."""
        wanted = self._started + 1
        self._urgent = True
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
                for encap in self.settings.encaps:
                    bridge = ovsdb.bridge(bridge_spec(encap, datapath_type, f"tcp:{host}:{port}"))
                    await bridge.ensure_bridge()
                    uplinks = self.settings.vlan_uplinks if encap == "vlan" else ()
                    self.datapaths[encap] = BridgeDatapath(encap, bridge, uplinks)
                nursery.start_soon(self._watch_store)
                nursery.start_soon(self._watch_switch, controller)
                nursery.start_soon(self._resync_timer)
                names = ", ".join(d.bridge.name for d in self.datapaths.values())
                log.info("agent: bridges %s (%s datapath), OpenFlow on %s:%d", names, datapath_type, host, port)
                task_status.started()
                await self._sync_loop()

    async def _watch_store(self) -> None:
        while True:
            try:
                async for _ in self.store.watch(f"{layout.ROOT}/"):
                    self._changed.set()
            except StoreError as exc:
                log.warning("agent: store watch failed, restarting it: %s", exc)
                await trio.sleep(1)

    async def _watch_switch(self, controller: Controller) -> None:
        by_id = {d.datapath_id: d for d in self.datapaths.values()}
        async for event in controller.subscribe():
            if not isinstance(event, SwitchConnected):
                continue
            datapath = by_id.get(event.datapath_id)
            if datapath is None:
                log.warning("agent: switch %#x is not one of this node's bridges; ignored", event.datapath_id)
                continue
            try:
                round_ = await datapath.pusher.attach(event.connection)
                log.info("agent: %s (switch %#x) connected; reconciling under round %d", datapath.bridge.name, event.datapath_id, round_)
            except OpenFlowError as exc:
                log.warning("agent: reading the reconnected switch %s failed: %s", datapath.bridge.name, exc)
            self._changed.set()

    async def _resync_timer(self) -> None:
        while True:
            await trio.sleep(RESYNC_SECONDS)
            self._changed.set()

    async def _sync_loop(self) -> None:
        backoff = 0.0
        while True:
            await self._changed.wait()
            if not self._urgent:
                await trio.sleep(DEBOUNCE_SECONDS)
            self._changed, self._urgent = trio.Event(), False
            self._started += 1
            started = time.monotonic()
            try:
                if await self._sync():
                    self._first_sync_done = True
                    self._last_sync_unix, self._last_sync_seconds = time.time(), time.monotonic() - started
                self._last_error = ""
                backoff = 0.0
            except (OpenFlowError, OvsError, StoreError) as exc:
                self._last_error = str(exc)
                self._failures += 1
                backoff = min(MAX_BACKOFF_SECONDS, max(MIN_BACKOFF_SECONDS, backoff * 2))
                log.warning("agent: sync failed, retrying in %.1f s: %s", backoff, exc)
            self._syncs += 1
            synced, self._synced = self._synced, trio.Event()
            synced.set()
            if backoff:  # OVS is down or refusing: do not hammer it with every store change
                await trio.sleep(backoff)
                self._changed.set()

    async def _sync(self) -> bool:
        """One reconcile of every bridge; True when all of them had a switch to push to."""
        nodes = registered_nodes(self.store)
        states = {kv.key: kv.value for kv in self.store.list_nowait(f"{layout.ROOT}/state/")}
        results = [await datapath.sync(self.settings.node_name, states, nodes) for datapath in self.datapaths.values()]
        problems = tuple(problem for result in results if result is not None for problem in result.problems)
        if problems != self._problems:
            for problem in problems:
                log.warning("agent: skipped %s", problem)
            self._problems = problems
        return all(result is not None for result in results)

    def statistics(self) -> AgentStatistics:
        pushed = [d.pusher.statistics() for d in self.datapaths.values()]
        return AgentStatistics(
            bridges=tuple(d.bridge.name for d in self.datapaths.values()),
            round=pushed[0].round if pushed else 0,
            flows=sum(p.flows for p in pushed),
            groups=sum(p.groups for p in pushed),
            syncs=self._syncs,
            problems=self._problems,
            last_error=self._last_error,
            switch_connected=bool(self.datapaths) and all(d.connected for d in self.datapaths.values()),
            first_sync_done=self._first_sync_done,
            last_sync_unix=self._last_sync_unix,
            last_sync_seconds=self._last_sync_seconds,
            sync_failures=self._failures,
        )

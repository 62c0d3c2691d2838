"""The node agent service: typed store state + OVS ports → flows on the local bridges, kept in sync.

It runs (or uses) Open vSwitch, owns the OpenFlow listener its bridges connect to, and syncs
whenever the state snapshot changes, a port is attached or detached, a switch (re)connects, or
the periodic audit fires. A sync is *incremental* (only the objects that changed are converted
and only their flows sent, in one bundle) unless it must be *full*: after a (re)connect, when
the node registry changed (tunnels), and every RESYNC_SECONDS (ports attached by other tools
show up). Every `audit_seconds` (--audit-interval; the first at a random point, so that nodes started together
do not audit together) a full sync is also an audit: it compares what each bridge
holds with a from-scratch computation and with the switch's own flows, reports any drift in
statistics() and /metrics, and repairs it under a new cookie round. Failures are logged and kept in statistics(); the next change retries. It never
stops the daemon.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from openflow import Controller, OpenFlowError, SwitchConnected
from openflow.inputs import Encap
from raftstore import StoreError

from ..ovs import SYSTEM_RUN_DIR, ManagedOvs, OvsError, PortInfo, kernel_datapath_available, open_ovsdb, system_db_socket
from ..state import StateCache, StateSnapshot
from . import healthcheck, hostnet, nodeport, noderules
from .datapath import BridgeDatapath, bridge_spec
from .inputs import KUBE_SERVICE_PREFIX
from .netpolstats import STATS_SECONDS, RuleHits, contiv_rule_hits, netpol_hits
from .push import AuditJob
from .router import BgpRouting
from .trace import OvsTrace, arrival_trace, ovs_trace

log = logging.getLogger("contivd.agent")

RESYNC_SECONDS = 2.0  # a full sync: ports re-read from OVSDB (ports attached by other tools show up)
DEBOUNCE_SECONDS = 0.005  # coalesce a burst of store events into one sync (not when someone waits)
MIN_BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 0.1, 5.0  # between failed syncs, doubling
NODE_RULES_CHECK_SECONDS = 10.0  # contivd's iptables chains re-read (and repaired) at least this often


HoldSocket = Callable[..., Awaitable[None]]  # (path, flag, *, task_status) -> started with the bound socket


@dataclass(frozen=True)
class AgentSettings:
    node_name: str
    data_dir: Path
    vtep_ip: str
    ovs: str  # "managed", "auto" (the system OVS if its socket exists, else managed) or an OVSDB target
    # The OpenFlow controller: a unix socket (relative = under the OVS run directory, the only place
    # ovs-vswitchd connects to one) or a loopback TCP address (any local process could connect to it).
    openflow_listen: Path | tuple[str, int] = Path("contivd/openflow.sock")
    net_mode: Encap = "vxlan"
    vlan_uplinks: tuple[str, ...] = field(default=())
    routing: bool = False  # --fwd-mode routing: the VLAN bridge routes (its one uplink leads to the BGP router)
    audit_seconds: float = 60.0  # an audit parses every flow the switch dumps: ~0.1 s of CPU per 1,000 flows

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
    full_syncs: int = 0
    incremental_syncs: int = 0
    flow_mods: int = 0  # flow-mods sent since start
    last_flow_mods: int = 0  # by the last push
    drift: int = 0  # flows and groups the last audit found wrong (against a full recomputation and the switch)
    drift_total: int = 0  # over every audit since start
    audits: int = 0


class Agent:
    def __init__(self, cache: StateCache, settings: AgentSettings, hold_socket: HoldSocket):
        """`hold_socket(path, flag)` binds the OpenFlow controller's root-only unix socket (so that
        no other local process can connect as the switch) for `nursery.start`, and keeps it until
        cancelled (contivd.http.local_socket.hold_socket)."""
        self.cache = cache
        self.settings = settings
        self.hold_socket = hold_socket
        self.datapaths: dict[Encap, BridgeDatapath] = {}
        self.ovs_appctl = ["ovs-appctl"]  # how to ask this node's ovs-vswitchd (ofproto/trace)
        # Rule hits on this node, refreshed every STATS_SECONDS for /metrics: NetworkPolicy's (isolations included) and Contiv's compiled rules.
        self.netpol_hits: dict[str, RuleHits] = {}
        self.contiv_hits: dict[str, RuleHits] = {}
        self._changed = trio.Event()
        self._hurry = trio.Event()  # someone waits for the next sync (wait_programmed): no debounce
        self._full = True  # the next sync must be a full one
        self._audit_due = False
        self._judging = False  # an audit's comparison is running in a worker thread
        self._repair: set[Encap] = set()  # bridges an audit found drifted: reprogrammed under a new round
        self._synced = trio.Event()
        self._port_epoch = 0  # bumped by every port added or removed
        self._switches_up = True  # the last sync found every bridge's switch connected
        self._done = (0, 0)  # (snapshot revision, port epoch) the last successful sync covered
        self._synced_revision = -1  # snapshot revision of the last sync (incremental ones start from it)
        self._started = self._syncs = self._failures = 0
        self._full_syncs = self._incremental_syncs = self._audits = self._drift = self._drift_total = 0
        self._last_sync_unix = self._last_sync_seconds = 0.0
        self._first_sync_done = False
        self._last_error = ""
        self._problems: tuple[str, ...] = ()
        self._node_rules: noderules.NodeRules | None = None  # as last found or made in iptables
        self._node_rules_checked = float("-inf")
        self._node_rules_problem = ""
        self.db_socket = ""
        self._background: trio.Nursery | None = None  # where audits are judged, beside the syncs
        self._bgp = BgpRouting()
        self.health_checks = healthcheck.HealthCheckServers()  # externalTrafficPolicy Local's healthCheckNodePorts

    def set_bgp_routing(self, routing: BgpRouting) -> None:
        """The BGP speaker's router address and learned routes changed: the routing bridge's next
        full sync installs them (a route change is a Fabric change, see openflow.incremental)."""
        if routing == self._bgp:
            return
        self._bgp = routing
        for datapath in self.datapaths.values():
            datapath.bgp = routing
        self._full = True
        self._changed.set()

    async def wait_synced(self) -> None:
        """Wait for the next completed sync (tests, readiness)."""
        await self._synced.wait()

    async def add_endpoint_port(self, ifname: str, endpoint_id: str, encap: str) -> int:
        """Put a pod's host-side interface on the bridge of its network's encapsulation as
        `endpoint_id`'s port; it gets its flows from the first sync that sees the endpoint
        (`wait_programmed`). The caller may add it before the endpoint exists. Returns the ofport."""
        datapath = self._datapath(encap, endpoint_id)
        ofport = await datapath.add_port(ifname, endpoint_id)
        self._port_epoch += 1
        self._changed.set()
        return ofport

    async def detach_endpoint(self, endpoint_id: str) -> list[str]:
        """Remove every bridge port of `endpoint_id` (none is fine: DEL is idempotent) and wait
        until its flows are gone; returns the ports' names."""
        if not self.datapaths:
            raise OvsError("the node agent has not set up its bridges yet")
        names = [name for datapath in self.datapaths.values() for name in await datapath.remove_ports(endpoint_id)]
        if names:
            self._port_epoch += 1
            await self.wait_programmed(0)
        return names

    async def endpoint_ports(self) -> dict[str, PortInfo]:
        """Every endpoint port on this node's bridges, by endpoint id, read from OVSDB."""
        return {endpoint: port for datapath in self.datapaths.values() for endpoint, port in (await datapath.endpoint_ports()).items()}

    def _datapath(self, encap: str, endpoint_id: str) -> BridgeDatapath:
        if not self.datapaths:
            raise OvsError("the node agent has not set up its bridges yet")
        datapath = next((d for kind, d in self.datapaths.items() if kind == encap), None)
        if datapath is None:
            raise OvsError(
                f"endpoint {endpoint_id}: its network is a {encap} network and this node runs no {encap} bridge (see --net-mode and --vlan-uplinks)"
            )
        return datapath

    async def wait_programmed(self, revision: int) -> None:
        """Until a sync has pushed the state at `revision` (at least) with every port added or
        removed before this call; the waiting caller (a pod being attached) skips the debounce
        meant for bursts of events. Raises OvsError/OpenFlowError if that sync failed."""
        epoch = self._port_epoch
        await self.cache.wait_revision(revision)  # a follower may not have applied the write yet
        while self._done[0] < revision or self._done[1] < epoch:
            self._hurry.set()
            self._changed.set()
            failures = self._failures
            await self._synced.wait()
            if self._failures > failures and self._last_error:
                raise OvsError(f"programming the datapath failed: {self._last_error}")
            if not self._switches_up:  # no sync can cover it until a switch reconnects: fail now, the caller retries
                raise OvsError("a bridge's OpenFlow connection is down; its flows cannot be programmed now")

    async def trace(self, src_ip: int, dst_ip: int, proto: int, dport: int, *, arrival: bool = False) -> OvsTrace | None:
        """ofproto/trace of a first packet from a pod on this node, or (`arrival`) of one arriving
        from another node for a pod on this node; None: this node holds no such pod."""
        half = arrival_trace if arrival else ovs_trace
        for datapath in self.datapaths.values():
            inputs = datapath.last_inputs
            if inputs is not None and (
                found := await half(self.settings.node_name, datapath.bridge.name, self.ovs_appctl, inputs, src_ip, dst_ip, proto, dport)
            ):
                return found
        return None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._background = nursery
            ovs = self.settings.ovs
            if ovs == "auto":
                ovs = system_db_socket() or "managed"
            if ovs == "managed":
                # The datapath outlives contivd: a restart (upgrade, crash) adopts the running
                # daemons and replaces flows under a new round, so pods keep their traffic.
                managed = ManagedOvs(self.settings.data_dir, leave_running=True)
                await nursery.start(managed.run)
                self.ovs_appctl = ["ovs-appctl", "-t", managed.vswitchd_control]
                target, datapath_type = managed.db_socket, managed.datapath_type
                run_dir = managed.run_dir
            else:
                target = ovs
                datapath_type = "system" if kernel_datapath_available() else "netdev"
                run_dir = SYSTEM_RUN_DIR
            self.db_socket = target
            listen = self.settings.openflow_listen
            if isinstance(listen, tuple):
                controller = Controller(*listen)
            else:
                controller = Controller(listener=await nursery.start(self.hold_socket, run_dir / listen, "--openflow-listen"))
            await nursery.start(controller.run)
            async with open_ovsdb(target) as ovsdb:
                for encap in self.settings.encaps:
                    bridge = ovsdb.bridge(bridge_spec(encap, datapath_type, controller.target))
                    await bridge.ensure_bridge()
                    uplinks = self.settings.vlan_uplinks if encap == "vlan" else ()
                    self.datapaths[encap] = BridgeDatapath(encap, bridge, self.settings.node_name, uplinks, self.settings.routing)
                    self.datapaths[encap].bgp = self._bgp
                await nursery.start(self.health_checks.run)
                nursery.start_soon(self._follow_state)
                nursery.start_soon(self._watch_switch, controller)
                nursery.start_soon(self._resync_timer)
                nursery.start_soon(self._refresh_rule_hits)
                names = ", ".join(d.bridge.name for d in self.datapaths.values())
                log.info("agent: bridges %s (%s datapath), OpenFlow on %s", names, datapath_type, controller.target)
                task_status.started()
                await self._sync_loop()

    async def _follow_state(self) -> None:
        while True:
            await self.cache.wait_changed()
            self._changed.set()

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
            self._full = True
            self._changed.set()

    async def _refresh_rule_hits(self) -> None:
        """Keep `netpol_hits` and `contiv_hits` fresh while there are rules (a switch that cannot
        be asked keeps the last counts)."""
        while True:
            await trio.sleep(STATS_SECONDS)
            snapshot = self.cache.catch_up()
            try:
                if snapshot.k8s_netpol or self.netpol_hits:
                    self.netpol_hits = await netpol_hits(self.datapaths.values(), snapshot)
                if snapshot.rules or self.contiv_hits:
                    self.contiv_hits = await contiv_rule_hits(self.datapaths.values(), snapshot)
            except OpenFlowError as exc:
                log.info("reading policy rules' flow statistics failed: %s", exc)

    async def _resync_timer(self) -> None:
        # The first audit at a random point of the first 1.5 intervals: nodes started together
        # (a cluster's boot, an upgrade) would otherwise audit together for ever, each one's
        # seconds of CPU at once.
        next_audit = trio.current_time() + self.settings.audit_seconds * random.uniform(0.5, 1.5)
        while True:
            await trio.sleep(RESYNC_SECONDS)
            self._full = True
            if trio.current_time() >= next_audit:
                self._audit_due, next_audit = True, trio.current_time() + self.settings.audit_seconds
            self._changed.set()

    async def _sync_loop(self) -> None:
        backoff = 0.0
        while True:
            await self._changed.wait()
            with trio.move_on_after(DEBOUNCE_SECONDS):  # a waiter arriving meanwhile cuts it short
                await self._hurry.wait()
            self._changed, self._hurry = trio.Event(), trio.Event()
            self._started += 1
            started = time.monotonic()
            try:
                if await self._sync(started):
                    self._first_sync_done = True
                    self._last_sync_unix, self._last_sync_seconds = time.time(), time.monotonic() - started
                self._last_error = ""
                backoff = 0.0
            except Exception as exc:  # noqa: BLE001 - the agent never stops the daemon
                if not isinstance(exc, (OpenFlowError, OvsError, StoreError)):
                    log.exception("agent: unexpected failure in a sync")
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

    async def _sync(self, started: float) -> bool:
        """One reconcile of every bridge; True when all of them had a switch to push to."""
        snapshot = self.cache.catch_up()
        covered = (snapshot.revision, self._port_epoch)
        changes = snapshot.changes_since(self._synced_revision)
        audit = self._audit_due and not self._judging  # one audit at a time; a due one waits for the last
        self._audit_due &= not audit
        for encap in self._repair:
            self.datapaths[encap].pusher.start_new_round()
        full = audit or self._full or bool(self._repair) or changes is None or any(change.kind == "node" for change in changes)
        self._full, self._repair = False, set()
        try:
            results = [await datapath.sync(snapshot, full) for datapath in self.datapaths.values()]
        except BaseException:
            self._full = True  # what the switch holds is unknown now
            raise
        self._synced_revision = snapshot.revision
        if full:
            self._full_syncs += 1
        else:
            self._incremental_syncs += 1
        if audit:
            await self._audit()
        await self._reconcile_node_rules(snapshot)
        self.health_checks.update(healthcheck.health_checks(snapshot.k8s_services.values(), self._routed_pods()))
        problems = tuple(problem for result in results if result is not None for problem in result.problems)
        if self._node_rules_problem:
            problems += (self._node_rules_problem,)
        problems += tuple(problem for _, problem in sorted(self.health_checks.problems.items()))
        if problems != self._problems:  # each logged once, when it appears and when it goes, not per sync
            for problem in (p for p in dict.fromkeys(problems) if p not in self._problems):
                log.warning("agent: %s", problem)
            for gone in (p for p in dict.fromkeys(self._problems) if p not in problems):
                log.info("agent: resolved: %s", gone)
            self._problems = problems
        done = all(result is not None for result in results)
        self._switches_up = done
        if done:
            self._done = covered
        log.debug(
            "agent: %s sync at revision %d in %.1f ms", "full" if full else "incremental", snapshot.revision, (time.monotonic() - started) * 1000
        )
        return done

    async def _reconcile_node_rules(self, snapshot: StateSnapshot) -> None:
        """contivd's iptables chains (contivd.agent.noderules) when what they must hold changed,
        and re-read every NODE_RULES_CHECK_SECONDS so a flushed or edited chain is put back.
        A failure is a problem line, retried at the next check; pods keep working."""
        try:
            subnet = hostnet.private_subnet(snapshot.private_subnet())
        except hostnet.HostAccessError as exc:
            self._node_rules_problem = f"node iptables rules: {exc}"
            return
        entered = {
            spec.service_id.removeprefix(KUBE_SERVICE_PREFIX)
            for datapath in self.datapaths.values()
            if datapath.last_inputs is not None
            for spec in datapath.last_inputs.services
            if spec.entry_network is not None
        }
        ports = noderules.node_ports(snapshot.k8s_services.values(), entered)
        sources = nodeport.snat_sources({encap: datapath.host_port for encap, datapath in self.datapaths.items()})
        external = noderules.external_ports(snapshot.k8s_services.values(), entered)
        local = noderules.local_ports(snapshot.k8s_services.values(), entered, self._routed_pods())
        rules = noderules.node_rules(subnet, hostnet.node_address(subnet), ports, sources, external, local)
        if rules == self._node_rules and trio.current_time() < self._node_rules_checked + NODE_RULES_CHECK_SECONDS:
            return
        self._node_rules_checked = trio.current_time()
        try:
            rewritten = await trio.to_thread.run_sync(noderules.reconcile, rules)
        except noderules.NodeRulesError as exc:
            self._node_rules, self._node_rules_problem = None, f"node iptables rules: {exc}"
            return
        if rewritten:
            log.info("agent: iptables chains rewritten in table %s", ", ".join(rewritten))
        self._node_rules, self._node_rules_problem = rules, ""

    def _routed_pods(self) -> set[str]:
        """The addresses of this node's pods that its host ports route (the backends its
        externalTrafficPolicy Local Services can use)."""
        return {ip for d in self.datapaths.values() if d.last_inputs is not None for ip in hostnet.routed_pods(d.last_inputs.ports())}

    async def _audit(self) -> None:
        """Does what each bridge holds equal a from-scratch computation, and does the switch hold
        it? The material is taken here, between pushes (the switch's flow dump is the only wait);
        the comparison, seconds of CPU at thousands of flows, runs in a worker thread while syncs
        go on (a change waits for none of it). Drift is counted (statistics, /metrics) and
        repaired by the next sync: a full push under a new round."""
        jobs = [(encap, await d.pusher.start_audit(d.last_inputs)) for encap, d in self.datapaths.items() if d.last_inputs is not None]
        assert self._background is not None
        self._judging = True
        self._background.start_soon(self._judge, jobs)

    async def _judge(self, jobs: list[tuple[Encap, AuditJob]]) -> None:
        try:  # pure work: abandoned, not awaited, when the agent stops
            judged = [(encap, await trio.to_thread.run_sync(job.run, abandon_on_cancel=True)) for encap, job in jobs]
        except Exception:  # noqa: BLE001 - the agent never stops the daemon; the next audit tries again
            log.exception("agent: an audit failed")
            return
        finally:
            self._judging = False
        drift = 0
        for encap, found in judged:
            counted = sum(dataclasses.astuple(found.held)) + (sum(dataclasses.astuple(found.switch)) if found.switch else 0)
            if counted:
                name = self.datapaths[encap].bridge.name
                log.warning("agent: audit of %s found %d flows/groups drifted (%s); reprogramming it", name, counted, found)
                self._repair.add(encap)
                self._changed.set()
            drift += counted
        self._drift = drift
        self._drift_total += drift
        self._audits += 1

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
            full_syncs=self._full_syncs,
            incremental_syncs=self._incremental_syncs,
            flow_mods=sum(p.flow_mods for p in pushed),
            last_flow_mods=sum(p.last_flow_mods for p in pushed),
            drift=self._drift,
            drift_total=self._drift_total,
            audits=self._audits,
        )

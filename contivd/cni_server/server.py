"""contivd's CNI server: the unix socket the `contiv` plugin talks to, and the ADD/DEL/CHECK/GC/STATUS work.

Owns the socket file (directory 0700, socket 0600; a stale socket is replaced, a live one
refused), one lock per container (a runtime may run several calls for one container at
once; different containers proceed in parallel), and the undo of a half-done ADD. Endpoints
are created and deleted through the typed ControlPlane (the netmaster on the leader, a
forwarded call on a follower); everything else is read from the node's StateCache, so an ADD
costs one store round trip (the endpoint's creation) and no log barrier. Netlink work runs in
threads (netlink.py); the bridge port goes through the node agent. Not responsible for:
addresses (the leader's IPAM), flows (the agent), the network config file (packaging).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio
from pyroute2 import NetlinkError

from cni.protocol import (
    ADDRESS_UNAVAILABLE,
    ALREADY_ADDED,
    CHECK_FAILED,
    INTERNAL_ERROR,
    INVALID_NETWORK_CONFIG,
    IO_FAILURE,
    MAX_MESSAGE_BYTES,
    PLUGIN_NOT_AVAILABLE,
    TRY_AGAIN_LATER,
    UNKNOWN_CONTAINER,
    CniError,
    Request,
    answer_line,
    request_from_line,
    version_result,
)

from ..agent.hostnet import HostAccessError, ensure_node_address, private_subnet
from ..agent.service import Agent
from ..http.local_socket import bind_socket, remove_socket
from ..netmaster.control import ControlPlane, DeleteEndpoint, UpdateEndpoint
from ..ovs import OvsError
from ..state import EndpointState, NetworkState, StateCache, StateSnapshot
from . import hostaccess, k8s
from .hostaccess import HostAccessExhaustedError
from .hostlink import create_host_access, used_private_addresses
from .netlink import (
    NetnsMissingError,
    PodInterface,
    PodInterfaceError,
    check_pod_interface,
    configure_pod_end,
    create_veth,
    host_interface_exists,
    host_interface_names,
    netns_exists,
    remove_host_interface,
)
from .resolve import (
    Attachment,
    Target,
    add_result,
    addressing,
    attachment_of,
    check_previous_result,
    create_request,
    endpoint_labels,
    error_for_failure,
    find_endpoints,
    is_ours,
    k8s_pod,
    resolve_target,
    stale_endpoints,
    stray_host_interfaces,
    valid_attachments,
)

log = logging.getLogger("contivd.cni")
READ_TIMEOUT_SECONDS = 10.0  # the plugin sends its request at once

T = TypeVar("T")
Observer = Callable[[str, float, bool], None]  # (command, seconds, succeeded): e.g. a latency histogram


async def _together(*steps: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Run the steps concurrently and return their results in order; if any failed, raise the
    first failure once all have finished (no ExceptionGroup: callers map single errors to codes)."""
    results: list[Any] = [None] * len(steps)
    failures: list[BaseException] = []

    async def run(index: int, step: Callable[[], Awaitable[Any]]) -> None:
        try:
            results[index] = await step()
        except Exception as exc:  # noqa: BLE001 - re-raised below
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        for index, step in enumerate(steps):
            nursery.start_soon(run, index, step)
    if failures:
        raise failures[0]
    return results


async def _controlled(target: Target, call: Callable[[], Awaitable[T]]) -> T:
    """A control-plane call whose typed failures become the CNI errors naming `target`."""
    try:
        return await call()
    except Exception as exc:
        error = error_for_failure(exc, target)
        if error is None:
            raise
        raise error from None


async def _timed(steps: dict[str, float], name: str, call: Callable[[], Awaitable[T]]) -> T:
    started = time.perf_counter()
    try:
        return await call()
    finally:
        steps[name] = time.perf_counter() - started


@dataclass(frozen=True)
class CniStatistics:
    socket: str
    requests: int
    failures: int
    in_flight: int
    last_error: str


class CniServer:
    def __init__(
        self,
        control: ControlPlane,
        cache: StateCache,
        agent: Agent,
        node_name: str,
        socket_path: Path,
        kubeconfig: Path | None = None,
        observe: Observer | None = None,
        service_cidr: str | None = None,
    ):
        self.control = control
        self.cache = cache
        self.agent = agent
        self.node_name = node_name
        self.socket_path = socket_path
        self.kubeconfig = kubeconfig
        self.observe = observe
        self.service_cidr = service_cidr
        self._host_access_lock = trio.Lock()  # a private address is chosen and claimed (its route) under it
        self._locks: dict[str, tuple[trio.Lock, int]] = {}
        self._adding: set[Attachment] = set()  # ADDs under way: GC leaves their veths alone
        self._requests = self._failures = self._in_flight = 0
        self._last_error = ""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sock = bind_socket(self.socket_path, "--cni-socket")
        inode = os.stat(self.socket_path).st_ino
        try:
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
            log.info("CNI server listening on %s", self.socket_path)
            task_status.started()
            await trio.serve_listeners(self._serve_connection, [listener])
        finally:
            sock.close()
            remove_socket(self.socket_path, inode)

    @property
    def adding(self) -> frozenset[Attachment]:
        """The attachments whose ADD is under way."""
        return frozenset(self._adding)

    async def reclaim_orphan(self, attachment: Attachment) -> list[EndpointState]:
        """DEL the attachment if its veth's host end is still gone (orphans.py found it missing
        for a grace period), checked under the container's lock: never while an ADD or DEL of
        the container runs. Returns the endpoints deleted (none if the pod end came back or
        the endpoint is already gone)."""
        async with self._container_lock(attachment.container_id):
            if await trio.to_thread.run_sync(host_interface_exists, attachment.host_ifname):
                return []
            endpoints = find_endpoints((await self.cache.sync()).endpoints.values(), attachment, self.node_name)
            if endpoints:
                await self._delete(attachment)
            return endpoints

    def statistics(self) -> CniStatistics:
        return CniStatistics(str(self.socket_path), self._requests, self._failures, self._in_flight, self._last_error)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            with trio.move_on_after(READ_TIMEOUT_SECONDS):
                while not data.endswith(b"\n") and len(data) <= MAX_MESSAGE_BYTES:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        break
                    data += chunk
            answer = await self.handle_line(data)
            try:
                await stream.send_all(answer)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                log.warning("CNI: the plugin went away before the answer")

    async def handle_line(self, line: bytes) -> bytes:
        """One request line → one answer line; every failure becomes a CNI error object."""
        started, command, version = time.monotonic(), "?", "1.1.0"
        self._requests += 1
        self._in_flight += 1
        try:
            request = request_from_line(line)
            command, version = request.command, request.cni_version
            answer = answer_line(await self.handle(request))
            ok = True
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down
            error = exc if isinstance(exc, CniError) else CniError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")
            if not isinstance(exc, CniError):
                log.exception("CNI %s: unexpected failure", command)
            answer, ok = answer_line(error=error, cni_version=version), False
            self._last_error = f"{command}: {error.msg}"
            log.warning("CNI %s failed: %s (code %d)", command, error.msg, error.code)
        finally:
            self._in_flight -= 1
        if not ok:
            self._failures += 1
        if self.observe is not None:
            self.observe(command, time.monotonic() - started, ok)
        return answer

    async def handle(self, request: Request) -> dict[str, Any]:
        try:
            if request.command == "VERSION":
                return version_result(request.cni_version)
            if request.command == "STATUS":
                return self._status()
            if request.command == "GC":
                return await self._gc(request)
            async with self._container_lock(request.container_id):
                if request.command == "ADD":
                    return await self._add(request)
                if request.command == "DEL":
                    return await self._delete(Attachment(request.container_id, request.ifname))
                return await self._check(request)
        except NetnsMissingError as exc:
            raise CniError(UNKNOWN_CONTAINER, str(exc)) from None
        except PodInterfaceError as exc:
            raise CniError(INTERNAL_ERROR, str(exc)) from None
        except NetlinkError as exc:
            raise CniError(INTERNAL_ERROR, f"netlink: {exc}") from None
        except OvsError as exc:
            raise CniError(TRY_AGAIN_LATER, f"Open vSwitch: {exc}") from None
        except HostAccessExhaustedError as exc:
            raise CniError(ADDRESS_UNAVAILABLE, f"host access: {exc}") from None
        except HostAccessError as exc:
            raise CniError(INVALID_NETWORK_CONFIG, f"host access: {exc}") from None
        except OSError as exc:
            raise CniError(IO_FAILURE, f"{type(exc).__name__}: {exc}") from None

    @asynccontextmanager
    async def _container_lock(self, container_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(container_id, (trio.Lock(), 0))
        self._locks[container_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[container_id]
            if users == 1:
                del self._locks[container_id]
            else:
                self._locks[container_id] = (lock, users - 1)

    def _require_agent_ready(self, code: int) -> None:
        stats = self.agent.statistics()
        if not (stats.first_sync_done and stats.switch_connected):
            raise CniError(code, "the node agent is not ready yet (its switch has not connected and synced)", stats.last_error)

    def _status(self) -> dict[str, Any]:
        self._require_agent_ready(PLUGIN_NOT_AVAILABLE)
        return {}

    async def _add(self, request: Request) -> dict[str, Any]:
        self._require_agent_ready(TRY_AGAIN_LATER)
        if not netns_exists(request.netns):
            raise CniError(UNKNOWN_CONTAINER, f"network namespace {request.netns} does not exist")
        attachment = Attachment(request.container_id, request.ifname)
        pod = k8s_pod(request)
        pod_labels = await trio.to_thread.run_sync(k8s.pod_labels, self.kubeconfig, *pod) if pod and self.kubeconfig else {}
        target = resolve_target(request, pod_labels)
        snapshot = self.cache.catch_up()  # this node's own earlier ADDs are in it: each waited for its revision
        if find_endpoints(snapshot.endpoints.values(), attachment, self.node_name):
            raise CniError(ALREADY_ADDED, f"container {attachment.container_id} already has interface {attachment.ifname}; DEL it first")
        created = create_request(target, attachment, self.node_name, pod)
        # Every undo step is idempotent, so all are armed before anything starts: a step that
        # fails or is cancelled half-way leaves nothing behind. Reverse order: port, veth, endpoint.
        self._adding.add(attachment)
        undo: list[Callable[[], Awaitable[Any]]] = [
            lambda: self.control.delete_endpoint(DeleteEndpoint(target.tenant, target.network, attachment.endpoint_name)),
            lambda: trio.to_thread.run_sync(remove_host_interface, attachment.host_ifname),
            lambda: self.agent.detach_endpoint(created.endpoint_id),
            lambda: trio.to_thread.run_sync(remove_host_interface, hostaccess.host_ifname(attachment)),
        ]
        try:
            # The leader allocates the address while the veth pair is built and its host end put
            # on the bridge (the network's encapsulation, read locally, names the bridge).
            known = snapshot.network(target.tenant, target.network)
            encap = known.pkt_tag_type if known is not None else ""

            steps: dict[str, float] = {}  # step → seconds, for the debug log (what a slow ADD spent its time on)

            async def veth_and_port() -> str:
                mac = await _timed(steps, "veth", lambda: trio.to_thread.run_sync(create_veth, attachment, request.netns))
                if encap:
                    await _timed(steps, "port", lambda: self.agent.add_endpoint_port(attachment.host_ifname, created.endpoint_id, encap))
                return mac

            committed, host_mac = await _together(
                lambda: _timed(steps, "endpoint", lambda: _controlled(target, lambda: self.control.create_endpoint(created))), veth_and_port
            )
            endpoint: EndpointState = committed.endpoint
            snapshot = await self.cache.wait_revision(committed.revision)
            network = snapshot.networks.get(endpoint.net_id)
            if network is None:
                raise CniError(INTERNAL_ERROR, f"network {endpoint.net_id} vanished while adding")
            plan = addressing(endpoint, network)
            if encap != network.pkt_tag_type:  # unknown or changed under us: the port goes to the right bridge
                if encap:
                    await self.agent.detach_endpoint(endpoint.id)
                await self.agent.add_endpoint_port(attachment.host_ifname, endpoint.id, network.pkt_tag_type)

            await _together(
                lambda: _timed(steps, "pod", lambda: trio.to_thread.run_sync(configure_pod_end, PodInterface(attachment, request.netns, plan))),
                lambda: _timed(steps, "flows", lambda: self.agent.wait_programmed(committed.revision)),
            )
            result = add_result(request.cni_version, attachment, request.netns, plan, host_mac)
            if not network.gateway:
                result = await _timed(steps, "host access", lambda: self._add_host_access(request, attachment, endpoint, network, snapshot, result))
            labels = endpoint_labels(request, pod_labels)
            if labels:
                update = UpdateEndpoint(target.tenant, target.network, attachment.endpoint_name, attachment.container_id, labels)
                await _controlled(target, lambda: self.control.update_endpoint(update))
            log.info("CNI ADD %s %s: %s on %s", attachment.container_id, attachment.ifname, plan.cidr, endpoint.net_id)
            log.debug("CNI ADD %s steps: %s", attachment.container_id, ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in steps.items()))
            return result
        except BaseException:
            with trio.CancelScope(shield=True):
                for step in reversed(undo):
                    try:
                        await step()
                    except Exception as exc:  # noqa: BLE001 - keep undoing the rest
                        log.warning("CNI ADD %s: undo step failed: %s", attachment.container_id, exc)
            raise
        finally:
            self._adding.discard(attachment)

    async def _add_host_access(
        self,
        request: Request,
        attachment: Attachment,
        endpoint: EndpointState,
        network: NetworkState,
        snapshot: StateSnapshot,
        result: dict[str, Any],
    ) -> dict[str, Any]:
        """Contiv's host access for a pod on a network without a gateway: `host1` with a private
        address, its default route through the node, the Service subnet through the data
        interface; the result lists both ends. HostAccessError when it cannot be given."""
        subnet = private_subnet(snapshot.private_subnet())
        services = hostaccess.service_cidr(request.config, self.service_cidr)
        problem = hostaccess.overlap_problem(subnet, network.subnet, network.id, services)
        if problem:
            raise HostAccessError(problem)
        async with self._host_access_lock:
            used = await trio.to_thread.run_sync(used_private_addresses, subnet)
            access = hostaccess.plan(attachment, subnet, used, endpoint.ip_address, services)
            await trio.to_thread.run_sync(ensure_node_address, access.node_address)
            host_mac, pod_mac = await trio.to_thread.run_sync(create_host_access, access, request.netns)
        log.info("CNI ADD %s: host access %s on %s (node %s)", attachment.container_id, access.pod_address, access.host_ifname, access.node_address)
        return hostaccess.add_to_result(result, access, host_mac, pod_mac, request.netns)

    async def _delete(self, attachment: Attachment) -> dict[str, Any]:
        """Remove whatever exists of the attachment; nothing at all is fine (DEL is idempotent)."""
        endpoints = await self._endpoints_of(attachment)
        # The endpoint goes last: while it exists a retried DEL still finds the port to remove.
        await _together(
            lambda: trio.to_thread.run_sync(remove_host_interface, attachment.host_ifname),
            lambda: trio.to_thread.run_sync(remove_host_interface, hostaccess.host_ifname(attachment)),
            *(lambda e=endpoint: self.agent.detach_endpoint(e.id) for endpoint in endpoints),
        )
        for endpoint in endpoints:
            delete = DeleteEndpoint.of(endpoint)
            await _controlled(Target(endpoint.tenant, endpoint.network, ""), lambda: self.control.delete_endpoint(delete))
            log.info("CNI DEL %s %s: %s freed", attachment.container_id, attachment.ifname, endpoint.ip_address)
        return {}

    async def _check(self, request: Request) -> dict[str, Any]:
        attachment = Attachment(request.container_id, request.ifname)
        endpoints = await self._endpoints_of(attachment)
        if not endpoints:
            raise CniError(CHECK_FAILED, f"container {attachment.container_id} has no endpoint for {attachment.ifname}")
        endpoint = endpoints[0]
        network = self.cache.snapshot.networks.get(endpoint.net_id)
        if network is None:
            raise CniError(CHECK_FAILED, f"network {endpoint.net_id} of the endpoint no longer exists")
        pod = PodInterface(attachment, request.netns, addressing(endpoint, network))
        problems = check_previous_result(request.config, pod.plan) + await trio.to_thread.run_sync(check_pod_interface, pod)
        if problems:
            raise CniError(CHECK_FAILED, "; ".join(problems))
        return {}

    async def _gc(self, request: Request) -> dict[str, Any]:
        valid = valid_attachments(request.config)
        snapshot = await self.cache.sync()
        for endpoint in stale_endpoints(list(snapshot.endpoints.values()), valid, self.node_name):
            attachment = attachment_of(endpoint)
            async with self._container_lock(attachment.container_id):
                log.info("CNI GC: removing %s", endpoint.id)
                await self._delete(attachment)
        # Listed before the ADDs under way and the endpoints are read: a veth made after the
        # listing is not in it, one made before belongs to an ADD still running or finished.
        links = await trio.to_thread.run_sync(host_interface_names)
        keep = {Attachment(container, ifname) for container, ifname in valid} | self._adding
        snapshot = await self.cache.sync()
        keep |= {attachment_of(endpoint) for endpoint in snapshot.endpoints.values() if is_ours(endpoint, self.node_name)}
        for name in stray_host_interfaces(links, keep) + hostaccess.stray_host_access(links, keep):
            log.info("CNI GC: removing stray veth %s", name)
            await trio.to_thread.run_sync(remove_host_interface, name)
        return {}

    async def _endpoints_of(self, attachment: Attachment) -> list[EndpointState]:
        """The attachment's endpoints: from the local snapshot, which holds every endpoint this
        node's ADDs made; only when it has none is the log synced (a restarted follower may not
        have caught up yet)."""
        found = find_endpoints(self.cache.catch_up().endpoints.values(), attachment, self.node_name)
        if not found:
            found = find_endpoints((await self.cache.sync()).endpoints.values(), attachment, self.node_name)
        return found

"""The OVSDB side of a contiv bridge: a narrow `OvsBridge` protocol and its ovsdbapp implementation.

`OvsBridge` is all the node agent needs from OVSDB: make one bridge exist with contiv's settings,
make ports exist or not, keep each port's owner in its `external_ids` (the durable record read
back on restart), read ports with their OpenFlow port numbers, and police ingress for
netprofiles. Every operation is idempotent, so reconcile loops can simply repeat it.

ovsdbapp is blocking and runs its own IDL thread; every call into it goes through
`trio.to_thread.run_sync`. Failures of any kind become `OvsError` naming the bridge and port.
Not responsible for: flows (OpenFlow, see `openflow/`), addresses and routes (netlink), running
the daemons (`managed.py`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

import trio
from ovsdbapp.backend.ovs_idl import connection, idlutils, transaction
from ovsdbapp.schema.open_vswitch.impl_idl import OvsdbIdl, OvsVsctlTransaction

from .errors import OvsError

log = logging.getLogger(__name__)

VXLAN_BRIDGE = "contivVxlanBridge"
VLAN_BRIDGE = "contivVlanBridge"

OFPORT_POLL_S = 0.005  # vswitchd assigns an ofport within a few ms; a CNI ADD waits on it
T = TypeVar("T")


class PortKind(enum.Enum):
    """How OVS attaches the port. A veth host end and a VLAN uplink are both SYSTEM ports:
    OVS treats them alike; the pipeline tells them apart by the owner in external_ids."""

    INTERNAL = "internal"
    SYSTEM = ""
    VXLAN = "vxlan"


@dataclass(frozen=True)
class BridgeSpec:
    """Desired settings of one bridge. `controller` is an OVS target such as `unix:/run/contivd/openflow.sock`;
    None leaves the bridge without a controller (and then `fail_mode` decides forwarding)."""

    name: str
    datapath_type: str = "netdev"
    controller: str | None = None
    fail_mode: str = "secure"
    protocols: tuple[str, ...] = ("OpenFlow13",)
    datapath_id: int | None = None  # fixed, so the controller knows which bridge connected


@dataclass(frozen=True)
class PortSpec:
    """Desired state of one port (and its single interface of the same name)."""

    name: str
    kind: PortKind
    options: Mapping[str, str] = field(default_factory=dict)
    external_ids: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def vxlan(cls, name: str, remote_ip: str, *, external_ids: Mapping[str, str] | None = None) -> PortSpec:
        """A tunnel to one remote VTEP; the VNI is chosen per flow (`key=flow`, set by the pipeline).
        With the userspace datapath the local side is found through OVS's route table: the
        underlay address must sit on an OVS bridge's internal port (docs/ovs.md)."""
        return cls(name, PortKind.VXLAN, {"remote_ip": remote_ip, "key": "flow"}, external_ids or {})


@dataclass(frozen=True)
class PortInfo:
    name: str
    ofport: int
    kind: PortKind
    options: dict[str, str]
    external_ids: dict[str, str]
    ingress_policing_rate_kbps: int
    ingress_policing_burst_kb: int


@dataclass(frozen=True)
class BridgeStatistics:
    name: str
    operations: int
    errors: int
    last_error: str | None


class OvsBridge(Protocol):
    """The node agent's view of one OVS bridge."""

    @property
    def name(self) -> str: ...

    async def ensure_bridge(self) -> None:
        """Create the bridge or correct its settings (datapath, fail mode, protocols, controller)."""

    async def delete_bridge(self) -> None:
        """Remove the bridge and its ports; no error if it is absent."""

    async def ensure_port(self, spec: PortSpec) -> int:
        """Create or correct the port; merge `spec.external_ids` in; return its ofport."""

    async def remove_port(self, name: str) -> None:
        """Remove the port from this bridge; no error if it is absent."""

    async def set_port_external_ids(self, name: str, external_ids: Mapping[str, str]) -> None:
        """Merge keys into the port's external_ids (other keys are kept)."""

    async def get_port_external_ids(self, name: str) -> dict[str, str]: ...

    async def list_ports(self) -> list[PortInfo]:
        """All ports but the bridge's own, once OVS has given each an ofport."""

    async def set_ingress_policing(self, name: str, rate_kbps: int, burst_kb: int) -> None:
        """Police traffic the port receives (0/0 turns policing off)."""


class Ovsdb:
    """One ovsdbapp IDL connection (and its thread) to an OVSDB server, shared by a node's bridges.

    Open it with `open_ovsdb()`; the connection reconnects by itself if ovsdb-server restarts."""

    def __init__(self, api: OvsdbIdl, conn: connection.Connection, timeout_s: float) -> None:
        self.api = api
        self.conn = conn
        self.timeout_s = timeout_s

    def bridge(self, spec: BridgeSpec) -> OvsdbappBridge:
        return OvsdbappBridge(self, spec)


STOP_WAIT_SECONDS = 2.0


class _CommitOnlyTransaction(OvsVsctlTransaction):  # type: ignore[misc]  # ovsdbapp is untyped
    """An ovs-vsctl-style transaction that returns once OVSDB has committed it.

    OvsVsctlTransaction then waits in the IDL thread for ovs-vswitchd to apply the commit
    (`cur_cfg` reaching `next_cfg`) and, when vswitchd is busy or still starting past the
    timeout, logs `Post-commit checks failed` with a traceback at ERROR while the call succeeds.
    That wait is redundant here: every change that needs vswitchd is followed by
    `_wait_ofports`, which reports the same condition once, as an OvsError."""

    def post_commit(self, txn: Any) -> None:
        transaction.Transaction.post_commit(self, txn)


def _commit_only_transaction(api: OvsdbIdl, check_error: bool = False, log_errors: bool = True, **_: Any) -> _CommitOnlyTransaction:
    return _CommitOnlyTransaction(api, api.ovsdb_connection, check_error=check_error, log_errors=log_errors)


@asynccontextmanager
async def open_ovsdb(target: str, *, timeout_s: float = 10.0) -> AsyncIterator[Ovsdb]:
    """Connect to `target` (`unix:/path/db.sock`), stop the IDL thread on exit."""

    def connect() -> connection.Connection:
        idl = connection.OvsdbIdl.from_server(target, "Open_vSwitch")
        conn = connection.Connection(idl, timeout=timeout_s)
        conn.start()
        return conn

    try:
        conn = await trio.to_thread.run_sync(connect)
    except Exception as exc:
        raise OvsError(f"cannot connect to OVSDB at {target}: {exc}") from exc
    # ovsdbapp keeps the connection on the API *class*: the first one created would silently be
    # reused for every later target. A class per connection keeps several OVSDBs (one per node
    # namespace, as in tests) apart.
    api_class = type("NodeOvsdbIdl", (OvsdbIdl,), {"_ovsdb_connection": None, "create_transaction": _commit_only_transaction})
    try:
        yield Ovsdb(api_class(conn), conn, timeout_s)
    finally:
        # ovsdbapp's stop() can block for good when a transaction was queued just as its thread
        # saw the stop flag (the thread exits without taking it, and stop() waits for room in the
        # one-slot queue): shutdown waits a bounded time and leaves the daemon thread behind.
        with trio.CancelScope(shield=True), trio.move_on_after(STOP_WAIT_SECONDS):
            await trio.to_thread.run_sync(conn.stop, timeout_s, abandon_on_cancel=True)


class OvsdbappBridge:
    """`OvsBridge` over ovsdbapp. Holds no state of its own beyond counters: OVSDB is the record."""

    def __init__(self, ovsdb: Ovsdb, spec: BridgeSpec) -> None:
        self._ovsdb = ovsdb
        self._api = ovsdb.api
        self.spec = spec
        self._operations = 0
        self._errors = 0
        self._last_error: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def statistics(self) -> BridgeStatistics:
        return BridgeStatistics(self.name, self._operations, self._errors, self._last_error)

    async def ensure_bridge(self) -> None:
        spec = self.spec

        def ensure() -> None:
            exists = _run(self._api.br_exists(spec.name))
            controllers = _run(self._api.get_controller(spec.name)) if exists else []
            with self._api.transaction(check_error=True, log_errors=False) as txn:
                txn.add(self._api.add_br(spec.name, may_exist=True, datapath_type=spec.datapath_type))
                txn.add(
                    self._api.db_set(
                        "Bridge",
                        spec.name,
                        ("datapath_type", spec.datapath_type),
                        ("fail_mode", spec.fail_mode),
                        ("protocols", list(spec.protocols)),
                        # contivd programs every flow itself; in-band rules would shadow them.
                        ("other_config", _other_config(spec)),
                    )
                )
                wanted = [spec.controller] if spec.controller else []
                if sorted(controllers) != wanted:  # replacing controllers drops the OpenFlow session
                    txn.add(self._api.set_controller(spec.name, wanted) if wanted else self._api.del_controller(spec.name))

        await self._call(f"bridge {self.name}", ensure)
        # vswitchd reports a datapath it cannot open only through the bridge's own interface.
        await self._wait_ofports([self.name])

    async def delete_bridge(self) -> None:
        await self._call(f"bridge {self.name}", lambda: _run(self._api.del_br(self.name, if_exists=True)))

    async def ensure_port(self, spec: PortSpec) -> int:
        where = f"bridge {self.name} port {spec.name}"

        def ensure() -> bool:
            """True when the port was created (by one transaction that also waited for vswitchd)."""
            with self._ovsdb.conn.lock:  # the IDL's rows, as the connection thread last saw them
                exists = idlutils.row_by_value(self._api.idl, "Port", "name", spec.name, None) is not None
            if not exists:  # the common case, a new pod: the port, its interface and its owner at once
                with self._api.transaction(check_error=True, log_errors=False) as txn:
                    txn.add(self._api.add_port(self.name, spec.name, may_exist=True, type=spec.kind.value, options=dict(spec.options)))
                    if spec.external_ids:
                        txn.add(self._api.db_set("Port", spec.name, ("external_ids", dict(spec.external_ids))))
                return True
            owner = _run(self._api.port_to_br(spec.name))
            if owner != self.name:
                raise OvsError(f"{where}: the port is on bridge {owner}")
            with self._api.transaction(check_error=True, log_errors=False) as txn:
                # Options are replaced, not merged: a key left from an earlier spec would change the port.
                txn.add(self._api.db_clear("Interface", spec.name, "options"))
                txn.add(self._api.db_set("Interface", spec.name, ("type", spec.kind.value), ("options", dict(spec.options))))
                if spec.external_ids:
                    txn.add(self._api.db_set("Port", spec.name, ("external_ids", dict(spec.external_ids))))
            return False

        await self._call(where, ensure)
        (info,) = await self._wait_ofports([spec.name])
        return info.ofport

    async def remove_port(self, name: str) -> None:
        await self._call(
            f"bridge {self.name} port {name}",
            lambda: _run(self._api.del_port(name, bridge=self.name, if_exists=True)),
        )

    async def set_port_external_ids(self, name: str, external_ids: Mapping[str, str]) -> None:
        await self._call(
            f"bridge {self.name} port {name}",
            lambda: _run(self._api.db_set("Port", name, ("external_ids", dict(external_ids)), if_exists=False)),
        )

    async def get_port_external_ids(self, name: str) -> dict[str, str]:
        ids = await self._call(
            f"bridge {self.name} port {name}",
            lambda: _run(self._api.db_get("Port", name, "external_ids")),
        )
        return dict(ids)

    async def list_ports(self) -> list[PortInfo]:
        names = await self._call(f"bridge {self.name}", lambda: _run(self._api.list_ports(self.name)))
        return await self._wait_ofports(list(names), skip_vanished=True)

    async def set_ingress_policing(self, name: str, rate_kbps: int, burst_kb: int) -> None:
        if rate_kbps < 0 or burst_kb < 0:
            raise self._error(f"bridge {self.name} port {name}: policing rate and burst must be >= 0")
        await self._call(
            f"bridge {self.name} port {name}",
            lambda: _run(
                self._api.db_set(
                    "Interface",
                    name,
                    ("ingress_policing_rate", rate_kbps),
                    ("ingress_policing_burst", burst_kb),
                    if_exists=False,
                )
            ),
        )

    def _port_exists(self, name: str) -> bool:
        return bool(_run(self._api.db_find("Port", ("name", "=", name), columns=["name"])))

    async def _wait_ofports(self, names: list[str], skip_vanished: bool = False) -> list[PortInfo]:
        """Read the ports, polling until vswitchd has assigned every ofport (or refused one).
        `skip_vanished`: a listing leaves out ports deleted since their names were read (a
        concurrent CNI DEL) instead of failing."""
        where = f"bridge {self.name} ports {', '.join(names)}" if names else f"bridge {self.name}"
        with trio.move_on_after(self._ovsdb.timeout_s):
            while True:
                infos = await self._call(where, lambda: self._read_ports(names, skip_vanished))
                if all(info.ofport != 0 for info in infos):
                    failed = [info for info in infos if info.ofport < 0]
                    if failed:
                        errors = await self._call(where, partial(self._interface_errors, [i.name for i in failed]))
                        raise self._error(f"bridge {self.name}: OVS could not attach port(s) {'; '.join(errors)}")
                    return infos
                await trio.sleep(OFPORT_POLL_S)
        raise self._error(
            f"{where}: not attached by ovs-vswitchd within {self._ovsdb.timeout_s} s "
            "(is it running? its log says why a datapath or device could not be opened)"
        )

    def _read_ports(self, names: list[str], skip_vanished: bool = False) -> list[PortInfo]:
        if not names:
            return []
        columns = ["name", "ofport", "type", "options", "ingress_policing_rate", "ingress_policing_burst"]
        # Whole tables, filtered here: ovsdbapp looks each named record up by a scan of its table.
        wanted = set(names)
        ifaces = {row["name"]: row for row in _run(self._api.db_list("Interface", columns=columns)) if row["name"] in wanted}
        ports = {row["name"]: row for row in _run(self._api.db_list("Port", columns=["name", "external_ids"])) if row["name"] in wanted}
        missing = sorted(set(names) - (set(ifaces) & set(ports)))
        if missing and skip_vanished:
            names = [name for name in names if name not in missing]
        elif missing:
            raise OvsError(f"bridge {self.name}: no such port(s) {', '.join(missing)}")
        return [
            PortInfo(
                name=name,
                ofport=_ofport(ifaces[name]["ofport"]),
                kind=PortKind(ifaces[name]["type"]),
                options=dict(ifaces[name]["options"]),
                external_ids=dict(ports[name]["external_ids"]),
                ingress_policing_rate_kbps=ifaces[name]["ingress_policing_rate"],
                ingress_policing_burst_kb=ifaces[name]["ingress_policing_burst"],
            )
            for name in sorted(names)
        ]

    def _interface_errors(self, names: list[str]) -> list[str]:
        errors = []
        for name in names:
            error = _run(self._api.db_get("Interface", name, "error"))
            errors.append(f"{name}: {error or 'unknown error'}")  # an optional string: [] when unset
        return errors

    async def _call(self, where: str, fn: Callable[[], T]) -> T:
        """Run a blocking ovsdbapp call in a worker thread; any failure becomes OvsError."""
        self._operations += 1
        try:
            return await trio.to_thread.run_sync(fn)
        except OvsError as exc:
            raise self._error(str(exc)) from None
        except Exception as exc:
            raise self._error(f"{where}: {type(exc).__name__}: {exc}") from exc

    def _error(self, message: str) -> OvsError:
        self._errors += 1
        self._last_error = message
        return OvsError(message)


def _other_config(spec: BridgeSpec) -> dict[str, str]:
    config = {"disable-in-band": "true"}
    if spec.datapath_id is not None:
        config["datapath-id"] = f"{spec.datapath_id:016x}"
    return config


def _run(command: Any) -> Any:
    """Execute one ovsdbapp command, raising instead of logging: callers turn it into OvsError."""
    return command.execute(check_error=True, log_errors=False)


def _ofport(value: Any) -> int:
    """OVSDB's optional integer: [] while vswitchd has not attached the port yet (mapped to 0)."""
    if isinstance(value, list):
        return int(value[0]) if value else 0
    return int(value)

"""A stateful in-memory `OvsBridge` for unit tests of code that programs bridges.

`FakeOvsdb` stands for one OVSDB, because port names are unique across its bridges, as they are
in OVS. Each `FakeOvsBridge` follows the same rules as `OvsdbappBridge`: operations are
idempotent, ofports are allocated from 1 and kept while the port exists, external_ids are
merged, options are replaced, and errors are `OvsError` naming the bridge and port.
`tests/ovs/test_fake_parity.py` runs one scenario against both implementations. The fake does
not model devices: a port whose device is missing attaches anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .bridge import BridgeSpec, PortInfo, PortKind, PortSpec
from .errors import OvsError


@dataclass
class _Port:
    bridge: str
    ofport: int
    kind: PortKind
    options: dict[str, str]
    external_ids: dict[str, str] = field(default_factory=dict)
    policing: tuple[int, int] = (0, 0)


@dataclass
class FakeOvsdb:
    bridges: dict[str, BridgeSpec] = field(default_factory=dict)
    ports: dict[str, _Port] = field(default_factory=dict)

    def bridge(self, spec: BridgeSpec) -> FakeOvsBridge:
        return FakeOvsBridge(self, spec)


class FakeOvsBridge:
    def __init__(self, db: FakeOvsdb, spec: BridgeSpec) -> None:
        self._db = db
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    async def ensure_bridge(self) -> None:
        self._db.bridges[self.name] = self.spec

    async def delete_bridge(self) -> None:
        self._db.bridges.pop(self.name, None)
        for name in [n for n, p in self._db.ports.items() if p.bridge == self.name]:
            del self._db.ports[name]

    async def ensure_port(self, spec: PortSpec) -> int:
        self._require_bridge()
        port = self._db.ports.get(spec.name)
        if port is not None and port.bridge != self.name:
            raise OvsError(f"bridge {self.name} port {spec.name}: the port is on bridge {port.bridge}")
        if port is None:
            used = {p.ofport for p in self._db.ports.values() if p.bridge == self.name}
            ofport = next(n for n in range(1, len(used) + 2) if n not in used)
            port = self._db.ports[spec.name] = _Port(self.name, ofport, spec.kind, {})
        port.kind, port.options = spec.kind, dict(spec.options)
        port.external_ids.update(spec.external_ids)
        return port.ofport

    async def remove_port(self, name: str) -> None:
        port = self._db.ports.get(name)
        if port is not None and port.bridge == self.name:
            del self._db.ports[name]

    async def set_port_external_ids(self, name: str, external_ids: Mapping[str, str]) -> None:
        self._port(name).external_ids.update(external_ids)

    async def get_port_external_ids(self, name: str) -> dict[str, str]:
        return dict(self._port(name).external_ids)

    async def list_ports(self) -> list[PortInfo]:
        self._require_bridge()
        return [
            PortInfo(name, p.ofport, p.kind, dict(p.options), dict(p.external_ids), *p.policing)
            for name, p in sorted(self._db.ports.items())
            if p.bridge == self.name
        ]

    async def set_ingress_policing(self, name: str, rate_kbps: int, burst_kb: int) -> None:
        if rate_kbps < 0 or burst_kb < 0:
            raise OvsError(f"bridge {self.name} port {name}: policing rate and burst must be >= 0")
        self._port(name).policing = (rate_kbps, burst_kb)

    def _port(self, name: str) -> _Port:
        port = self._db.ports.get(name)
        if port is None:
            raise OvsError(f"bridge {self.name} port {name}: no such port")
        return port

    def _require_bridge(self) -> None:
        if self.name not in self._db.bridges:
            raise OvsError(f"bridge {self.name}: no such bridge")

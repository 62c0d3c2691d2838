"""Typed, frozen records of what the netmaster writes under `/contiv.io/state/` and `/contiv.io/nodes/`.

Each record is parsed once from the store's JSON (`from_json`) and renders it back with Contiv's
Go field names (`to_json`), so the REST and `/debug/ofnet` shapes do not change. Readers (the
agent, the CNI server, the status page, metrics) use the attributes and never see a key or a
JSON shape. `from_json` raises RecordError naming the object when a value is unusable: one bad
object is reported and skipped by the snapshot, never allowed to hide the rest.

Each record declares its wire format once, as a table of `Wire` entries (attribute, Go field
name, parser); `from_json`/`to_json` are that table read in both directions, so a value the
netmaster writes renders back to the same JSON (tests/state checks it).

Not responsible for: validation of configuration (contivd.model), allocation (the netmaster's
IPAM writes the bitmaps these records carry opaquely).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any, ClassVar, TypeVar

from openflow.inputs import NetpolPod, NetpolRule

from ..model import PolicyRule

T = TypeVar("T")


class RecordError(ValueError):
    """A stored value that is not the shape its key promises; the message names the object."""


Labels = tuple[tuple[str, str], ...]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _labels(value: Any) -> Labels:
    if not value:
        return ()
    if not isinstance(value, Mapping):
        raise TypeError(f"labels must be an object, got {type(value).__name__}")
    return tuple((str(k), str(v)) for k, v in value.items())  # stored order: to_json gives back the same object


def _optional_labels(value: Any) -> Labels | None:
    return None if value is None else _labels(value)


def _labels_json(labels: Labels | None) -> dict[str, str] | None:
    return None if labels is None else dict(labels)


@dataclass(frozen=True)
class Wire:
    """One stored field: the record's attribute, its Go name, how a stored value is read (a
    missing field reads as `missing`, or is an error when `required`) and how it is written."""

    attr: str
    name: str
    parse: Callable[[Any], Any] = _text
    missing: Any = ""
    required: bool = False
    render: Callable[[Any], Any] | None = None
    omit_empty: bool = False  # a contivd extension of Contiv's record: absent when empty, so Contiv's shape stays


def _int(attr: str, name: str) -> Wire:
    return Wire(attr, name, int, 0)


R = TypeVar("R", bound="_Record")


class _Record:
    """from_json/to_json over the subclass's WIRE table; a subclass adds what the table cannot say."""

    __slots__ = ()
    KIND: ClassVar[str]
    WIRE: ClassVar[tuple[Wire, ...]]

    @classmethod
    def _fields(cls, value: Mapping[str, Any]) -> dict[str, Any]:
        return {w.attr: w.parse(value[w.name] if w.required else value.get(w.name, w.missing)) for w in cls.WIRE}

    @classmethod
    def _from(cls: type[R], value: Any, **extra: Callable[[Mapping[str, Any]], Any]) -> R:
        def build(v: Mapping[str, Any]) -> R:
            return cls(**cls._fields(v), **{attr: read(v) for attr, read in extra.items()})

        return _parse(cls.KIND, value, build)

    def _wire_json(self) -> dict[str, Any]:
        return {w.name: (w.render or (lambda x: x))(getattr(self, w.attr)) for w in self.WIRE if not (w.omit_empty and not getattr(self, w.attr))}


def _parse(kind: str, value: Any, build: Callable[[Mapping[str, Any]], T]) -> T:
    """Run `build(value)` and turn any shape problem into one RecordError naming the object."""
    if not isinstance(value, Mapping):
        raise RecordError(f"{kind}: stored value is {type(value).__name__}, not an object")
    try:
        return build(value)
    except (KeyError, TypeError, ValueError) as exc:
        name = value.get("id") or value.get("RuleId") or value.get("name") or "?"
        raise RecordError(f"{kind} {name}: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class EndpointState(_Record):
    """Contiv's `CfgEndpointState` (`/contiv.io/state/eps/<net>.<tenant>-<endpoint>`)."""

    id: str
    net_id: str
    endpoint_id: str
    service_name: str
    endpoint_group_id: int
    endpoint_group_key: str
    ip_address: str
    ipv6_address: str
    mac_address: str
    homing_host: str
    intf_name: str = ""
    vtep_ip: str = ""
    labels: Labels | None = None  # None: stored as null (never labelled), () an empty object
    container_id: str = ""
    ep_common_name: str = ""
    k8s_pod: str = ""  # `<namespace>/<name>` of the Kubernetes pod the CNI server made it for (the leader's pod watch finds it by this)

    KIND: ClassVar[str] = "endpoint"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("id", "id", required=True),
        Wire("net_id", "netID", required=True),
        Wire("endpoint_id", "endpointID"),
        Wire("service_name", "serviceName"),
        _int("endpoint_group_id", "endpointGroupId"),
        Wire("endpoint_group_key", "endpointGroupKey"),
        Wire("ip_address", "ipAddress"),
        Wire("ipv6_address", "ipv6Address"),
        Wire("mac_address", "macAddress"),
        Wire("homing_host", "homingHost"),
        Wire("intf_name", "intfName"),
        Wire("vtep_ip", "vtepIP"),
        Wire("labels", "labels", _optional_labels, None, render=_labels_json),
        Wire("container_id", "containerId"),
        Wire("ep_common_name", "epCommonName"),
        Wire("k8s_pod", "k8sPod", omit_empty=True),
    )

    @property
    def tenant(self) -> str:
        return self.net_id.rpartition(".")[2]

    @property
    def network(self) -> str:
        return self.net_id.rpartition(".")[0]

    @classmethod
    def from_json(cls, value: Any) -> EndpointState:
        return cls._from(value)

    def to_json(self) -> dict[str, Any]:
        return self._wire_json()


_IPV6_FIELDS = ("ipv6SubnetIP", "ipv6SubnetLen", "ipv6Gateway", "ipv6AllocMap", "ipv6LastHost")


@dataclass(frozen=True, slots=True)
class NetworkState(_Record):
    """Contiv's `CfgNetworkState` (`/contiv.io/state/nets/<net>.<tenant>`).

    The address bitmaps stay in their stored encodings (`ip_alloc_map` base64, the IPv6 map an
    object): only the netmaster's IPAM and the usage summary (state.usage) read them.
    """

    id: str
    tenant: str
    network_name: str
    nw_type: str
    pkt_tag_type: str
    pkt_tag: int
    ext_pkt_tag: int
    subnet_ip: str
    subnet_len: int
    gateway: str
    ip_addr_range: str
    ep_addr_count: int
    ep_count: int
    ip_alloc_map: str
    network_tag: str
    ipv6: tuple[tuple[str, Any], ...] = ()
    """The IPv6 fields (ipv6SubnetIP, ipv6SubnetLen, ipv6Gateway, ipv6AllocMap, ipv6LastHost) as
    stored, present only for dual-stack networks."""

    KIND: ClassVar[str] = "network"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("id", "id", required=True),
        Wire("tenant", "tenant"),
        Wire("network_name", "networkName"),
        Wire("nw_type", "nwType", missing="data"),
        Wire("pkt_tag_type", "pktTagType"),
        _int("pkt_tag", "pktTag"),
        _int("ext_pkt_tag", "extPktTag"),
        Wire("subnet_ip", "subnetIP", required=True),
        Wire("subnet_len", "subnetLen", int, required=True),
        Wire("gateway", "gateway"),
        Wire("ip_addr_range", "ipAddrRange"),
        _int("ep_addr_count", "epAddrCount"),
        _int("ep_count", "epCount"),
        Wire("ip_alloc_map", "ipAllocMap"),
        Wire("network_tag", "networkTag"),
    )

    @property
    def subnet(self) -> str:
        return f"{self.subnet_ip}/{self.subnet_len}"

    @classmethod
    def from_json(cls, value: Any) -> NetworkState:
        return cls._from(value, ipv6=lambda v: tuple((k, v[k]) for k in _IPV6_FIELDS if k in v))

    def to_json(self) -> dict[str, Any]:
        return {**self._wire_json(), **dict(self.ipv6)}


@dataclass(frozen=True, slots=True)
class EndpointGroupState(_Record):
    """Contiv's `EndpointGroupState` (`/contiv.io/state/endpointGroups/<group>:<tenant>`), with the
    group's netprofile (DSCP, bandwidth, burst) as the netmaster copies it in."""

    id: str
    group_name: str
    tenant_name: str
    network_name: str
    endpoint_group_id: int
    pkt_tag_type: str
    pkt_tag: int
    ext_pkt_tag: int
    ep_count: int
    group_tag: str
    ip_pool: str = ""
    pool_subnet: str = ""
    epg_ip_alloc_map: str = ""
    dscp: int = 0
    bandwidth: str = ""
    burst: int = 0

    KIND: ClassVar[str] = "endpoint group"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("id", "id", required=True),
        Wire("group_name", "groupName"),
        Wire("tenant_name", "tenantName"),
        Wire("network_name", "networkName"),
        _int("endpoint_group_id", "endpointGroupId"),
        Wire("pkt_tag_type", "pktTagType"),
        _int("pkt_tag", "pktTag"),
        _int("ext_pkt_tag", "extPktTag"),
        _int("ep_count", "epCount"),
        Wire("group_tag", "groupTag"),
    )
    POOL: ClassVar[tuple[Wire, ...]] = (Wire("ip_pool", "IPPool"), Wire("pool_subnet", "poolSubnet"), Wire("epg_ip_alloc_map", "epgIpAllocMap"))
    PROFILE: ClassVar[tuple[Wire, ...]] = (_int("dscp", "DSCP"), Wire("bandwidth", "Bandwidth"), _int("burst", "Burst"))

    @property
    def net_id(self) -> str:
        return f"{self.network_name}.{self.tenant_name}"

    @classmethod
    def from_json(cls, value: Any) -> EndpointGroupState:
        optional = {w.attr: (lambda v, w=w: w.parse(v.get(w.name, w.missing))) for w in cls.POOL + cls.PROFILE}
        return cls._from(value, **optional)

    def to_json(self) -> dict[str, Any]:
        pool = {w.name: getattr(self, w.attr) for w in self.POOL} if self.ip_pool else {}
        return {**self._wire_json(), **pool, **{w.name: getattr(self, w.attr) for w in self.PROFILE}}  # the profile: always written


@dataclass(frozen=True, slots=True)
class Provider(_Record):
    """One provider of a service load balancer (Contiv's `ServiceProvider`)."""

    ip_address: str
    container_id: str
    labels: Labels
    tenant: str
    network: str
    services: tuple[str, ...]
    endpoint_key: str

    KIND: ClassVar[str] = "service provider"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("ip_address", "IPAddress", required=True),
        Wire("container_id", "ContainerID"),
        Wire("labels", "Labels", _labels, None, render=dict),
        Wire("tenant", "Tenant"),
        Wire("network", "Network"),
        Wire("services", "Services", lambda v: tuple(str(s) for s in v or ()), None, render=list),
    )

    @classmethod
    def from_json(cls, value: Any) -> Provider:
        return cls._from(value, endpoint_key=lambda v: _text(v.get("EpIDKey")))

    def to_json(self) -> dict[str, Any]:
        return {**self._wire_json(), "Container": self.container_id, "EpIDKey": self.endpoint_key}  # ContainerID again, as Contiv writes it


@dataclass(frozen=True, slots=True)
class ServiceLBState(_Record):
    """Contiv's `ServiceLBState` (`/contiv.io/state/serviceLB/<service>:<tenant>`)."""

    id: str
    service_name: str
    tenant_name: str
    network: str
    ports: tuple[str, ...]
    """`Port:TargetPort:TCP|UDP` as stored; the agent parses them into flow inputs."""
    selectors: Labels
    ip_address: str
    providers: tuple[tuple[str, Provider], ...]

    KIND: ClassVar[str] = "service"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("id", "id", required=True),
        Wire("service_name", "servicename"),
        Wire("tenant_name", "tenantname"),
        Wire("network", "subnet"),
        Wire("ports", "ports", lambda v: tuple(str(p) for p in v or ()), None, render=list),
        Wire("selectors", "selectors", _labels, None, render=dict),
        Wire("ip_address", "ipaddress"),
        Wire(
            "providers",
            "providers",
            lambda v: tuple((str(k), Provider.from_json(p)) for k, p in (v or {}).items()),
            None,
            render=lambda providers: {key: provider.to_json() for key, provider in providers},
        ),
    )

    @classmethod
    def from_json(cls, value: Any) -> ServiceLBState:
        return cls._from(value)

    def to_json(self) -> dict[str, Any]:
        return self._wire_json()


@dataclass(frozen=True, order=True, slots=True)
class KubeBackend:
    """One ready endpoint of a Service port: its address and the port it listens on (a named
    `targetPort` resolved from the EndpointSlice, so backends of one Service port may differ)."""

    ip: str
    port: int


@dataclass(frozen=True, slots=True)
class KubeServicePort:
    """One port of a Kubernetes Service and the ready backends behind it."""

    name: str
    protocol: str  # "TCP" or "UDP": the leader skips what the datapath cannot program
    port: int
    node_port: int  # 0: no NodePort
    backends: tuple[KubeBackend, ...]  # sorted; endpoints that are not ready are left out

    @classmethod
    def from_json(cls, value: Any) -> KubeServicePort:
        def build(v: Mapping[str, Any]) -> KubeServicePort:
            backends = tuple(sorted(KubeBackend(str(b["ip"]), int(b["port"])) for b in v.get("backends") or ()))
            return cls(_text(v.get("name")), str(v["protocol"]), int(v["port"]), int(v.get("nodePort") or 0), backends)

        return _parse("kubernetes service port", value, build)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "protocol": self.protocol,
            "port": self.port,
            "nodePort": self.node_port,
            "backends": [{"ip": b.ip, "port": b.port} for b in self.backends],
        }


@dataclass(frozen=True, slots=True)
class KubeServiceState(_Record):
    """A Kubernetes Service as the leader resolved it from the Service and its EndpointSlices
    (`/contiv.io/k8s/services/<namespace>/<name>`). Only what the datapath programs is kept:
    a headless or unprogrammable Service has no record."""

    namespace: str
    name: str
    cluster_ip: str
    ports: tuple[KubeServicePort, ...]
    affinity_timeout: int  # sessionAffinity ClientIP: seconds a client keeps its backend; 0 = none
    resource_version: str  # the Service's, as last resolved (shown by ctl and the status page)
    external_ips: tuple[str, ...] = ()  # spec.externalIPs and status.loadBalancer.ingress IPs (IPv4), sorted
    local_traffic: bool = False  # externalTrafficPolicy Local: a node sends outside clients to its own backends only
    health_check_node_port: int = 0  # spec.healthCheckNodePort (LoadBalancer + Local): answered by every node's agent

    KIND: ClassVar[str] = "kubernetes service"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("namespace", "namespace", required=True),
        Wire("name", "name", required=True),
        Wire("cluster_ip", "clusterIP", required=True),
        Wire(
            "ports",
            "ports",
            lambda v: tuple(KubeServicePort.from_json(p) for p in v or ()),
            None,
            render=lambda ports: [p.to_json() for p in ports],
        ),
        _int("affinity_timeout", "affinityTimeoutSeconds"),
        Wire("resource_version", "resourceVersion"),
        Wire("external_ips", "externalIPs", lambda v: tuple(str(ip) for ip in v or ()), (), render=list, omit_empty=True),
        Wire("local_traffic", "externalTrafficPolicyLocal", bool, False, omit_empty=True),
        Wire("health_check_node_port", "healthCheckNodePort", int, 0, omit_empty=True),
    )

    @property
    def key(self) -> str:
        """`<namespace>/<name>`, the id the snapshot files it under."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_json(cls, value: Any) -> KubeServiceState:
        return cls._from(value)

    def to_json(self) -> dict[str, Any]:
        return self._wire_json()


@dataclass(frozen=True, slots=True)
class NodeRecord(_Record):
    """A live node (`/contiv.io/nodes/<name>`, under the node's lease)."""

    name: str
    raft_address: str | None
    api_url: str
    control_ip: str
    vtep_ip: str
    readonly: bool
    version: str
    agent_url: str = ""  # the node agent's REST API; "" when the node runs no datapath
    kubernetes: bool = False  # started with --kubeconfig (contivd.k8s.modeoff: mode off once no live node is)

    KIND: ClassVar[str] = "node"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("name", "name", required=True),
        Wire("raft_address", "raft_address", lambda v: None if v is None else str(v), None),
        Wire("api_url", "api_url"),
        Wire("control_ip", "control_ip"),
        Wire("vtep_ip", "vtep_ip"),
        Wire("readonly", "readonly", bool, False),
        Wire("version", "version"),
        Wire("agent_url", "agent_url"),
        Wire("kubernetes", "kubernetes", bool, False, omit_empty=True),
    )

    @classmethod
    def from_json(cls, value: Any) -> NodeRecord:
        return cls._from(value)

    def to_json(self) -> dict[str, Any]:
        return self._wire_json()


def policy_rule_from_json(value: Any) -> PolicyRule:
    """An ofnet policy rule (`/contiv.io/state/policyRule/<RuleId>`): the model's PolicyRule is its record."""
    return _parse("policy rule", value, PolicyRule.from_json)


def policy_rule_to_json(rule: PolicyRule) -> dict[str, Any]:
    """The stored value of a policy rule: ofnet's fields and the state's `id`."""
    return {"id": rule.rule_id, **rule.to_json()}


def netpol_pod_to_json(pod: NetpolPod) -> dict[str, Any]:
    """A pod's compiled NetworkPolicy rules as stored (`/contiv.io/k8s/netpol/<ns>/<pod>`): one
    list per rule, `[direction, priority, pod ip, peer "a.b.c.d/len" or null, protocol,
    [first port, last port] or null, action, rule id]` (compact: a pod may have hundreds)."""
    rules = [
        [
            r.direction,
            r.priority,
            str(IPv4Address(r.pod_ip)),
            None if r.peer is None else f"{IPv4Address(r.peer[0])}/{r.peer[1]}",
            r.proto,
            None if r.ports is None else list(r.ports),
            r.action,
            r.rule_id,
        ]
        for r in pod.rules
    ]
    return {"pod": pod.pod, "rules": rules}


def netpol_pod_from_json(value: Any) -> NetpolPod:
    """The inverse of `netpol_pod_to_json`; RecordError naming the pod when unusable."""
    pod = str(value.get("pod", "")) if isinstance(value, Mapping) else ""
    try:
        rules = []
        for direction, priority, ip, peer, proto, ports, action, rule_id in value["rules"]:
            if direction not in ("ingress", "egress") or action not in ("allow", "drop"):
                raise ValueError(f"direction {direction!r} / action {action!r}")
            address, _, length = (peer or "").partition("/")
            rules.append(
                NetpolRule(
                    direction,
                    int(priority),
                    int(IPv4Address(ip)),
                    None if peer is None else (int(IPv4Address(address)), int(length)),
                    int(proto),
                    None if ports is None else (int(ports[0]), int(ports[1])),
                    action,
                    str(rule_id),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"NetworkPolicy rules of pod {pod or '?'}: {exc}") from None
    return NetpolPod(pod, tuple(rules))

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
_PARSED_AS: dict[Callable[[Any], Any], type] = {_text: str, int: int}


class _Record:
    """from_json/to_json over the subclass's WIRE table; a subclass adds what the table cannot say."""

    __slots__ = ()
    KIND: ClassVar[str]
    WIRE: ClassVar[tuple[Wire, ...]]

    @classmethod
    def _fields(cls, value: Mapping[str, Any], wire: tuple[Wire, ...]) -> dict[str, Any]:
        fields = {}
        for w in wire:
            raw = value[w.name] if w.required else value.get(w.name, w.missing)
            # the parse of a value already of its type is the value: skipped (the netmaster's plans decode records on their hot path)
            fields[w.attr] = raw if type(raw) is _PARSED_AS.get(w.parse) else w.parse(raw)
        return fields

    @classmethod
    def _from(cls: type[R], value: Any, wire: tuple[Wire, ...] | None = None, **extra: Callable[[Mapping[str, Any]], Any]) -> R:
        """The record of `value`: the fields of `wire` (the class's WIRE by default) and `extra`."""

        def build(v: Mapping[str, Any]) -> R:
            return cls(**cls._fields(v, cls.WIRE if wire is None else wire), **{attr: read(v) for attr, read in extra.items()})

        return _parse(cls.KIND, value, build)

    @classmethod
    def from_json(cls: type[R], value: Any) -> R:
        """The record of a stored value; RecordError naming the object when it is unusable."""
        return cls._from(value)

    def to_json(self) -> dict[str, Any]:
        """The stored value (Contiv's Go field names)."""
        return self._wire_json()

    def _wire_json(self) -> dict[str, Any]:
        out = {}
        for w in self.WIRE:
            value = getattr(self, w.attr)
            if not (w.omit_empty and not value):
                out[w.name] = value if w.render is None else w.render(value)
        return out


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


def _host_ids(value: Any) -> frozenset[int]:
    if not isinstance(value, Mapping):
        raise TypeError(f"ipv6AllocMap must be an object, got {type(value).__name__}")
    return frozenset(int(host) for host in value)


@dataclass(frozen=True, slots=True)
class NetworkState(_Record):
    """Contiv's `CfgNetworkState` (`/contiv.io/state/nets/<net>.<tenant>`).

    The IPv4 bitmap stays in its stored encoding (`ip_alloc_map`, base64): only the netmaster's
    IPAM and the usage summary (state.usage) read it. The IPv6 fields are stored only for
    dual-stack networks (`ipv6_subnet_ip` set); their map is stored `{"<host index>": true}`.
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
    ipv6_subnet_ip: str = ""  # "": not dual-stack, and no ipv6* field is stored
    ipv6_subnet_len: int = 0
    ipv6_gateway: str = ""
    ipv6_alloc_map: frozenset[int] = frozenset()  # host indexes (address - subnet address) in use
    ipv6_last_host: int = 0

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
    IPV6: ClassVar[tuple[Wire, ...]] = (
        Wire("ipv6_subnet_ip", "ipv6SubnetIP"),
        _int("ipv6_subnet_len", "ipv6SubnetLen"),
        Wire("ipv6_gateway", "ipv6Gateway"),
        Wire("ipv6_alloc_map", "ipv6AllocMap", _host_ids, {}, render=lambda hosts: {str(h): True for h in sorted(hosts)}),
        _int("ipv6_last_host", "ipv6LastHost"),
    )

    @property
    def subnet(self) -> str:
        return f"{self.subnet_ip}/{self.subnet_len}"

    @property
    def dual_stack(self) -> bool:
        return bool(self.ipv6_subnet_ip)

    @property
    def ipv6_subnet(self) -> str:
        return f"{self.ipv6_subnet_ip}/{self.ipv6_subnet_len}"

    @classmethod
    def from_json(cls, value: Any) -> NetworkState:
        return cls._from(value, cls.WIRE + cls.IPV6 if isinstance(value, Mapping) and "ipv6SubnetIP" in value else cls.WIRE)

    def to_json(self) -> dict[str, Any]:
        if not self.dual_stack:
            return self._wire_json()
        return {**self._wire_json(), **{w.name: (w.render or (lambda x: x))(getattr(self, w.attr)) for w in self.IPV6}}


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
        return cls._from(value, cls.WIRE + cls.POOL + cls.PROFILE)

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


@dataclass(frozen=True, slots=True)
class ServiceProvidersState(_Record):
    """Contiv's `SvcProvider` (`/contiv.io/state/provider/<service>:<tenant>`): the addresses of
    a service's providers, sorted."""

    id: str
    service_name: str
    providers: tuple[str, ...]

    KIND: ClassVar[str] = "service providers"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("id", "id", required=True),
        Wire("service_name", "ServiceName"),
        Wire("providers", "Providers", lambda v: tuple(str(p) for p in v or ()), None, render=list),
    )


@dataclass(frozen=True, slots=True)
class TagsState(_Record):
    """The cluster's tags in use (`/contiv.io/state/tags/global`): one fastpath bitset per kind,
    stored base64 (a set bit is a tag in use); contivd.netmaster.resources allocates in them."""

    vlan: str
    vxlan: str
    local_vlan: str
    epg_id: str

    KIND: ClassVar[str] = "tags"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("vlan", "vlan", required=True),
        Wire("vxlan", "vxlan", required=True),
        Wire("local_vlan", "localVlan", required=True),
        Wire("epg_id", "epgId", required=True),
    )


@dataclass(frozen=True, slots=True)
class GlobalConfigState(_Record):
    """Contiv's global `Cfg` (`/contiv.io/master/config/global`): the fabric and forwarding modes."""

    nw_infra_type: str
    fwd_mode: str
    arp_mode: str
    pvt_subnet: str
    id: str = ""

    KIND: ClassVar[str] = "global configuration"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("id", "id"),
        Wire("nw_infra_type", "nw-infra-type"),
        Wire("fwd_mode", "fwd-mode"),
        Wire("arp_mode", "arp-mode"),
        Wire("pvt_subnet", "pvt-subnet"),
    )


@dataclass(frozen=True, slots=True)
class GlobalState(_Record):
    """Contiv's global resource state (`/contiv.io/state/global/global`): the configured VLAN and
    VXLAN ranges, under `auto`."""

    vlans: str
    vxlans: str
    id: str = ""

    KIND: ClassVar[str] = "global state"
    WIRE: ClassVar[tuple[Wire, ...]] = (Wire("id", "id"),)

    @classmethod
    def from_json(cls, value: Any) -> GlobalState:
        def auto(name: str) -> Callable[[Mapping[str, Any]], str]:
            return lambda v: _text((v.get("auto") or {}).get(name))

        return cls._from(value, vlans=auto("VLANs"), vxlans=auto("VXLANs"))

    def to_json(self) -> dict[str, Any]:
        return {**self._wire_json(), "auto": {"VLANs": self.vlans, "VXLANs": self.vxlans}}


@dataclass(frozen=True, slots=True)
class RuleMap:
    """One rule of an attached policy: the rule object as configured and the ofnet rules it
    compiled to for the group."""

    rule: Mapping[str, Any]  # the configuration object (contivd.model's validated rule), stored whole
    ofnet_rules: tuple[PolicyRule, ...]

    @classmethod
    def from_json(cls, value: Any) -> RuleMap:
        def build(v: Mapping[str, Any]) -> RuleMap:
            rules = v.get("OfnetRules") or {}
            return cls(dict(v["Rule"]), tuple(PolicyRule.from_json({"RuleId": rule_id, **rule}) for rule_id, rule in rules.items()))

        return _parse("policy rule map", value, build)

    def to_json(self) -> dict[str, Any]:
        return {"Rule": dict(self.rule), "OfnetRules": {r.rule_id: r.to_json() for r in self.ofnet_rules}}


@dataclass(frozen=True, slots=True)
class EpgPolicyState(_Record):
    """Contiv's `EpgPolicy` (`/contiv.io/state/policy/<tenant>:<group>:<tenant>:<policy>`): a
    policy attached to a group, the group's id and each rule's compiled ofnet rules."""

    id: str
    endpoint_group_id: int
    rule_maps: tuple[tuple[str, RuleMap], ...]  # by rule key

    KIND: ClassVar[str] = "group policy"
    WIRE: ClassVar[tuple[Wire, ...]] = (
        Wire("id", "id", required=True),
        _int("endpoint_group_id", "EndpointGroupID"),
        Wire(
            "rule_maps",
            "RuleMaps",
            lambda v: tuple((str(k), RuleMap.from_json(m)) for k, m in (v or {}).items()),
            None,
            render=lambda maps: {key: rule_map.to_json() for key, rule_map in maps},
        ),
    )

    def to_json(self) -> dict[str, Any]:
        return {**self._wire_json(), "EpgPolicyKey": self.id}


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

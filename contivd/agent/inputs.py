"""Typed store records + this node's OVS ports → `openflow.NodeInputs` (the adapter between them).

`openflow/` knows nothing of Contiv's store: this module turns `contivd.state` records into the
flow builders' frozen inputs. It decides which endpoints are local (homed on this node *and*
attached to a port here), which are remote (and behind which VTEP, from the node registry), and
which objects cannot be used: those are skipped and reported, never allowed to stop the rest
of the node's flows.

`InputsBuilder` remembers the input it made for each object together with the records it was
made from; when those records are the same objects again (the snapshot replaces a record only
when its value changes), the previous input object is reused. A sync after one pod's attach
therefore converts one endpoint, and the flow engine recognises every other input by identity.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openflow import InputError, LocalPort, NodeInputs, PolicyRuleSpec, RemoteEndpoint, ServiceSpec, TunnelPort
from openflow.flow import IP_TCP, IP_UDP
from openflow.inputs import TCP_FLAGS, Backend, Encap, HostPort, NetpolPod, NetworkRef, Route, Router, ServicePort, bandwidth_kbps, ipv4, mac

from ..model import PolicyRule
from ..state import EndpointGroupState, EndpointState, KubeServiceState, NetworkState, NodeRecord, ServiceLBState, StateSnapshot


@dataclass(frozen=True)
class Built:
    inputs: NodeInputs
    problems: tuple[str, ...]
    """One line per skipped object: what the status page and logs show."""


def network_ref(net: NetworkState) -> NetworkRef:
    encap = net.pkt_tag_type
    if encap not in ("vxlan", "vlan"):
        raise InputError(f"network {net.id}: pktTagType {encap!r} is not vxlan/vlan")
    if not 1 <= net.pkt_tag <= 4094 or (encap == "vxlan" and not 1 <= net.ext_pkt_tag < 1 << 24):
        raise InputError(f"network {net.id}: pktTag {net.pkt_tag} / extPktTag {net.ext_pkt_tag} out of range")
    gateway = ipv4(net.gateway, f"network {net.id} gateway") if net.gateway else 0
    return NetworkRef(net.id, encap, net.pkt_tag, net.ext_pkt_tag, gateway)  # type: ignore[arg-type]


def local_port(ep: EndpointState, net: NetworkState, group: EndpointGroupState | None, ofport: int) -> LocalPort:
    what = f"endpoint {ep.id}"
    if not 1 <= ofport < 0xFFFFFF00:
        raise InputError(f"{what}: ofport {ofport} is not a usable port number")
    dscp = group.dscp if group else 0
    if not 0 <= dscp < 64:
        raise InputError(f"{what}: DSCP {dscp} is not 0..63")
    return LocalPort(
        ofport,
        ep.id,
        ipv4(ep.ip_address, what),
        mac(ep.mac_address, what),
        network_ref(net),
        ep.endpoint_group_id,
        dscp,
        bandwidth_kbps(group.bandwidth if group else "", what),
        group.burst if group else 0,
    )


def remote_endpoint(ep: EndpointState, net: NetworkState, vtep_ip: str) -> RemoteEndpoint:
    what = f"endpoint {ep.id}"
    network = network_ref(net)
    if network.encap == "vxlan" and not vtep_ip:
        raise InputError(f"{what}: a vxlan endpoint needs its node's VTEP IP")
    return RemoteEndpoint(
        ep.id, ipv4(ep.ip_address, what), mac(ep.mac_address, what), network, ep.endpoint_group_id, ipv4(vtep_ip, what) if vtep_ip else 0
    )


def rule_spec(rule: PolicyRule) -> PolicyRuleSpec:
    what = f"policy rule {rule.rule_id}"
    if rule.action not in ("allow", "deny"):
        raise InputError(f"{what}: Action {rule.action!r} is not allow/deny")
    if not 0 <= rule.priority <= 0xFFFF - 10:
        raise InputError(f"{what}: Priority {rule.priority} out of range")
    if rule.tcp_flags not in TCP_FLAGS:
        raise InputError(f"{what}: TcpFlags {rule.tcp_flags!r} is not one of {sorted(TCP_FLAGS)}")
    for address in (rule.src_ip_addr, rule.dst_ip_addr):
        if address is not None and address.version != 4:
            raise InputError(f"{what}: {address} is not an IPv4 prefix")
    proto = rule.ip_protocol
    ports = proto in (IP_TCP, IP_UDP)  # ofnet ignores ports of other protocols
    return PolicyRuleSpec(
        rule.rule_id,
        rule.priority,
        rule.action,  # type: ignore[arg-type]
        rule.src_endpoint_group,
        rule.dst_endpoint_group,
        None if rule.src_ip_addr is None else (int(rule.src_ip_addr.network_address), rule.src_ip_addr.prefixlen),
        None if rule.dst_ip_addr is None else (int(rule.dst_ip_addr.network_address), rule.dst_ip_addr.prefixlen),
        proto,
        rule.src_port if ports else 0,
        rule.dst_port if ports else 0,
        TCP_FLAGS[rule.tcp_flags] if proto == IP_TCP else None,
    )


def service_spec(lb: ServiceLBState, providers: Sequence[str] | None) -> ServiceSpec:
    """From the serviceLB state; providers from the provider state when there is one (they agree).
    Every port of a Contiv serviceLB reaches every provider on the port's one TargetPort."""
    what = f"service {lb.id}"
    ips = list(providers) if providers is not None else [p.ip_address for _, p in lb.providers]
    addresses = sorted({ipv4(ip, what) for ip in ips})
    ports = set()
    for text in lb.ports:
        parts = text.split(":")
        if len(parts) != 3 or parts[2].upper() not in ("TCP", "UDP") or not (parts[0].isdigit() and parts[1].isdigit()):
            raise InputError(f"{what}: port {text!r} is not Port:TargetPort:TCP|UDP")
        port, target = _port_number(parts[0], what), _port_number(parts[1], what)
        ports.add(ServicePort(_PROTOCOLS[parts[2].upper()], port, tuple(Backend(ip, target) for ip in addresses)))
    return ServiceSpec(lb.id, ipv4(lb.ip_address, what), tuple(sorted(ports)))


_PROTOCOLS = {"TCP": IP_TCP, "UDP": IP_UDP}
KUBE_SERVICE_PREFIX = "k8s:"
"""Service ids of Kubernetes Services: ``k8s:<namespace>/<name>`` (a Contiv serviceLB id has no ``/``)."""


def _port_number(value: int | str, what: str) -> int:
    number = int(value)
    if not 1 <= number <= 0xFFFF:
        raise InputError(f"{what}: port {value} is not 1..65535")
    return number


def kube_service_spec(service: KubeServiceState) -> ServiceSpec:
    """A Kubernetes ClusterIP Service: each port with its own ready backends and their own
    (resolved) target ports; sessionAffinity ClientIP as the affinity timeout."""
    what = f"kubernetes service {service.key}"
    ports = []
    for port in service.ports:
        proto = _PROTOCOLS.get(port.protocol.upper())
        if proto is None:
            raise InputError(f"{what}: port {port.name or port.port} protocol {port.protocol!r} is not TCP/UDP")
        backends = {Backend(ipv4(b.ip, what), _port_number(b.port, what)) for b in port.backends}
        ports.append(ServicePort(proto, _port_number(port.port, what), tuple(sorted(backends))))
    if len({(p.proto, p.port) for p in ports}) != len(ports):
        raise InputError(f"{what}: a protocol and port is listed twice")
    if service.affinity_timeout < 0:
        raise InputError(f"{what}: affinity timeout {service.affinity_timeout} is negative")
    return ServiceSpec(KUBE_SERVICE_PREFIX + service.key, ipv4(service.cluster_ip, what), tuple(sorted(ports)), service.affinity_timeout)


class InputsBuilder:
    """Builds one bridge's NodeInputs from the snapshot, converting only records that changed."""

    def __init__(self, node: str, encap: Encap):
        self.node = node
        self.encap = encap
        self._made: dict[str, tuple[tuple[Any, ...], Any]] = {}  # object id → (source records, input or error text)

    def _convert(self, key: str, sources: tuple[Any, ...], make: Any) -> Any:
        """The input for `key` made from `sources`; reused while every source is the same object."""
        cached = self._made.get(key)
        if cached is not None and len(cached[0]) == len(sources) and all(a is b for a, b in zip(cached[0], sources, strict=True)):
            return cached[1]
        try:
            made: Any = make()
        except (InputError, ValueError) as exc:
            made = str(exc)
        self._made[key] = (sources, made)
        return made

    def _netpol(self, snapshot: StateSnapshot, local_ips: set[int], seen: set[str]) -> tuple[NetpolPod, ...]:
        """The NetworkPolicy records: a local pod's as stored (the same object), a remote pod's
        without its egress rules (made once per record)."""
        out: list[NetpolPod] = []
        for name, pod in snapshot.k8s_netpol.items():
            if not pod.rules or pod.rules[0].pod_ip in local_ips or all(r.direction == "ingress" for r in pod.rules):
                out.append(pod)
                continue
            key = f"netpol:{name}"
            seen.add(key)
            out.append(self._convert(key, (pod,), lambda: without_egress(pod)))  # noqa: B023
        return tuple(out)

    def build(
        self,
        snapshot: StateSnapshot,
        ports: Mapping[str, int],
        tunnels: Mapping[str, int],
        uplinks: Sequence[int] = (),
        round: int = 0,
        host_port: HostPort | None = None,
        router: Router | None = None,
        routes: tuple[Route, ...] = (),
    ) -> Built:
        """ports: endpoint id → ofport attached here; tunnels: remote VTEP IP → VXLAN ofport."""
        problems: list[str] = []
        vteps = {n.name: n.vtep_ip for n in snapshot.nodes.values()}
        local: list[LocalPort] = []
        remote: list[RemoteEndpoint] = []
        seen: set[str] = set()
        for ep in snapshot.endpoints.values():
            net = snapshot.networks.get(ep.net_id)
            if net is None or net.pkt_tag_type != self.encap:
                continue
            key = f"ep:{ep.id}"
            seen.add(key)
            if ep.homing_host == self.node:
                ofport = ports.get(ep.id)
                if ofport is None:
                    continue
                group = snapshot.group_of(ep)
                made = self._convert(key, (ep, net, group, ofport), lambda: local_port(ep, net, group, ofport))  # noqa: B023
                if isinstance(made, LocalPort):
                    local.append(made)
                else:
                    problems.append(made)
            else:
                vtep = vteps.get(ep.homing_host, "")
                if self.encap == "vxlan" and not vtep:
                    problems.append(f"endpoint {ep.id}: node {ep.homing_host!r} is not registered; no VTEP")
                    continue
                made = self._convert(key, (ep, net, vtep), lambda: remote_endpoint(ep, net, vtep))  # noqa: B023
                if isinstance(made, RemoteEndpoint):
                    remote.append(made)
                else:
                    problems.append(made)
        rules, rule_problems = rule_specs(snapshot, self._convert, seen)
        services, service_problems = service_specs(snapshot, self._convert, seen)
        problems += rule_problems + service_problems
        services = with_node_entry(services, kube_service_ids(snapshot.k8s_services.values()), [*local, *remote])
        netpol = self._netpol(snapshot, {p.ip for p in local}, seen)
        for gone in self._made.keys() - seen:
            del self._made[gone]
        problems += [f"{key}: {why}" for key, why in sorted(snapshot.problems.items())]
        tunnel_ports = [TunnelPort(ofport, int(ipaddress.IPv4Address(ip))) for ip, ofport in sorted(tunnels.items())]
        inputs = NodeInputs(
            encap=self.encap,
            local_ports=tuple(local),
            remote_endpoints=tuple(remote),
            tunnels=tuple(tunnel_ports),
            uplinks=tuple(sorted(uplinks)),
            rules=tuple(rules),
            services=tuple(services),
            round=round,
            host_port=host_port,
            netpol=netpol,
            router=router,
            routes=routes,
        )
        return Built(inputs, tuple(problems))


Convert = Callable[[str, tuple[Any, ...], Callable[[], Any]], Any]
"""(object id, the records it is made from, how to make it) → its input, or the error text."""


def convert_now(key: str, sources: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """A Convert that remembers nothing (the trace's: one snapshot, one answer)."""
    try:
        return make()
    except (InputError, ValueError) as exc:
        return str(exc)


def rule_specs(snapshot: StateSnapshot, convert: Convert = convert_now, seen: set[str] | None = None) -> tuple[list[PolicyRuleSpec], list[str]]:
    """The Contiv rules as the agents program them, and one problem per rule they refuse.
    One function for the agents and `ctl trace`, so the model judges exactly what OVS holds."""
    rules: list[PolicyRuleSpec] = []
    problems: list[str] = []
    for rule in snapshot.rules.values():
        key = f"rule:{rule.rule_id}"
        if seen is not None:
            seen.add(key)
        made = convert(key, (rule,), lambda: rule_spec(rule))  # noqa: B023
        (rules.append(made) if isinstance(made, PolicyRuleSpec) else problems.append(made))
    return rules, problems


def service_specs(snapshot: StateSnapshot, convert: Convert = convert_now, seen: set[str] | None = None) -> tuple[list[ServiceSpec], list[str]]:
    """The services as the agents program them (a Contiv serviceLB with an address, a Kubernetes
    Service; one per VIP), and one problem per service they refuse or skip."""
    services: list[ServiceSpec] = []
    problems: list[str] = []
    made_from: list[tuple[str, tuple[Any, ...], Callable[[], Any]]] = []
    for name, lb in snapshot.services.items():
        if lb.ip_address:
            provider = snapshot.providers.get(name)
            made_from.append((f"service:{name}", (lb, provider), functools.partial(service_spec, lb, provider)))
    for name, kube in snapshot.k8s_services.items():
        made_from.append((f"k8s-service:{name}", (kube,), functools.partial(kube_service_spec, kube)))
    for key, sources, make in made_from:
        if seen is not None:
            seen.add(key)
        made = convert(key, sources, make)
        (services.append(made) if isinstance(made, ServiceSpec) else problems.append(made))
    return _one_service_per_vip(services, problems), problems


def without_egress(pod: NetpolPod) -> NetpolPod:
    """A remote pod's NetworkPolicy rules as this node needs them: its ingress only. Its egress
    is judged where it sends from (tunnel traffic skips policy), and what its egress isolation
    commits is committed on its node."""
    return NetpolPod(pod.pod, tuple(r for r in pod.rules if r.direction == "ingress"))


def kube_service_ids(services: Iterable[KubeServiceState]) -> set[str]:
    """Service ids of the Kubernetes Services: every one is entered from the node (its own
    connections to the ClusterIP, its NodePorts and external addresses DNATed to it)."""
    return {KUBE_SERVICE_PREFIX + s.key for s in services}


def with_node_entry(services: list[ServiceSpec], entered: set[str], endpoints: Sequence[LocalPort | RemoteEndpoint]) -> list[ServiceSpec]:
    """The services in `entered` get the network of their first backend this bridge knows as the
    network the node's own traffic to the VIP enters (openflow.ServiceSpec.entry_network); a service
    none of whose backends is on this bridge's networks is not entered here."""
    if not entered:
        return services
    networks = {ep.ip: ep.network for ep in endpoints}
    out = []
    for spec in services:
        if spec.service_id in entered:
            network = next((networks[b.ip] for port in spec.ports for b in port.backends if b.ip in networks), None)
            if network is not None:
                spec = dataclasses.replace(spec, entry_network=network)
        out.append(spec)
    return out


def _one_service_per_vip(services: list[ServiceSpec], problems: list[str]) -> list[ServiceSpec]:
    """Two live services on one VIP would claim one ARP answer (and maybe one VIP:port): the
    first by id keeps it, the other is skipped and reported, and nothing else stops."""
    owners: dict[int, str] = {}
    kept = []
    for spec in sorted(services, key=_service_id):
        if not spec.live:
            kept.append(spec)
            continue
        owner = owners.setdefault(spec.vip, spec.service_id)
        if owner == spec.service_id:
            kept.append(spec)
        else:
            problems.append(f"service {spec.service_id}: VIP {ipaddress.IPv4Address(spec.vip)} is already service {owner}'s")
    return kept


def _service_id(spec: ServiceSpec) -> str:
    return spec.service_id


def vtep_peers(nodes: Mapping[str, NodeRecord], node: str) -> set[str]:
    """The VTEP IPs of every other registered node (one VXLAN port each)."""
    return {n.vtep_ip for n in nodes.values() if n.name != node and n.vtep_ip}

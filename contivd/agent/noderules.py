"""contivd's iptables chains on the node: no forwarding between pods through the node, masquerading of pods' private traffic, NodePorts.

A pod on a network without a gateway has its default route through the node (host access), and
the node routes every local pod through either that pod's `ch…` veth or a bridge's host port
(`cvhost-<encap>`, whose traffic the switch classifies as coming from the node, so policy is
skipped). A node with `ip_forward=1` (every Kubernetes node) would therefore carry pod → node
→ other pod and bypass Contiv's policy. The filter chain forbids that: nothing new is forwarded
into a `ch…` or `cvhost-…` interface, except connections the node DNATed itself (NodePort).
The node's own traffic (kubelet probes) takes OUTPUT, not FORWARD, and is not affected.

A Service port with a NodePort is DNATed, for every local address of the node, to its
ClusterIP:port (nat PREROUTING for other hosts, OUTPUT for the node's own processes); the node
routes the ClusterIP into the bridge's host port (contivd.agent.hostnet), where the switch
load-balances it like a pod's connection, and SNATs it to the host port's NodePort source (the
node's VTEP on the VXLAN bridge, the private address otherwise), which the switches send the
replies back to this node for. The node's own connections to a ClusterIP take the same route
(every Service's, in contivd.agent.hostnet.SERVICE_REALM) and the same source.

The chains are contivd's alone (`CONTIVD-*`): each is rewritten whole, atomically, with
`iptables-restore --noflush` (declaring a chain flushes it in the same transaction, so there is
no moment without rules), and one jump to it is inserted first in its built-in chain. They are
never removed by contivd: pods, their routes and the datapath outlive a stopped or restarting
contivd, so must the rules that keep them apart (removing them by hand is in docs/kubernetes.md).

Pure rendering first (`node_rules`, `restore_input`, `differs`), then the blocking shell around
`iptables-save`/`iptables-restore` (callers use `trio.to_thread.run_sync`).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..state import KubeServiceState
from .hostnet import SERVICE_REALM

FORWARD_CHAIN = "CONTIVD-FORWARD"
POSTROUTING_CHAIN = "CONTIVD-POSTROUTING"
PREROUTING_CHAIN = "CONTIVD-PREROUTING"
OUTPUT_CHAIN = "CONTIVD-OUTPUT"
NODE_PORTS_CHAIN = "CONTIVD-NODEPORTS"
EXTERNAL_IPS_CHAIN = "CONTIVD-EXTERNALIPS"
LOCAL_TRAFFIC_CHAIN = "CONTIVD-LOCALTRAFFIC"
POD_LINKS = "ch+"  # the node ends of host-access veths (contivd.cni_server.hostaccess.HOST_PREFIX)
HOST_PORTS = "cvhost-+"  # every bridge's host port
JUMPS: dict[str, tuple[tuple[str, str], ...]] = {
    "filter": (("FORWARD", FORWARD_CHAIN),),
    "nat": (("PREROUTING", PREROUTING_CHAIN), ("OUTPUT", OUTPUT_CHAIN), ("POSTROUTING", POSTROUTING_CHAIN)),
}
TIMEOUT_SECONDS = 30.0


class NodeRulesError(Exception):
    """iptables could not be read or written (missing binary, no permission, a rule refused)."""


@dataclass(frozen=True)
class NodeRules:
    """The body of each contivd chain, table → chain → rules, in `iptables-save` form."""

    tables: Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True, order=True)
class NodePort:
    """One Service port the node serves on its own addresses."""

    protocol: str  # "tcp" or "udp"
    node_port: int
    cluster_ip: str
    port: int
    name: str  # `<namespace>/<service>:<port name>`, the rule's comment


def node_ports(services: Iterable[KubeServiceState], entered: set[str]) -> list[NodePort]:
    """The NodePorts of the Services in `entered` (keys `<namespace>/<name>` the node's bridges
    route into: contivd.agent.hostnet.entered_vips), for ports with ready backends. A record
    iptables would refuse (a port out of range) is left out: one rule refused fails the whole
    table's transaction."""
    return sorted(
        NodePort(port.protocol.lower(), port.node_port, service.cluster_ip, port.port, _comment(f"{service.key}:{port.name}"))
        for service in services
        if service.key in entered
        for port in service.ports
        if 0 < port.node_port <= 0xFFFF and 0 < port.port <= 0xFFFF and port.backends and port.protocol.upper() in ("TCP", "UDP")
    )


@dataclass(frozen=True, order=True)
class ExternalPort:
    """One Service port the node serves on an external address (`externalIPs`, a load
    balancer's ingress IP), wherever the packet for it comes from."""

    protocol: str  # "tcp" or "udp"
    address: str
    port: int
    cluster_ip: str
    name: str  # `<namespace>/<service>:<port name>`, the rule's comment


def external_ports(services: Iterable[KubeServiceState], entered: set[str]) -> list[ExternalPort]:
    """The external addresses' ports of the Services in `entered` (as node_ports)."""
    return sorted(
        ExternalPort(port.protocol.lower(), address, port.port, service.cluster_ip, _comment(f"{service.key}:{port.name}"))
        for service in services
        if service.key in entered
        for address in service.external_ips
        for port in service.ports
        if 0 < port.port <= 0xFFFF and port.backends and port.protocol.upper() in ("TCP", "UDP")
    )


@dataclass(frozen=True, order=True)
class LocalPort:
    """One port of an externalTrafficPolicy Local Service, as outside clients reach it on this
    node: its nodePort on the node's addresses (`address` "") or an external address, served by
    this node's own backends only (none: refused)."""

    protocol: str  # "tcp" or "udp"
    address: str  # "": the nodePort on every local address
    port: int  # the nodePort, or the Service port on an external address
    backends: tuple[tuple[str, int], ...]  # this node's ready backends (address, target port)
    name: str  # `<namespace>/<service>:<port name>`, the rule's comment


def local_ports(services: Iterable[KubeServiceState], entered: set[str], local_backends: set[str]) -> list[LocalPort]:
    """The nodePorts and external addresses of the entered Local Services, each with the backends
    among `local_backends` (the pods this node routes through a host port)."""
    out = []
    for service in services:
        if not service.local_traffic or service.key not in entered:
            continue
        for port in service.ports:
            if not (0 < port.port <= 0xFFFF and port.backends and port.protocol.upper() in ("TCP", "UDP")):
                continue
            mine = tuple((b.ip, b.port) for b in port.backends if b.ip in local_backends and 0 < b.port <= 0xFFFF)
            name = _comment(f"{service.key}:{port.name}")
            if 0 < port.node_port <= 0xFFFF:
                out.append(LocalPort(port.protocol.lower(), "", port.node_port, mine, name))
            out += [LocalPort(port.protocol.lower(), address, port.port, mine, name) for address in service.external_ips]
    return sorted(out)


def local_traffic_rules(ports: Sequence[LocalPort]) -> tuple[str, ...]:
    """Outside clients of a Local Service's port: DNAT straight to one of this node's backends
    (kube-proxy's random split: 1/n, 1/(n-1), …, the last one unconditional), the client's
    address kept (CONTIVD-POSTROUTING returns before any SNAT for a DNAT not to a VIP route);
    without a local backend, no NAT at all (ACCEPT ends the nat table: a nodePort then meets no
    listener, an external address the filter drop in CONTIVD-FORWARD)."""
    rules = []
    for p in ports:
        where = "-m addrtype --dst-type LOCAL " if not p.address else ""
        head = f'{f"-d {p.address}/32 " if p.address else ""}-p {p.protocol} -m comment --comment "{p.name}" {where}-m {p.protocol} --dport {p.port}'
        if not p.backends:
            rules.append(f"{head} -j ACCEPT")
        for index, (address, target) in enumerate(p.backends):
            left = len(p.backends) - index
            split = f" -m statistic --mode random --probability {_probability(left)}" if left > 1 else ""
            rules.append(f"{head}{split} -j DNAT --to-destination {address}:{target}")
    return tuple(rules)


def _probability(left: int) -> str:
    """1/left as iptables-save prints it (the kernel keeps it in 31 bits)."""
    return f"{round(0x80000000 / left) / 0x80000000:.11f}"


def _comment(text: str) -> str:
    """Kubernetes names are DNS labels; anything else is replaced rather than quoted."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "./:_-") else "_" for c in text)[:200]


def node_rules(
    private_subnet: ipaddress.IPv4Network,
    node_private: ipaddress.IPv4Address,
    ports: Sequence[NodePort] = (),
    sources: Mapping[str, str] | None = None,
    external: Sequence[ExternalPort] = (),
    local: Sequence[LocalPort] = (),
) -> NodeRules:
    """What contivd's chains hold for this node's private subnet and address and its NodePorts;
    `sources`: host port → the address its NodePort connections are SNATed to (its
    openflow.HostPort.nodeport_source; the private address for the others)."""
    forward: tuple[str, ...] = (
        # replies of connections the node accepted (a pod's to the outside, masqueraded)
        f"-o {POD_LINKS} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        f"-o {POD_LINKS} -j DROP",  # nothing new into a pod's host1: pod → node → pod
        f"-o {HOST_PORTS} -m conntrack --ctstate DNAT -j ACCEPT",  # NodePort: DNATed by the node itself
        f"-o {HOST_PORTS} -j DROP",  # nothing else into a bridge: it would skip policy
        f"-i {POD_LINKS} -j ACCEPT",  # pods without a gateway reach the outside (even with FORWARD policy DROP)
        f"-i {HOST_PORTS} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",  # NodePort replies
        # the switch hands the node what pods send through their gateway to addresses it does not
        # know (external IPs, replies to a Local NodePort's clients): nothing new goes on from there
        f"-i {HOST_PORTS} -j DROP",
    )
    # an external address of a Local Service without a backend here: not forwarded elsewhere
    forward = (
        tuple(
            f'-d {p.address}/32 -p {p.protocol} -m comment --comment "{p.name}" -m {p.protocol} --dport {p.port} -j DROP'
            for p in local
            if p.address and not p.backends
        )
        + forward
    )
    postrouting = (
        # externalTrafficPolicy Local: DNATed to a pod (not a VIP route), the client's address stays
        f"-o {HOST_PORTS} -m conntrack --ctstate DNAT -m realm ! --realm {SERVICE_REALM:#x} -j RETURN",
        # a DNATed connection into a bridge gets an address of the node that the switches route back to it
        *(f"-o {port} -m conntrack --ctstate DNAT -j SNAT --to-source {source}" for port, source in sorted((sources or {}).items())),
        f"-o {HOST_PORTS} -m conntrack --ctstate DNAT -j SNAT --to-source {node_private}",
        *own_service_snat(node_private, sources or {}),
        f"-o {POD_LINKS} -j RETURN",
        f"-o {HOST_PORTS} -j RETURN",
        f"-s {private_subnet} -j MASQUERADE",  # Contiv's: private traffic leaving the node
    )
    to_node_ports = f"-m addrtype --dst-type LOCAL -j {NODE_PORTS_CHAIN}"
    nat = {
        # outside clients (not the node, whose packets take OUTPUT; not pods, from a host port or a pod link with a private address)
        PREROUTING_CHAIN: (f"! -s {private_subnet} ! -i {HOST_PORTS} -j {LOCAL_TRAFFIC_CHAIN}", to_node_ports, f"-j {EXTERNAL_IPS_CHAIN}"),
        OUTPUT_CHAIN: (f"! -d 127.0.0.0/8 {to_node_ports}", f"-j {EXTERNAL_IPS_CHAIN}"),  # from 127/8 the DNATed packet could not leave lo
        NODE_PORTS_CHAIN: tuple(
            f'-p {p.protocol} -m comment --comment "{p.name}" -m {p.protocol} --dport {p.node_port} -j DNAT --to-destination {p.cluster_ip}:{p.port}'
            for p in ports
        ),
        EXTERNAL_IPS_CHAIN: external_rules(external),
        LOCAL_TRAFFIC_CHAIN: local_traffic_rules(local),
        POSTROUTING_CHAIN: postrouting,
    }
    return NodeRules({"filter": {FORWARD_CHAIN: forward}, "nat": nat})


def external_rules(external: Sequence[ExternalPort]) -> tuple[str, ...]:
    """externalIPs and load-balancer IPs, from other hosts, from pods (whose packets for them
    the switch hands to the host port, openflow.flows.forward) and from the node itself: DNAT to
    ClusterIP:port, then the NodePort path (route into the bridge, SNAT to the NodePort source)."""
    return tuple(
        f'-d {e.address}/32 -p {e.protocol} -m comment --comment "{e.name}" -m {e.protocol} --dport {e.port} -j DNAT --to-destination {e.cluster_ip}:{e.port}'
        for e in external
    )


def own_service_snat(node_private: ipaddress.IPv4Address, sources: Mapping[str, str]) -> tuple[str, ...]:
    """The node's own connections to a service VIP (kubelet, hostNetwork pods): the VIP routes
    (contivd.agent.hostnet.SERVICE_REALM) give them the private address as source, which only
    local backends can answer; like a NodePort's, they take their host port's NodePort source
    (the VTEP, which every node routes back to this one), and any source a socket chose itself
    becomes one the switches route back."""
    realm = f"-m realm --realm {SERVICE_REALM:#x}"
    return (
        *(f"-o {port} {realm} -j SNAT --to-source {source}" for port, source in sorted(sources.items())),
        f"-o {HOST_PORTS} {realm} -j SNAT --to-source {node_private}",
    )


def owned_lines(saved: str) -> tuple[dict[str, tuple[str, ...]], set[tuple[str, str]]]:
    """From one table's `iptables-save` text: the rules of contivd's chains (chain → rules in
    order) and the jumps to them present in built-in chains ((built-in, chain) pairs)."""
    ours: dict[str, list[str]] = {}
    jumps = set()
    for line in saved.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) < 3 or parts[0] != "-A":
            continue
        if parts[1].startswith("CONTIVD-"):
            ours.setdefault(parts[1], []).append(parts[2])
        elif parts[2].startswith("-j CONTIVD-") and " " not in parts[2][3:]:
            jumps.add((parts[1], parts[2][3:]))
    return {chain: tuple(body) for chain, body in ours.items()}, jumps


def restore_input(rules: NodeRules, table: str, present_jumps: set[tuple[str, str]]) -> str:
    """One `iptables-restore --noflush` transaction making `table`'s contivd chains exactly
    `rules` and inserting the jumps that are missing."""
    chains = rules.tables[table]
    lines = [f"*{table}", *(f":{chain} - [0:0]" for chain in chains)]
    lines += [f"-A {chain} {rule}" for chain, body in chains.items() for rule in body]
    lines += [f"-I {builtin} 1 -j {chain}" for builtin, chain in JUMPS[table] if (builtin, chain) not in present_jumps]
    return "\n".join([*lines, "COMMIT", ""])


def differs(rules: NodeRules, table: str, saved: str) -> bool:
    ours, jumps = owned_lines(saved)
    chains = rules.tables[table]
    return any(ours.get(chain, ()) != body for chain, body in chains.items()) or not set(JUMPS[table]) <= jumps


# ---- blocking iptables -------------------------------------------------------------------


def _run(command: list[str], stdin: str = "") -> str:
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NodeRulesError(f"{command[0]}: {exc}") from None
    if done.returncode != 0:
        raise NodeRulesError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def reconcile(rules: NodeRules) -> list[str]:
    """Make contivd's chains and jumps equal `rules` in every table where they are not; returns
    the tables rewritten. Other chains and rules are never touched."""
    rewritten = []
    for table in rules.tables:
        saved = _run(["iptables-save", "-t", table])
        if differs(rules, table, saved):
            _run(["iptables-restore", "--noflush", "-w", "5"], restore_input(rules, table, owned_lines(saved)[1]))
            rewritten.append(table)
    return rewritten

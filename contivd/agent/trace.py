"""One packet through this node's bridge as OVS itself would forward it (`ofproto/trace`), for
`ctl trace` to show beside the model's verdict: the source's half (the packet as a local pod
sends it) or the destination's half (the same packet as it arrives from the source's node:
through the VXLAN tunnel from the source's VTEP with the network's VNI, tagged on the VLAN
uplink, or in routing mode untagged from the ToR; docs/pipeline.md's classifier).

Pure parts: the flow text of each half (`trace_flow`, `arrival_flow`) and the verdict read from
OVS's answer (`datapath_verdict`); the I/O is one `ovs-appctl ofproto/trace` run. Conntrack
is traced as a new connection (OVS's default for each `ct` recirculation), so the answer is
that of a connection's first packet, which is what policy judges. A packet to a Service's VIP
ends at the service's select group: OVS hashes in the datapath (`hash(sym_l4(0)),recirc`) and
its trace cannot say which bucket that picks, so the verdict is `load-balanced` and the API
traces each backend as the DNATed packet reaches it. Not responsible for the
model's side (contivd.model.policytrace) nor for asking other nodes (the API does).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import trio

from openflow.flow import format_mac
from openflow.flows.classifier import node_addresses
from openflow.inputs import LocalPort, NodeInputs, RemoteEndpoint, vip_mac

from ..model.policytrace import CLIENT_PORT  # the model judges the same packet

TRACE_SECONDS = 10.0
_PROTO_TEXT = {6: "tcp", 17: "udp", 1: "icmp"}


class TraceError(RuntimeError):
    """ofproto/trace failed; the message has OVS's own words."""


@dataclass(frozen=True)
class OvsTrace:
    node: str
    bridge: str
    verdict: str  # "allow" (some output), "drop", or "load-balanced" (handed to a select group's datapath hash)
    datapath_actions: str
    flow: str


def trace_flow(port: LocalPort, dst_mac: int, dst_ip: int, proto: int, dport: int) -> str:
    """The ofproto/trace flow of `port`'s first packet to dst_ip (proto 0: plain IPv4)."""
    head = f"in_port={port.ofport},dl_src={format_mac(port.mac)},dl_dst={format_mac(dst_mac)}"
    return _packet(head, port.ip, dst_ip, proto, dport)


def arrival_flow(inputs: NodeInputs, src: RemoteEndpoint, port: LocalPort, proto: int, dport: int) -> str | None:
    """The ofproto/trace flow of `src`'s packet to the local `port` as it arrives from `src`'s node
    (the source node's forward table addressed it to the port's MAC: dst_epg rewrote it; in routing
    mode the ToR routes it in, untagged, to the router port's MAC, whatever the networks); None
    when this bridge has no way in from there (no tunnel to its VTEP yet, no uplink).
    The VNI or VLAN is the destination's network's: the source's bridge forwards to a remote
    endpoint only on that endpoint's own network (openflow.flows.forward), so nothing else
    arrives from a tunnel or a tagged uplink."""
    macs = f"dl_src={format_mac(src.mac)},dl_dst={format_mac(port.mac)}"
    network = port.network
    routed = _routed_in(inputs, src.ip, src.mac)
    if routed is not None:  # routing mode: every packet from another node is routed in, untagged, from the ToR
        head = routed
    elif inputs.encap == "vxlan":
        tunnel = inputs.fabric.tunnel_to(src.vtep)
        if tunnel is None:
            return None
        head = f"in_port={tunnel.ofport},tun_id={network.vni:#x},tun_src={ipaddress.IPv4Address(src.vtep)},{macs}"
    elif inputs.uplinks:
        head = f"in_port={min(inputs.uplinks)},dl_vlan={network.vlan},{macs}"
    else:
        return None
    return _packet(head, src.ip, port.ip, proto, dport)


def _packet(head: str, src_ip: int, dst_ip: int, proto: int, dport: int) -> str:
    addresses = f"nw_src={ipaddress.IPv4Address(src_ip)},nw_dst={ipaddress.IPv4Address(dst_ip)}"
    if proto in (6, 17):
        name = _PROTO_TEXT[proto]  # ofproto/trace wants tcp_src/udp_src (tp_src fails its prerequisites for UDP)
        syn = ",tcp_flags=0x002" if proto == 6 else ""  # a SYN; `+syn` is refused in a trace's flow
        return f"{name},{head},{addresses},{name}_src={CLIENT_PORT},{name}_dst={dport}{syn}"
    if proto == 1:
        return f"icmp,{head},{addresses},icmp_type=8,icmp_code=0"
    return f"ip,{head},{addresses}" + (f",nw_proto={proto}" if proto else "")


_ACTIONS = re.compile(r"^Datapath actions: (.*)$", re.MULTILINE)


def datapath_verdict(output: str) -> tuple[str, str]:
    """("allow" | "drop", the last `Datapath actions:` line) of an ofproto/trace answer: a packet
    that leaves on no port (`drop`, or only conntrack/recirculation) was dropped."""
    found = _ACTIONS.findall(output)
    actions = found[-1].strip() if found else ""
    leaves = any(word in actions for word in ("output", "set(tunnel", "tnl_push")) or re.search(r"(^|,)\d+($|,)", actions) is not None
    if not leaves and re.search(r"(^|,)hash\([^)]*\)\)?,recirc\(", actions):
        return "load-balanced", actions  # a select group: the datapath's hash picks the bucket, the trace stops there
    return ("allow" if leaves else "drop"), actions


NODE_FORWARDS_NOTHING = "handed to the node through the host port, whose CONTIVD-FORWARD chain forwards nothing new but DNATed external IPs"
_OUTPUTS = re.compile(r"\boutput:(\d+)")


def handed_to_node(output: str, host_ofport: int) -> bool:
    """Whether an ofproto/trace answer's only OpenFlow output is the host port: a local pod's
    packet through its gateway to an address nothing in the cluster routes (docs/pipeline.md,
    forward priority 7) goes to the node, which drops it (docs/kubernetes.md, contivd's iptables
    chains) unless it is an external IP the node DNATs to a Service (not traced here)."""
    ports = {int(port) for port in _OUTPUTS.findall(output)}
    return ports == {host_ofport}


def external_arrival_flow(inputs: NodeInputs, src_ip: int, port: LocalPort, proto: int, dport: int) -> str | None:
    """The ofproto/trace flow of a packet from `src_ip`, an address of no endpoint, to the local
    `port`, entering where docs/pipeline.md's classifier takes such packets in: the node's own
    addresses from its stack through the host port; others routed from the ToR (routing mode),
    tagged on the VLAN uplink from a host on the VLAN (its MAC made up as 02:02:<ip>), else
    through the host port (the node forwards them); None: no way in."""
    routed = _routed_in(inputs, src_ip, vip_mac(src_ip))
    host = inputs.host_port
    through_host = None if host is None else f"in_port={host.ofport},dl_src={format_mac(host.mac)},dl_dst={format_mac(port.mac)}"
    if host is not None and src_ip in node_addresses(host):  # the node itself
        head = through_host
    elif routed is not None:
        head = routed
    elif inputs.encap == "vlan" and inputs.uplinks:
        head = f"in_port={min(inputs.uplinks)},dl_vlan={port.network.vlan},dl_src={format_mac(vip_mac(src_ip))},dl_dst={format_mac(port.mac)}"
    else:
        head = through_host  # the node forwards it in, or None: no way in
    return None if head is None else _packet(head, src_ip, port.ip, proto, dport)


def _routed_in(inputs: NodeInputs, src_ip: int, src_mac: int) -> str | None:
    """Routing mode: the head of a packet the ToR routes in from `src_ip` (untagged on the router's
    uplink, to the router port's MAC); None when the bridge does not route."""
    router = inputs.router if inputs.fabric.routed else None
    if router is None:
        return None
    return f"in_port={router.uplink},dl_src={format_mac(_next_hop_mac(inputs, src_ip, src_mac))},dl_dst={format_mac(router.mac)}"


def _next_hop_mac(inputs: NodeInputs, address: int, otherwise: int) -> int:
    """The MAC of the router this node routes `address` through (its longest learned route):
    routed packets from `address` arrive from it too; `otherwise` when no route covers it."""
    routes = [r for r in inputs.routes if address & r.mask == r.prefix & r.mask]
    return max(routes, key=lambda r: r.length).next_hop_mac if routes else otherwise


def destination_mac(inputs: NodeInputs, port: LocalPort, dst_ip: int) -> int:
    """The MAC a pod sends to: the endpoint's own on its network (in routing mode only a local
    one: other nodes' are answered with the anycast MAC); on a VLAN network in bridge mode, an
    address outside the cluster is a host on the VLAN, reached on-link (its MAC made up as
    02:02:<ip>, as for its packets in `external_arrival_flow`); else its gateway's (a Service's
    VIP, the node itself, other networks: openflow.flows.arp)."""
    fabric = inputs.fabric
    ends = inputs.ports() if fabric.routed else inputs.known()
    known = next((e.mac for e in ends if e.ip == dst_ip and e.network == port.network), None)
    if known is not None:
        return known
    if _on_the_vlan(inputs, dst_ip):
        return vip_mac(dst_ip)
    return fabric.gateway_mac(port.network)


def _on_the_vlan(inputs: NodeInputs, address: int) -> bool:
    """Whether `address` is a host outside the cluster on a VLAN bridge's uplink (bridge mode):
    no endpoint, no Service VIP, not the node itself."""
    if inputs.encap != "vlan" or inputs.fabric.routed or not inputs.uplinks:
        return False
    host = inputs.host_port
    ours = {e.ip for e in inputs.known()} | {s.vip for s in inputs.services} | set(node_addresses(host) if host else ())
    return address not in ours


async def ovs_trace(
    node: str, bridge: str, appctl: list[str], inputs: NodeInputs, src_ip: int, dst_ip: int, proto: int, dport: int
) -> OvsTrace | None:
    """The source's half on this node's bridge, or None when the source is not a local port of it."""
    port = next((p for p in inputs.ports() if p.ip == src_ip), None)
    if port is None:
        return None
    host = inputs.host_port
    to_node = host.ofport if host is not None and dst_ip not in node_addresses(host) else None
    return await _run(node, bridge, appctl, trace_flow(port, destination_mac(inputs, port, dst_ip), dst_ip, proto, dport), to_node)


async def arrival_trace(
    node: str, bridge: str, appctl: list[str], inputs: NodeInputs, src_ip: int, dst_ip: int, proto: int, dport: int
) -> OvsTrace | None:
    """The destination's half on this node's bridge: the packet from an endpoint of another node
    as it arrives from there, from an address of no endpoint as it enters from outside
    (`external_arrival_flow`); None when the destination is not a local port of this bridge,
    the source is a local port, or the bridge has no way in from the source."""
    port = next((p for p in inputs.ports() if p.ip == dst_ip), None)
    src = next((r for r in inputs.remotes() if r.ip == src_ip), None)
    if port is None or any(p.ip == src_ip for p in inputs.ports()):
        return None
    flow = external_arrival_flow(inputs, src_ip, port, proto, dport) if src is None else arrival_flow(inputs, src, port, proto, dport)
    return None if flow is None else await _run(node, bridge, appctl, flow)


async def _run(node: str, bridge: str, appctl: list[str], flow: str, to_node: int | None = None) -> OvsTrace:
    """ofproto/trace `flow`; with `to_node` (the host port's OpenFlow port, for a packet to an
    address other than the node's own), a packet the switch hands only to the node is judged by
    what the node does with it (`handed_to_node`)."""
    try:
        with trio.fail_after(TRACE_SECONDS):
            done = await trio.run_process([*appctl, "ofproto/trace", bridge, flow], capture_stdout=True, capture_stderr=True, check=False)
    except (OSError, trio.TooSlowError) as exc:  # no ovs-appctl, or a vswitchd too busy to answer
        raise TraceError(f"ovs-appctl ofproto/trace {bridge} {flow}: {exc or f'no answer in {TRACE_SECONDS:g} s'}") from None
    if done.returncode != 0:
        raise TraceError(f"ovs-appctl ofproto/trace {bridge} {flow}: {done.stderr.decode(errors='replace').strip()[:400]}")
    output = done.stdout.decode(errors="replace")
    verdict, actions = datapath_verdict(output)
    if verdict == "allow" and to_node is not None and handed_to_node(output, to_node):
        verdict, actions = "drop", f"{NODE_FORWARDS_NOTHING}: {actions}"
    return OvsTrace(node, bridge, verdict, actions, flow)

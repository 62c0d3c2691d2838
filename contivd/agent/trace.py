"""One packet through this node's bridge as OVS itself would forward it (`ofproto/trace`), for
`ctl trace` to show beside the model's verdict.

Pure parts: the flow text a pod's first packet has (`trace_flow`) and the verdict read from
OVS's answer (`datapath_verdict`); the I/O is one `ovs-appctl ofproto/trace` run. Conntrack
is traced as a new connection (OVS's default for each `ct` recirculation), so the answer is
that of a connection's first packet, which is what NetworkPolicy judges. Not responsible for
the model's side (contivd.model.netpolicy) nor for other nodes: the source must be local.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import trio

from openflow.flow import format_mac
from openflow.inputs import LocalPort, NodeInputs, vip_mac

TRACE_SECONDS = 10.0
CLIENT_PORT = 40000  # the source port of the traced packet (any ephemeral port does)
_PROTO_TEXT = {6: "tcp", 17: "udp", 1: "icmp"}


class TraceError(RuntimeError):
    """ofproto/trace failed; the message has OVS's own words."""


@dataclass(frozen=True)
class OvsTrace:
    node: str
    bridge: str
    verdict: str  # "allow" (some output) or "drop"
    datapath_actions: str
    flow: str


def trace_flow(port: LocalPort, dst_mac: int, dst_ip: int, proto: int, dport: int) -> str:
    """The ofproto/trace flow of `port`'s first packet to dst_ip (proto 0: plain IPv4)."""
    head = f"in_port={port.ofport},dl_src={format_mac(port.mac)},dl_dst={format_mac(dst_mac)}"
    addresses = f"nw_src={ipaddress.IPv4Address(port.ip)},nw_dst={ipaddress.IPv4Address(dst_ip)}"
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
    return ("allow" if leaves else "drop"), actions


def destination_mac(inputs: NodeInputs, port: LocalPort, dst_ip: int) -> int:
    """The MAC a pod sends to: the endpoint's own on its network, else its gateway's."""
    known = next((e.mac for e in inputs.known() if e.ip == dst_ip and e.network == port.network), None)
    return known if known is not None else vip_mac(port.network.gateway)


async def ovs_trace(
    node: str, bridge: str, appctl: list[str], inputs: NodeInputs, src_ip: int, dst_ip: int, proto: int, dport: int
) -> OvsTrace | None:
    """The trace on this node's bridge, or None when the source is not a local port of it."""
    port = next((p for p in inputs.ports() if p.ip == src_ip), None)
    if port is None:
        return None
    flow = trace_flow(port, destination_mac(inputs, port, dst_ip), dst_ip, proto, dport)
    with trio.fail_after(TRACE_SECONDS):
        done = await trio.run_process([*appctl, "ofproto/trace", bridge, flow], capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode != 0:
        raise TraceError(f"ovs-appctl ofproto/trace {bridge} {flow}: {done.stderr.decode(errors='replace').strip()[:400]}")
    verdict, actions = datapath_verdict(done.stdout.decode(errors="replace"))
    return OvsTrace(node, bridge, verdict, actions, flow)

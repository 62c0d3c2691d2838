"""Proxy ARP: the switch answers requests for known endpoint IPs (and service VIPs) itself.

It also answers for each local network's gateway (MAC ``02:02:<gateway ip>``), so pods whose
default route points at the gateway reach service VIPs of other subnets: the VIP's DNAT and
the destination lookup by IP (dst_epg) take the packet on from there.

Only local ports reach this table (remote ARP arrives REMOTE-marked and skips
it), so the reply goes back out of IN_PORT untagged.  Requests for unknown IPs
miss and are flooded in the network by the forward table.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import (
    ETH_ARP,
    OFPP_IN_PORT,
    Flow,
    MatchValue,
    Move,
    Output,
    SetField,
)
from openflow.inputs import ANYCAST_MAC, Fabric, LocalPort, NetworkRef, NodeInputs, RemoteEndpoint
from openflow.pipeline import Table, Tables

ARP_REQUEST = 1
ARP_REPLY = 2
REPLY_PRIORITY = 100


def reply_flow(table: Table, ip: int, mac: int, *, network: int | None, cookie_: int) -> Flow:
    """Answer ``who-has ip`` with ``mac``, in one network or (network None) in all of them."""
    match: dict[str, MatchValue] = {"eth_type": ETH_ARP, "arp_op": ARP_REQUEST, "arp_tpa": ip}
    if network is not None:
        match["metadata"] = meta(NETWORK=network)
    actions = (
        Move("eth_src", "eth_dst"),
        SetField("eth_src", mac),
        SetField("arp_op", ARP_REPLY),
        Move("arp_sha", "arp_tha"),
        SetField("arp_sha", mac),
        Move("arp_spa", "arp_tpa"),
        SetField("arp_spa", ip),
        Output(OFPP_IN_PORT),
    )
    return table.flow(REPLY_PRIORITY, match, cookie=cookie_, actions=actions)


def endpoint_flows(tables: Tables, ep: LocalPort | RemoteEndpoint, round_: int, answer: int | None = None) -> list[Flow]:
    """The answer for ``ep``'s address: its own MAC, or ``answer`` (routing mode answers for
    other nodes' endpoints with the anycast MAC: their traffic is routed)."""
    key = cookie(Category.ARP, ep.endpoint_id, round_)
    return [reply_flow(tables["arp_responder"], ep.ip, ep.mac if answer is None else answer, network=ep.network.tag, cookie_=key)]


def network_flows(tables: Tables, net: NetworkRef, fabric: Fabric) -> list[Flow]:
    """The answer for the network's gateway, when it has one (Fabric.gateway_mac)."""
    if not net.gateway:
        return []
    key = cookie(Category.ARP, f"gateway:{net.net_id}", fabric.round)
    return [reply_flow(tables["arp_responder"], net.gateway, fabric.gateway_mac(net), network=net.tag, cookie_=key)]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    fabric = inputs.fabric
    remote_answer = ANYCAST_MAC if fabric.routed else None
    endpoints = [f for ep in inputs.ports() for f in endpoint_flows(tables, ep, inputs.round)]
    endpoints += [f for ep in inputs.remotes() for f in endpoint_flows(tables, ep, inputs.round, remote_answer)]
    return sorted(endpoints + [f for net in inputs.networks() for f in network_flows(tables, net, fabric)])

"""Port classification: which network a packet belongs to, its source EPG, and whether it is remote.

Local ports go on to the spoof guard; tunnel and VLAN-uplink traffic is marked
REMOTE and goes straight to conntrack, because Contiv enforces policy only on
the sending node.  Unknown ports and unknown VNIs/VLANs hit the miss and drop.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import ETH_IPV4, Flow, PopVlan
from openflow.inputs import Fabric, HostPort, LocalPort, NetworkRef, NodeInputs, ServiceSpec
from openflow.pipeline import Tables

PORT_PRIORITY = 100


def port_flows(tables: Tables, port: LocalPort, round_: int) -> list[Flow]:
    return [
        tables["classifier"].flow(
            PORT_PRIORITY,
            {"in_port": port.ofport},
            cookie=cookie(Category.CLASSIFIER, port.endpoint_id, round_),
            write_metadata=meta(NETWORK=port.network.tag, SRC_EPG=port.epg, REMOTE=0),
            goto="spoof_guard",
        )
    ]


def _from_host(tables: Tables, host: HostPort, dst: int, owner: str, round_: int, network: NetworkRef, remote: int) -> Flow:
    return tables["classifier"].flow(
        PORT_PRIORITY,
        {"in_port": host.ofport, "eth_type": ETH_IPV4, "ipv4_dst": dst},
        cookie=cookie(Category.CLASSIFIER, owner, round_),
        write_metadata=meta(NETWORK=network.tag, SRC_EPG=0, REMOTE=remote),
        goto="conntrack",
    )


def host_flows(tables: Tables, port: LocalPort, host: HostPort | None, round_: int) -> list[Flow]:
    """From the node (its host port) to ``port``'s pod: into the pod's network, marked REMOTE so
    policy is skipped as for traffic from other nodes (the node is trusted: kubelet probes pass
    whatever the pod's policy), through conntrack like everything else."""
    if host is None:
        return []
    return [_from_host(tables, host, port.ip, port.endpoint_id, round_, port.network, remote=1)]


def host_service_flows(tables: Tables, service: ServiceSpec, host: HostPort | None, round_: int) -> list[Flow]:
    """From the node (its host port) to a Service's VIP (NodePort): into the backends' network
    as a local packet without a source group, so the VIP flows load-balance it (REMOTE packets
    skip them) and the backends' policy sees source group 0. Replies come back to the address
    the node SNATs such connections to (HostPort.nodeport_source or its private address)."""
    if host is None or service.entry_network is None or not service.live:
        return []
    return [_from_host(tables, host, service.vip, service.service_id, round_, service.entry_network, remote=0)]


def network_flows(tables: Tables, net: NetworkRef, fabric: Fabric) -> list[Flow]:
    """What arrives for ``net`` from other nodes: from each tunnel with its VNI, or from each uplink
    with its VLAN (none in routing mode: the uplink carries routed traffic, openflow.flows.routing)."""
    if fabric.routed:
        return []
    table = tables["classifier"]
    key = cookie(Category.CLASSIFIER, net.net_id, fabric.round)
    remote = meta(NETWORK=net.tag, SRC_EPG=0, REMOTE=1)
    if fabric.encap == "vxlan":
        return [
            table.flow(PORT_PRIORITY, {"in_port": t.ofport, "tun_id": net.vni}, cookie=key, write_metadata=remote, goto="conntrack")
            for t in fabric.tunnels
        ]
    return [
        table.flow(
            PORT_PRIORITY, {"in_port": u, "vlan_vid": net.vlan}, cookie=key,
            actions=(PopVlan(),), write_metadata=remote, goto="conntrack",
        )
        for u in fabric.uplinks
    ]  # fmt: skip


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    ports = [f for p in inputs.ports() for f in (*port_flows(tables, p, inputs.round), *host_flows(tables, p, inputs.host_port, inputs.round))]
    services = [f for s in inputs.services for f in host_service_flows(tables, s, inputs.host_port, inputs.round)]
    return sorted(ports + services + [f for net in inputs.networks() for f in network_flows(tables, net, inputs.fabric)])

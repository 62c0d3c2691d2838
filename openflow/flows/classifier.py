"""Table 0: which network a packet belongs to, its source EPG, whether it is remote, and whether
it came from outside the cluster.

Local ports go on to the spoof guard; tunnel and VLAN-uplink traffic is marked
REMOTE and goes straight to conntrack, because Contiv enforces policy only on
the sending node.  Unknown ports and unknown VNIs/VLANs hit the miss and drop.

What did not come from a pod of the cluster (nor from the node itself) is marked OUTSIDE too,
so service_lb sends it through np_ingress: NetworkPolicy judges its ingress here, at the
destination's node (docs/policy.md). A tunnel carries only the cluster's pods (never OUTSIDE).
The VLAN uplink (and, in routing mode, the router's uplink: openflow.flows.routing) carries both
other nodes' pods and hosts outside; a packet from it is OUTSIDE unless its source address is a
known endpoint of the cluster (a priority-110 flow per remote endpoint, owned by it). The host
port carries the node's own packets; anything else it carries (the node forwarding for someone)
is OUTSIDE.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import ETH_IPV4, Flow, MatchValue, PopVlan
from openflow.inputs import Fabric, HostPort, LocalPort, NetworkRef, NodeInputs, RemoteEndpoint, ServiceSpec
from openflow.pipeline import Tables

PORT_PRIORITY = 100
TRUSTED_SOURCE_PRIORITY = 110
"""Above the uplink's and host port's flows: a source known to be of the cluster, not OUTSIDE."""


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


def _from_host(tables: Tables, host: HostPort, dst: int, owner: str, round_: int, metadata: tuple[int, int]) -> Flow:
    return tables["classifier"].flow(
        PORT_PRIORITY,
        {"in_port": host.ofport, "eth_type": ETH_IPV4, "ipv4_dst": dst},
        cookie=cookie(Category.CLASSIFIER, owner, round_),
        write_metadata=metadata,
        goto="conntrack",
    )


def node_addresses(host: HostPort) -> tuple[int, ...]:
    """The node's own source addresses on its host port: its private address, its NodePort source."""
    return (host.address, host.nodeport_source) if host.nodeport_source else (host.address,)


def host_flows(tables: Tables, port: LocalPort, host: HostPort | None, round_: int) -> list[Flow]:
    """From the node (its host port) to ``port``'s pod: into the pod's network, marked REMOTE so
    policy is skipped as for traffic from other nodes (the node is trusted: kubelet probes pass
    whatever the pod's policy), through conntrack like everything else. Only from the node's own
    addresses: anything else the node forwards in (its CONTIVD-FORWARD chain lets nothing else
    through, docs/kubernetes.md) is OUTSIDE, so the pod's ingress NetworkPolicy judges it."""
    if host is None:
        return []
    outside = _from_host(tables, host, port.ip, port.endpoint_id, round_, meta(NETWORK=port.network.tag, SRC_EPG=0, REMOTE=1, OUTSIDE=1))
    trusted = [
        tables["classifier"].flow(
            TRUSTED_SOURCE_PRIORITY,
            {"in_port": host.ofport, "eth_type": ETH_IPV4, "ipv4_src": address, "ipv4_dst": port.ip},
            cookie=outside.cookie,
            write_metadata=meta(NETWORK=port.network.tag, SRC_EPG=0, REMOTE=1),
            goto="conntrack",
        )
        for address in node_addresses(host)
    ]
    return [outside, *trusted]


def host_service_flows(tables: Tables, service: ServiceSpec, host: HostPort | None, round_: int) -> list[Flow]:
    """From the node (its host port) to a Service's VIP (NodePort): into the backends' network
    as a local packet without a source group, so the VIP flows load-balance it (REMOTE packets
    skip them) and the backends' policy sees source group 0. Replies come back to the address
    the node SNATs such connections to (HostPort.nodeport_source or its private address)."""
    if host is None or service.entry_network is None or not service.live:
        return []
    return [_from_host(tables, host, service.vip, service.service_id, round_, meta(NETWORK=service.entry_network.tag, SRC_EPG=0, REMOTE=0))]


def network_flows(tables: Tables, net: NetworkRef, fabric: Fabric) -> list[Flow]:
    """What arrives for ``net`` from other nodes: from each tunnel with its VNI, or from each uplink
    with its VLAN (none in routing mode: the uplink carries routed traffic, openflow.flows.routing)."""
    if fabric.routed:
        return []
    table = tables["classifier"]
    key = cookie(Category.CLASSIFIER, net.net_id, fabric.round)
    if fabric.encap == "vxlan":
        remote = meta(NETWORK=net.tag, SRC_EPG=0, REMOTE=1)
        return [
            table.flow(PORT_PRIORITY, {"in_port": t.ofport, "tun_id": net.vni}, cookie=key, write_metadata=remote, goto="conntrack")
            for t in fabric.tunnels
        ]
    outside = meta(NETWORK=net.tag, SRC_EPG=0, REMOTE=1, OUTSIDE=1)  # unless remote_flows knows the source
    return [
        table.flow(
            PORT_PRIORITY, {"in_port": u, "vlan_vid": net.vlan}, cookie=key,
            actions=(PopVlan(),), write_metadata=outside, goto="conntrack",
        )
        for u in fabric.uplinks
    ]  # fmt: skip


def remote_flows(tables: Tables, remote: RemoteEndpoint, fabric: Fabric) -> list[Flow]:
    """``remote``'s packets as they arrive on an uplink (the VLAN uplinks, tagged with its network's
    VLAN; in routing mode the router's uplink, untagged): from a pod of the cluster, so not
    OUTSIDE (judged at its own node). The source address is what tells it from a host outside:
    the uplink is the cluster's fabric, trusted not to carry another's packets under a pod's
    address. Tunnels need none: they carry only the cluster's pods."""
    table = tables["classifier"]
    key = cookie(Category.CLASSIFIER, remote.endpoint_id, fabric.round)
    if fabric.routed:
        router = fabric.router
        if router is None:
            return []
        match: dict[str, MatchValue] = {"in_port": router.uplink, "eth_type": ETH_IPV4, "ipv4_src": remote.ip}
        return [table.flow(TRUSTED_SOURCE_PRIORITY, match, cookie=key, write_metadata=meta(NETWORK=0, SRC_EPG=0, REMOTE=1), goto="conntrack")]
    if fabric.encap != "vlan":
        return []
    tagged = meta(NETWORK=remote.network.tag, SRC_EPG=0, REMOTE=1)
    return [
        table.flow(
            TRUSTED_SOURCE_PRIORITY, {"in_port": u, "vlan_vid": remote.network.vlan, "eth_type": ETH_IPV4, "ipv4_src": remote.ip},
            cookie=key, actions=(PopVlan(),), write_metadata=tagged, goto="conntrack",
        )
        for u in fabric.uplinks
    ]  # fmt: skip


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    ports = [f for p in inputs.ports() for f in (*port_flows(tables, p, inputs.round), *host_flows(tables, p, inputs.host_port, inputs.round))]
    services = [f for s in inputs.services for f in host_service_flows(tables, s, inputs.host_port, inputs.round)]
    remotes = [f for r in inputs.remotes() for f in remote_flows(tables, r, inputs.fabric)]
    return sorted(ports + services + remotes + [f for net in inputs.networks() for f in network_flows(tables, net, inputs.fabric)])

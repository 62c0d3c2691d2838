"""L2 forwarding inside a network: by eth_dst to a local port, a VXLAN tunnel or the VLAN uplink.

Remote destinations match REMOTE=0 only (split horizon: what came from a
tunnel or uplink never goes back out to one).  Broadcast and multicast use
two ALL groups per network: local-origin packets flood to local ports and
remote nodes, remote-origin packets to local ports only (OVS skips the
input port itself).  A remote endpoint whose tunnel port does not exist yet
gets no flow until it does.  On a VLAN bridge the lowest uplink ofport is the
active one; bonding is left to OVS.

Unknown unicast is dropped, except on a VLAN bridge in bridge mode: what a local port sends to
a MAC no flow knows leaves, tagged, through the active uplink (ofnet sent it to OVS's NORMAL
action there), so pods reach hosts on their VLAN (a router, a server outside the cluster); the
gateway's MAC is kept out (dropped), as nothing routes between networks in bridge mode.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from openflow.fields import Category, cookie, group_id, meta
from openflow.flow import (
    ETH_IPV4,
    Action,
    Bucket,
    Flow,
    Group,
    GroupAction,
    MatchValue,
    Output,
    PushVlan,
    SetField,
)
from openflow.inputs import Fabric, LocalPort, NetworkRef, NodeInputs, RemoteEndpoint
from openflow.pipeline import Tables

UNICAST_PRIORITY = 100
FLOOD_PRIORITY = 10
UNKNOWN_UNICAST_PRIORITY = 5
GATEWAY_DROP_PRIORITY = 6
TO_NODE_PRIORITY = 7  # above the gateway drop: what the gateway does not route otherwise goes to the node
MULTICAST = (0x010000000000, 0x010000000000)


def _to_remote(fabric: Fabric, net: NetworkRef, vtep: int) -> tuple[Action, ...] | None:
    """Actions that send a frame of ``net`` to another node (None: no way there yet; routing
    mode bridges nothing to other nodes, it routes: openflow.flows.routing)."""
    if fabric.routed:
        return None
    if fabric.encap == "vxlan":
        tunnel = fabric.tunnel_to(vtep)
        return None if tunnel is None else (SetField("tun_id", net.vni), Output(tunnel.ofport))
    if not fabric.uplinks:
        return None
    return (PushVlan(), SetField("vlan_vid", net.vlan), Output(min(fabric.uplinks)))


@lru_cache(maxsize=1 << 16)
def _output_bucket(port: int) -> Bucket:
    """Shared buckets: a flood group is rebuilt on every attach, and identical bucket objects make
    building, checking (Table.group) and comparing it with the installed one cheap."""
    return (Output(port),)


@lru_cache(maxsize=1 << 16)
def _tunnel_bucket(vni: int, port: int) -> Bucket:
    return (SetField("tun_id", vni), Output(port))


def _flood_ids(net: NetworkRef) -> tuple[int, int]:
    return group_id(Category.FLOOD, f"all:{net.net_id}"), group_id(Category.FLOOD, f"local:{net.net_id}")


def port_flows(tables: Tables, port: LocalPort, round_: int) -> list[Flow]:
    return [
        tables["forward"].flow(
            UNICAST_PRIORITY,
            {"metadata": meta(NETWORK=port.network.tag), "eth_dst": port.mac},
            cookie=cookie(Category.FORWARD, port.endpoint_id, round_),
            actions=(Output(port.ofport),),
        )
    ]


def remote_flows(tables: Tables, remote: RemoteEndpoint, fabric: Fabric) -> list[Flow]:
    actions = _to_remote(fabric, remote.network, remote.vtep)
    if actions is None:
        return []
    match: dict[str, MatchValue] = {"metadata": meta(NETWORK=remote.network.tag, REMOTE=0), "eth_dst": remote.mac}
    return [tables["forward"].flow(UNICAST_PRIORITY, match, cookie=cookie(Category.FORWARD, remote.endpoint_id, fabric.round), actions=actions)]


def _routed_to(net: NetworkRef, address: int, fabric: Fabric) -> dict[str, MatchValue]:
    """Packets of ``net`` routed through its gateway to ``address``."""
    return {"metadata": meta(NETWORK=net.tag), "eth_dst": fabric.gateway_mac(net), "eth_type": ETH_IPV4, "ipv4_dst": address}


def _to_node(net: NetworkRef, fabric: Fabric) -> dict[str, MatchValue]:
    """A local pod's packets through its gateway to an address nothing here knows: the node is the
    next hop (its iptables DNATs external IPs to ClusterIPs and un-NATs the replies of its
    externalTrafficPolicy Local connections; it forwards nothing new from its host port)."""
    return {"metadata": meta(NETWORK=net.tag, REMOTE=0), "eth_dst": fabric.gateway_mac(net), "eth_type": ETH_IPV4}


def network_flows(tables: Tables, net: NetworkRef, round_: int, fabric: Fabric | None = None) -> list[Flow]:
    """Broadcast and multicast of ``net`` to its two flood groups (local-origin, remote-origin);
    with a host port and a gateway, packets routed through the gateway to the node's private
    address (or its NodePort source) go to the host port, and those to a peer's NodePort source
    (its VTEP: replies of NodePort backends) through the tunnel to that peer; a local pod's other
    packets through the gateway (to no address of the cluster) go to the host port too."""
    key = cookie(Category.FLOOD, net.net_id, round_)
    out = []
    host = fabric.host_port if fabric is not None else None
    if fabric is not None and host is not None and net.gateway:
        to_host = (SetField("eth_dst", host.mac), Output(host.ofport))
        for address in (host.address, host.nodeport_source) if host.nodeport_source else (host.address,):
            out.append(tables["forward"].flow(UNICAST_PRIORITY, _routed_to(net, address, fabric), cookie=key, actions=to_host))
        if not fabric.routed:
            out.append(tables["forward"].flow(TO_NODE_PRIORITY, _to_node(net, fabric), cookie=key, actions=to_host))
        if host.nodeport_source:
            for tunnel in fabric.tunnels:
                to_peer = {**_routed_to(net, tunnel.remote_ip, fabric), "metadata": meta(NETWORK=net.tag, REMOTE=0)}
                out.append(
                    tables["forward"].flow(UNICAST_PRIORITY, to_peer, cookie=key, actions=(SetField("tun_id", net.vni), Output(tunnel.ofport)))
                )
    for remote, gid in zip((0, 1), _flood_ids(net), strict=True):
        flood: dict[str, MatchValue] = {"metadata": meta(NETWORK=net.tag, REMOTE=remote), "eth_dst": MULTICAST}
        out.append(tables["forward"].flow(FLOOD_PRIORITY, flood, cookie=key, actions=(GroupAction(gid),)))
    return out + (unknown_unicast_flows(tables, net, fabric, key) if fabric is not None else [])


def unknown_unicast_flows(tables: Tables, net: NetworkRef, fabric: Fabric, key: int) -> list[Flow]:
    """VLAN bridge mode: a local port's frame to an unknown MAC out of the active uplink, tagged
    (hosts on the VLAN outside the cluster), but not one to the gateway's MAC (nothing routes
    between networks); nothing on other bridges (VXLAN: no host outside on a tunnel)."""
    if fabric.encap != "vlan" or fabric.routed or not fabric.uplinks:
        return []
    table = tables["forward"]
    local = meta(NETWORK=net.tag, REMOTE=0)
    to_uplink = _to_remote(fabric, net, 0)
    assert to_uplink is not None  # a VLAN bridge with uplinks, not routing
    out = [table.flow(UNKNOWN_UNICAST_PRIORITY, {"metadata": local}, cookie=key, actions=to_uplink)]
    if net.gateway:
        out.append(table.flow(GATEWAY_DROP_PRIORITY, {"metadata": local, "eth_dst": fabric.gateway_mac(net)}, cookie=key))
    return out


def network_groups(tables: Tables, net: NetworkRef, ofports: Iterable[int], fabric: Fabric) -> list[Group]:
    """The two flood groups of ``net``: buckets to its local ``ofports`` (ascending), the "all" one also to other nodes."""
    local = list(map(_output_bucket, sorted(ofports)))
    if fabric.encap == "vxlan":
        remote = [_tunnel_bucket(net.vni, t.ofport) for t in sorted(fabric.tunnels)]
    else:
        to_uplink = _to_remote(fabric, net, 0)
        remote = [] if to_uplink is None else [to_uplink]
    all_id, local_id = _flood_ids(net)
    table = tables["forward"]
    return [table.group(all_id, "all", tuple(local + remote)), table.group(local_id, "all", tuple(local))]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    out = [f for p in inputs.ports() for f in port_flows(tables, p, inputs.round)]
    out += [f for r in inputs.remotes() for f in remote_flows(tables, r, inputs.fabric)]
    out += [f for net in inputs.networks() for f in network_flows(tables, net, inputs.round, inputs.fabric)]
    return sorted(out)


def groups(tables: Tables, inputs: NodeInputs) -> list[Group]:
    ports = inputs.ports()
    return sorted(g for net in inputs.networks() for g in network_groups(tables, net, (p.ofport for p in ports if p.network == net), inputs.fabric))

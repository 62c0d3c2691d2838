"""L2 forwarding inside a network: by eth_dst to a local port, a VXLAN tunnel or the VLAN uplink.

Remote destinations match REMOTE=0 only (split horizon: what came from a
tunnel or uplink never goes back out to one).  Broadcast and multicast use
two ALL groups per network: local-origin packets flood to local ports and
remote nodes, remote-origin packets to local ports only (OVS skips the
input port itself).  A remote endpoint whose tunnel port does not exist yet
gets no flow until it does.  On a VLAN bridge the lowest uplink ofport is the
active one; bonding is left to OVS.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, group_id, meta
from openflow.flow import (
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
from openflow.inputs import NetworkRef, NodeInputs
from openflow.pipeline import Tables

UNICAST_PRIORITY = 100
FLOOD_PRIORITY = 10
MULTICAST = (0x010000000000, 0x010000000000)


def _to_remote(inputs: NodeInputs, net: NetworkRef, vtep: int) -> tuple[Action, ...] | None:
    """Actions that send a frame of ``net`` to another node (None: no way there yet)."""
    if inputs.encap == "vxlan":
        tunnel = inputs.tunnel_to(vtep)
        return None if tunnel is None else (SetField("tun_id", net.vni), Output(tunnel.ofport))
    if not inputs.uplinks:
        return None
    return (PushVlan(), SetField("vlan_vid", net.vlan), Output(min(inputs.uplinks)))


def _flood_ids(net: NetworkRef) -> tuple[int, int]:
    return group_id(Category.FLOOD, f"all:{net.net_id}"), group_id(Category.FLOOD, f"local:{net.net_id}")


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    table = tables["forward"]
    out = [
        table.flow(
            UNICAST_PRIORITY,
            {"metadata": meta(NETWORK=p.network.tag), "eth_dst": p.mac},
            cookie=cookie(Category.FORWARD, p.endpoint_id, inputs.round),
            actions=(Output(p.ofport),),
        )
        for p in inputs.ports()
    ]
    for r in inputs.remotes():
        actions = _to_remote(inputs, r.network, r.vtep)
        if actions is not None:
            match: dict[str, MatchValue] = {"metadata": meta(NETWORK=r.network.tag, REMOTE=0), "eth_dst": r.mac}
            out.append(
                table.flow(
                    UNICAST_PRIORITY,
                    match,
                    cookie=cookie(Category.FORWARD, r.endpoint_id, inputs.round),
                    actions=actions,
                )
            )
    for net in inputs.networks():
        key = cookie(Category.FLOOD, net.net_id, inputs.round)
        for remote, gid in zip((0, 1), _flood_ids(net), strict=True):
            flood: dict[str, MatchValue] = {"metadata": meta(NETWORK=net.tag, REMOTE=remote), "eth_dst": MULTICAST}
            out.append(table.flow(FLOOD_PRIORITY, flood, cookie=key, actions=(GroupAction(gid),)))
    return sorted(out)


def groups(tables: Tables, inputs: NodeInputs) -> list[Group]:
    out = []
    for net in inputs.networks():
        local: list[Bucket] = [(Output(p.ofport),) for p in inputs.ports() if p.network == net]
        if inputs.encap == "vxlan":
            remote: list[Bucket] = [(SetField("tun_id", net.vni), Output(t.ofport)) for t in sorted(inputs.tunnels)]
        else:
            to_uplink = _to_remote(inputs, net, 0)
            remote = [] if to_uplink is None else [to_uplink]
        all_id, local_id = _flood_ids(net)
        table = tables["forward"]
        out += [table.group(all_id, "all", tuple(local + remote)), table.group(local_id, "all", tuple(local))]
    return sorted(out)

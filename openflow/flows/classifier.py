"""Port classification: which network a packet belongs to, its source EPG, and whether it is remote.

Local ports go on to the spoof guard; tunnel and VLAN-uplink traffic is marked
REMOTE and goes straight to conntrack, because Contiv enforces policy only on
the sending node.  Unknown ports and unknown VNIs/VLANs hit the miss and drop.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import Flow, PopVlan
from openflow.inputs import NodeInputs
from openflow.pipeline import Tables

PORT_PRIORITY = 100


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    table = tables["classifier"]
    out = [
        table.flow(
            PORT_PRIORITY,
            {"in_port": p.ofport},
            cookie=cookie(Category.CLASSIFIER, p.endpoint_id, inputs.round),
            write_metadata=meta(NETWORK=p.network.tag, SRC_EPG=p.epg, REMOTE=0),
            goto="spoof_guard",
        )
        for p in inputs.ports()
    ]
    for net in inputs.networks():
        key = cookie(Category.CLASSIFIER, net.net_id, inputs.round)
        remote = meta(NETWORK=net.tag, SRC_EPG=0, REMOTE=1)
        if inputs.encap == "vxlan":
            out += [
                table.flow(
                    PORT_PRIORITY,
                    {"in_port": t.ofport, "tun_id": net.vni},
                    cookie=key,
                    write_metadata=remote,
                    goto="conntrack",
                )
                for t in inputs.tunnels
            ]
        else:
            out += [
                table.flow(
                    PORT_PRIORITY, {"in_port": u, "vlan_vid": net.vlan}, cookie=key,
                    actions=(PopVlan(),), write_metadata=remote, goto="conntrack",
                )
                for u in inputs.uplinks
            ]  # fmt: skip
    return sorted(out)

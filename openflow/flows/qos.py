"""DSCP marking of IPv4 sent by local ports whose EPG's netprofile sets a DSCP.

Marked after policy, so dropped packets are never rewritten.  Ingress
policing (netprofile bandwidth/burst) is not a flow: it is the OVSDB
Interface ingress_policing_rate/burst the OVS layer sets from
LocalPort.bandwidth_kbps/burst_kb.
"""

from __future__ import annotations

from openflow.fields import Category, cookie
from openflow.flow import ETH_IPV4, Flow, SetField
from openflow.inputs import NodeInputs
from openflow.pipeline import Tables

DSCP_PRIORITY = 100


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    table = tables["qos"]
    return sorted(
        table.flow(
            DSCP_PRIORITY,
            {"eth_type": ETH_IPV4, "in_port": p.ofport},
            cookie=cookie(Category.QOS, p.endpoint_id, inputs.round),
            actions=(SetField("ip_dscp", p.dscp),),
            goto="forward",
        )
        for p in inputs.ports()
        if p.dscp
    )

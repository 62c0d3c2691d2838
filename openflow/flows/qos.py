"""DSCP marking of IPv4 sent by local ports whose EPG's netprofile sets a DSCP.

Marked after policy, so dropped packets are never rewritten.  Ingress
policing (netprofile bandwidth/burst) is not a flow: it is the OVSDB
Interface ingress_policing_rate/burst the OVS layer sets from
LocalPort.bandwidth_kbps/burst_kb.
"""

from __future__ import annotations

from openflow.fields import Category, cookie
from openflow.flow import ETH_IPV4, Flow, SetField
from openflow.inputs import LocalPort, NodeInputs
from openflow.pipeline import Tables

DSCP_PRIORITY = 100


def port_flows(tables: Tables, port: LocalPort, round_: int) -> list[Flow]:
    if not port.dscp:
        return []
    return [
        tables["qos"].flow(
            DSCP_PRIORITY,
            {"eth_type": ETH_IPV4, "in_port": port.ofport},
            cookie=cookie(Category.QOS, port.endpoint_id, round_),
            actions=(SetField("ip_dscp", port.dscp),),
            goto="forward",
        )
    ]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    return sorted(f for p in inputs.ports() for f in port_flows(tables, p, inputs.round))

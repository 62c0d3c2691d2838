"""Destination lookup by IP: the destination EPG into metadata and the endpoint's MAC into eth_dst.

Rewriting eth_dst here is what makes DNATed packets (still addressed to the
VIP's MAC) reach the provider; for other packets it is a no-op because
Contiv endpoints' MACs are derived from their IPs.  Unknown destinations keep
DST_EPG 0, which only rules without a destination group match.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import ETH_IPV4, Flow, SetField
from openflow.inputs import LocalPort, NodeInputs, RemoteEndpoint
from openflow.pipeline import Tables

ENDPOINT_PRIORITY = 100


def endpoint_flows(tables: Tables, ep: LocalPort | RemoteEndpoint, round_: int) -> list[Flow]:
    return [
        tables["dst_epg"].flow(
            ENDPOINT_PRIORITY,
            {"eth_type": ETH_IPV4, "metadata": meta(NETWORK=ep.network.tag), "ipv4_dst": ep.ip},
            cookie=cookie(Category.DST_EPG, ep.endpoint_id, round_),
            actions=(SetField("eth_dst", ep.mac),),
            write_metadata=meta(DST_EPG=ep.epg),
            goto="policy",
        )
    ]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    return sorted(f for ep in inputs.known() for f in endpoint_flows(tables, ep, inputs.round))

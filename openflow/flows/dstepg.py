"""Destination lookup by IP: the destination EPG into metadata and the endpoint's MAC into eth_dst.

Rewriting eth_dst here is what makes DNATed packets (still addressed to the
VIP's MAC) reach the provider; for other packets it is a no-op because
Contiv endpoints' MACs are derived from their IPs.  Unknown destinations keep
DST_EPG 0, which only rules without a destination group match.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import ETH_IPV4, Flow, SetField
from openflow.inputs import NodeInputs
from openflow.pipeline import Tables

ENDPOINT_PRIORITY = 100


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    table = tables["dst_epg"]
    return sorted(
        table.flow(
            ENDPOINT_PRIORITY,
            {"eth_type": ETH_IPV4, "metadata": meta(NETWORK=ep.network.tag), "ipv4_dst": ep.ip},
            cookie=cookie(Category.DST_EPG, ep.endpoint_id, inputs.round),
            actions=(SetField("eth_dst", ep.mac),),
            write_metadata=meta(DST_EPG=ep.epg),
            goto="policy",
        )
        for ep in inputs.known()
    )

"""Source anti-spoofing: a local port may send IPv4 and ARP only from its own MAC and IP.

Everything else from a local port (other addresses, IPv6, other ethertypes)
misses and drops; Contiv endpoints get static IPv4 addresses, so there is no
DHCP exception to make.
"""

from __future__ import annotations

from openflow.fields import Category, cookie
from openflow.flow import ETH_ARP, ETH_IPV4, Flow
from openflow.inputs import NodeInputs
from openflow.pipeline import Tables

GUARD_PRIORITY = 100


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    table = tables["spoof_guard"]
    out = []
    for p in inputs.ports():
        key = cookie(Category.SPOOF_GUARD, p.endpoint_id, inputs.round)
        ip = {"in_port": p.ofport, "eth_type": ETH_IPV4, "eth_src": p.mac, "ipv4_src": p.ip}
        arp = {"in_port": p.ofport, "eth_type": ETH_ARP, "eth_src": p.mac, "arp_spa": p.ip, "arp_sha": p.mac}
        out.append(table.flow(GUARD_PRIORITY, ip, cookie=key, goto="conntrack"))
        out.append(table.flow(GUARD_PRIORITY, arp, cookie=key, goto="arp_responder"))
    return sorted(out)

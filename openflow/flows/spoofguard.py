"""Source anti-spoofing: a local port may send IPv4 and ARP only from its own MAC and IP.

Everything else from a local port (other addresses, IPv6, other ethertypes)
misses and drops; Contiv endpoints get static IPv4 addresses, so there is no
DHCP exception to make.
"""

from __future__ import annotations

from openflow.fields import Category, cookie
from openflow.flow import ETH_ARP, ETH_IPV4, Flow
from openflow.inputs import LocalPort, NodeInputs
from openflow.pipeline import Tables

GUARD_PRIORITY = 100


def port_flows(tables: Tables, port: LocalPort, round_: int) -> list[Flow]:
    table = tables["spoof_guard"]
    key = cookie(Category.SPOOF_GUARD, port.endpoint_id, round_)
    ip = {"in_port": port.ofport, "eth_type": ETH_IPV4, "eth_src": port.mac, "ipv4_src": port.ip}
    arp = {"in_port": port.ofport, "eth_type": ETH_ARP, "eth_src": port.mac, "arp_spa": port.ip, "arp_sha": port.mac}
    return [table.flow(GUARD_PRIORITY, ip, cookie=key, goto="conntrack"), table.flow(GUARD_PRIORITY, arp, cookie=key, goto="arp_responder")]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    return sorted(f for p in inputs.ports() for f in port_flows(tables, p, inputs.round))

"""Routing mode (Contiv's vlrouter, ``--fwd-mode routing``): the node routes its pods' traffic.

A VLAN bridge in routing mode does not bridge its networks to other nodes; it routes:

* the uplink carries untagged routed traffic to and from the top-of-rack router (ToR). ARP
  from it, and IPv4 for the node's router IP, go to the router port (the internal port that
  carries the router IP, so the node's kernel answers the ToR's ARP and runs the BGP session);
  everything the router port sends goes out of the uplink. Any other IPv4 from the uplink is
  routed traffic for a local pod: it enters the pipeline marked REMOTE (policy is the sending
  node's, as in bridge mode) and OUTSIDE unless its source is a known endpoint of the cluster
  (openflow.flows.classifier.remote_flows): what a host outside sends is judged by the
  destination pod's ingress NetworkPolicy here;
* a local endpoint's /32 is delivered from the anycast MAC (``00:00:11:11:11:11``) to the
  endpoint's MAC, whichever network and node the packet came from (priority 101, above the
  L2 flows, as vlrouter's priority-102 flow);
* each learned route sends what pods address to the anycast MAC (their gateway) toward the
  route's next hop: source the router port's MAC, destination the next hop's, out of the
  uplink; longer prefixes win (priority ``ROUTE_BASE + length``).

Pods' ARP for their gateway and for other nodes' endpoints is answered with the anycast MAC
(openflow.flows.arp). Pure builders; the agent resolves next hops' MACs.
"""

from __future__ import annotations

from openflow.fields import Category, cookie, meta
from openflow.flow import ETH_ARP, ETH_IPV4, Flow, Output, SetField
from openflow.inputs import ANYCAST_MAC, LocalPort, NodeInputs, Route, Router
from openflow.pipeline import Tables

ROUTER_PORT_PRIORITY = 200
ROUTED_IN_PRIORITY = 100
LOCAL_PRIORITY = 101
ROUTE_BASE = 20  # + prefix length: 20..52, between the flood flows (10) and the L2 unicast ones (100)


def router_flows(tables: Tables, router: Router, round_: int) -> list[Flow]:
    """The uplink and the router port: the node's own ARP and BGP pass between them, routed
    traffic from the uplink enters the pipeline."""
    classifier = tables["classifier"]
    key = cookie(Category.ROUTING, "router", round_)
    to_router = (Output(router.ofport),)
    return [
        classifier.flow(ROUTER_PORT_PRIORITY, {"in_port": router.ofport}, cookie=key, actions=(Output(router.uplink),)),
        classifier.flow(ROUTER_PORT_PRIORITY, {"in_port": router.uplink, "eth_type": ETH_ARP}, cookie=key, actions=to_router),
        classifier.flow(
            ROUTER_PORT_PRIORITY, {"in_port": router.uplink, "eth_type": ETH_IPV4, "ipv4_dst": router.address}, cookie=key, actions=to_router
        ),
        classifier.flow(
            ROUTED_IN_PRIORITY,
            {"in_port": router.uplink},
            cookie=key,
            write_metadata=meta(NETWORK=0, SRC_EPG=0, REMOTE=1, OUTSIDE=1),
            goto="conntrack",
        ),
    ]


def route_flow(tables: Tables, route: Route, router: Router, round_: int) -> Flow:
    """Pods' packets to their gateway (the anycast MAC) for ``route``'s prefix, toward its next hop."""
    return tables["forward"].flow(
        ROUTE_BASE + route.length,
        {"eth_dst": ANYCAST_MAC, "eth_type": ETH_IPV4, "ipv4_dst": (route.prefix & route.mask, route.mask)},
        cookie=cookie(Category.ROUTING, f"route:{route.key}", round_),
        actions=(SetField("eth_src", router.mac), SetField("eth_dst", route.next_hop_mac), Output(router.uplink)),
    )


def port_flows(tables: Tables, port: LocalPort, round_: int) -> list[Flow]:
    """The local endpoint's /32, delivered from the anycast MAC."""
    return [
        tables["forward"].flow(
            LOCAL_PRIORITY,
            {"eth_type": ETH_IPV4, "ipv4_dst": port.ip},
            cookie=cookie(Category.ROUTING, port.endpoint_id, round_),
            actions=(SetField("eth_src", ANYCAST_MAC), SetField("eth_dst", port.mac), Output(port.ofport)),
        )
    ]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    router = inputs.router
    if router is None or inputs.encap != "vlan":
        return []
    out = [*router_flows(tables, router, inputs.round), *(route_flow(tables, r, router, inputs.round) for r in inputs.routes)]
    return sorted(out + [f for p in inputs.ports() for f in port_flows(tables, p, inputs.round)])

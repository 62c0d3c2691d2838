"""Service load balancing with conntrack: DNAT of new connections to a VIP, reverse NAT of replies.

* conntrack: every IPv4 packet goes through ``ct(nat)`` in one zone, which
  applies the committed translation to established packets in both
  directions (the reverse translation needs no flow of its own) and
  resubmits to service_lb with ct_state set.
* service_lb: a new connection to VIP:port goes to a select group (one per
  service port); each bucket commits the DNAT to one provider and resubmits
  to dst_epg, so the provider's EPG is what policy sees.  REMOTE packets
  skip to forward: policy was applied on the sending node.
* the VIP is answered by proxy ARP with Contiv's VIP MAC.
A service without providers has no flows: the VIP stays unanswered, as in ofnet.
"""

from __future__ import annotations

from openflow import fields
from openflow.fields import Category, cookie, group_id, meta
from openflow.flow import ETH_IPV4, Ct, Flow, Group, GroupAction, MatchValue, Nat
from openflow.flows.arp import reply_flow
from openflow.inputs import NodeInputs, ServicePort, ServiceSpec, vip_mac
from openflow.pipeline import Tables

CT_PRIORITY = 100
REMOTE_BYPASS_PRIORITY = 300
VIP_PRIORITY = 200
CT_NEW_TRACKED = (0x21, 0x21)  # +new+trk (ct_state bits: new=0x01, trk=0x20)


def _live(service: ServiceSpec) -> bool:
    return bool(service.providers and service.ports)


def _group_id(service: ServiceSpec, port: ServicePort) -> int:
    return group_id(Category.SERVICE, f"{service.service_id}:{port.proto}:{port.port}")


def pipeline_flows(tables: Tables, round_: int) -> list[Flow]:
    """Every IPv4 packet through conntrack; REMOTE packets skip the VIPs (no service needed)."""
    conntrack, lb = tables["conntrack"], tables["service_lb"]
    base = cookie(Category.SERVICE, "conntrack", round_)
    return [
        conntrack.flow(
            CT_PRIORITY, {"eth_type": ETH_IPV4}, cookie=base,
            actions=(Ct(conntrack.goto_id("service_lb"), fields.CT_ZONE, nat=Nat()),),
        ),
        lb.flow(REMOTE_BYPASS_PRIORITY, {"metadata": meta(REMOTE=1)}, cookie=base, goto="forward"),
    ]  # fmt: skip


def service_flows(tables: Tables, service: ServiceSpec, round_: int) -> list[Flow]:
    """The VIP's ARP answer and one flow per service port to its select group."""
    if not _live(service):
        return []
    lb = tables["service_lb"]
    key = cookie(Category.SERVICE, service.service_id, round_)
    out = [reply_flow(tables["arp_responder"], service.vip, vip_mac(service.vip), network=None, cookie_=key)]
    for port in service.ports:
        match: dict[str, MatchValue] = {
            "ct_state": CT_NEW_TRACKED,
            "eth_type": ETH_IPV4,
            "ip_proto": port.proto,
            "ipv4_dst": service.vip,
            "tp_dst": port.port,
        }
        out.append(lb.flow(VIP_PRIORITY, match, cookie=key, actions=(GroupAction(_group_id(service, port)),)))
    return out


def service_groups(tables: Tables, service: ServiceSpec) -> list[Group]:
    """One select group per service port; a bucket per provider commits the DNAT to it."""
    if not _live(service):
        return []
    lb = tables["service_lb"]
    resubmit = lb.goto_id("dst_epg")
    return [
        lb.group(
            _group_id(service, port),
            "select",
            tuple((Ct(resubmit, fields.CT_ZONE, commit=True, nat=Nat(ip, port.target_port)),) for ip in service.providers),
        )
        for port in service.ports
    ]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    return sorted(pipeline_flows(tables, inputs.round) + [f for s in inputs.services for f in service_flows(tables, s, inputs.round)])


def groups(tables: Tables, inputs: NodeInputs) -> list[Group]:
    return sorted(g for s in inputs.services for g in service_groups(tables, s))

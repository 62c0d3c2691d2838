"""Service load balancing with conntrack: DNAT of new connections to a VIP, reverse NAT of replies.

* conntrack: every IPv4 packet goes through ``ct(nat)`` in one zone, which
  applies the committed translation to established packets in both
  directions (the reverse translation needs no flow of its own) and
  resubmits to service_lb with ct_state set.  Established connections
  therefore keep their backend whatever happens to the select group.
* service_lb: a new connection to VIP:port goes to a select group (one per
  service port); each bucket commits the DNAT to one backend (its own target
  port) and resubmits to dst_epg, so the backend's EPG is what policy sees.
  REMOTE packets skip to forward: policy was applied on the sending node.
* sessionAffinity ClientIP: the VIP flow runs session_affinity (flows the
  switch learned: client, VIP, port -> backend in reg0/reg1) and then
  endpoint_dnat, where a known backend gets its DNAT and is learned again, and
  an unknown one goes to the select group, whose buckets name the backend in
  reg0/reg1 and run endpoint_dnat once more (Antrea's scheme).
* the VIP is answered by proxy ARP with Contiv's VIP MAC, on every network.
A service without any backend has no flows: the VIP stays unanswered, as in ofnet. A live
service's VIP answers only on its ports with backends: anything else addressed to it (another
port or protocol, a port whose backends are gone) is dropped in service_lb, not left to the
forward table, which on a VLAN bridge in bridge mode sends unknown unicast out of the uplink.
"""

from __future__ import annotations

from openflow import fields
from openflow.fields import Category, cookie, group_id, meta
from openflow.flow import ETH_IPV4, Action, Bucket, Ct, Flow, Group, GroupAction, LearnBackend, MatchValue, Nat, Resubmit, SetField
from openflow.flows.arp import reply_flow
from openflow.inputs import MAX_AFFINITY_SECONDS, Backend, NodeInputs, ServicePort, ServiceSpec, vip_mac
from openflow.pipeline import Table, Tables

CT_PRIORITY = 100
REMOTE_BYPASS_PRIORITY = 300
VIP_PRIORITY = 200
VIP_DROP_PRIORITY = 150  # below every VIP:port flow
BACKEND_PRIORITY = 200  # endpoint_dnat: reg0/reg1 name one of the port's backends
SELECT_PRIORITY = 100  # endpoint_dnat: no backend named yet
LEARNED_PRIORITY = 100  # the flows learned into session_affinity
CT_NEW_TRACKED = (0x21, 0x21)  # +new+trk (ct_state bits: new=0x01, trk=0x20)


def _group_id(service: ServiceSpec, port: ServicePort) -> int:
    return group_id(Category.SERVICE, f"{service.service_id}:{port.proto}:{port.port}")


def learned_cookie(service: ServiceSpec) -> int:
    """Cookie of the flows the switch learns for ``service``: round 0, so a restart's round
    sweep leaves clients their backends (they expire by their idle timeout)."""
    return cookie(Category.SERVICE, f"{service.service_id}:affinity")


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


def _vip_match(service: ServiceSpec, port: ServicePort) -> dict[str, MatchValue]:
    return {"eth_type": ETH_IPV4, "ip_proto": port.proto, "ipv4_dst": service.vip, "tp_dst": port.port}


def _dnat(table: Table, backend: Backend) -> Ct:
    return Ct(table.goto_id("dst_epg"), fields.CT_ZONE, commit=True, nat=Nat(backend.ip, backend.port))


def service_flows(tables: Tables, service: ServiceSpec, round_: int) -> list[Flow]:
    """The VIP's ARP answer, the drop of what its ports do not take, and one flow per service
    port with backends to its select group (with affinity: through session_affinity and
    endpoint_dnat)."""
    if not service.live:
        return []
    lb, dnat = tables["service_lb"], tables["endpoint_dnat"]
    key = cookie(Category.SERVICE, service.service_id, round_)
    out = [
        reply_flow(tables["arp_responder"], service.vip, vip_mac(service.vip), network=None, cookie_=key),
        lb.flow(VIP_DROP_PRIORITY, {"eth_type": ETH_IPV4, "ipv4_dst": service.vip}, cookie=key),
    ]
    timeout = min(service.affinity_timeout, MAX_AFFINITY_SECONDS)
    for port in service.ports:
        if not port.backends:
            continue
        match = _vip_match(service, port)
        to_group = (GroupAction(_group_id(service, port)),)
        if not timeout:
            out.append(lb.flow(VIP_PRIORITY, {"ct_state": CT_NEW_TRACKED, **match}, cookie=key, actions=to_group))
            continue
        lookup = (Resubmit(lb.goto_id("session_affinity")), Resubmit(lb.goto_id("endpoint_dnat")))
        out.append(lb.flow(VIP_PRIORITY, {"ct_state": CT_NEW_TRACKED, **match}, cookie=key, actions=lookup))
        out.append(dnat.flow(SELECT_PRIORITY, match, cookie=key, actions=to_group))
        table = tables["session_affinity"].id
        for backend in port.backends:
            learn = LearnBackend(table, timeout, LEARNED_PRIORITY, learned_cookie(service), port.proto, backend.ip, backend.port)
            named = {**match, "reg0": backend.ip, "reg1": backend.port}
            out.append(dnat.flow(BACKEND_PRIORITY, named, cookie=key, actions=(learn, _dnat(dnat, backend))))
    return out


def _bucket(tables: Tables, service: ServiceSpec, backend: Backend) -> Bucket:
    lb = tables["service_lb"]
    if not service.affinity_timeout:
        return (_dnat(lb, backend),)
    name: tuple[Action, ...] = (SetField("reg0", backend.ip), SetField("reg1", backend.port))
    return (*name, Resubmit(lb.goto_id("endpoint_dnat")))


def service_groups(tables: Tables, service: ServiceSpec) -> list[Group]:
    """One select group per service port with backends; a bucket per backend (its own target port)."""
    if not service.live:
        return []
    lb = tables["service_lb"]
    return [
        lb.group(_group_id(service, port), "select", tuple(_bucket(tables, service, b) for b in port.backends))
        for port in service.ports
        if port.backends
    ]


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    return sorted(pipeline_flows(tables, inputs.round) + [f for s in inputs.services for f in service_flows(tables, s, inputs.round)])


def groups(tables: Tables, inputs: NodeInputs) -> list[Group]:
    return sorted(g for s in inputs.services for g in service_groups(tables, s))

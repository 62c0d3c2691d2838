"""Kubernetes NetworkPolicy: the np_egress and np_ingress tables (docs/policy.md).

Contiv's policy table continues here (allow or miss); np_egress judges the source pod's egress,
np_ingress the destination pod's ingress, and what passes both returns to qos. Each compiled
rule (:class:`openflow.inputs.NetpolRule`, made by contivd.model.netpolicy) is one flow per
block of its port range:

* egress allow (200): ``ipv4_src=<pod>[,ipv4_dst=<peer>][,proto,tp_dst]`` → np_ingress;
* egress isolation (100): ``ipv4_src=<pod>`` → drop;
* what passes to or from a pod whose isolation judges the replies is committed in np_ingress
  (50, below every drop): ``ipv4_src=<pod>`` for either isolation (the replies to what the pod
  opened), ``ipv4_dst=<pod>`` for egress isolation (the pod's replies to what others opened);
* ingress allow (200): ``ipv4_dst=<pod>[,ipv4_src=<peer>][,proto,tp_dst]`` → commit, qos;
* ingress isolation (100): ``ipv4_dst=<pod>`` → drop.

Replies (``+est+rpl``) and related packets of committed connections skip both tables (300 in
np_egress): NetworkPolicy allows a connection's replies. A reply is judged on the node of the
pod that sends it, which is not the node that committed the connection when it crossed the
tunnel; so in service_lb, where tunnel traffic skips policy, connections arriving from another
node are committed too when a reply would be judged: to an egress-isolated pod (310,
``metadata=REMOTE,ip,nw_dst=<pod>``) or from an ingress-isolated one (320, ``nw_src=<pod>``). Only replies: OVS's userspace
conntrack calls every later packet of a committed connection ``+est``, also the retransmitted
first packet of a service connection the group committed before np_ingress dropped it, so
original-direction packets are judged again each time.

A packet from outside the cluster (metadata OUTSIDE, set by the classifier: an uplink's packet
from no known endpoint, the host port's from no address of the node) is judged here, at its
destination's node, as its source's node is none of the cluster's: in service_lb (330, above the
REMOTE bypass and the remote commits, one flow per local port, owned by it: only the
destination's node judges) what is not a reply or related goes to np_ingress, whose
rules, isolation drop and commit flows judge it as they judge a pod's packet (no Contiv policy
and no egress: the source is no pod). Pod-to-pod traffic is never OUTSIDE, so it is still judged
once, at its source, and each counter counts a packet once.

The cookie carries the rule_id, so flow statistics summed per cookie are the rule's hits (an
isolation's commit flows carry ``<rule_id>/commit`` instead: what they count passes).
"""

from __future__ import annotations

from fastpath import port_range_masks
from openflow import fields
from openflow.fields import Category, cookie, meta
from openflow.flow import ETH_IPV4, Ct, Flow, MatchValue, Resubmit
from openflow.inputs import LocalPort, NetpolPod, NetpolRule, NodeInputs
from openflow.pipeline import Table, Tables

REPLY_PRIORITY = 300
REMOTE_COMMIT_PRIORITY = {"egress": 310, "ingress": 320}
"""service_lb, above the REMOTE bypass (300): tunnel traffic whose replies an isolation judges."""
COMMIT_PRIORITY = 50
"""np_ingress: connections whose replies an isolation judges (below any isolation's drop)."""
CT_EST_REPLY = (0x2A, 0x2A)  # +est+rpl+trk (ct_state bits: est=0x02, rpl=0x08, trk=0x20)
CT_RELATED = (0x24, 0x24)  # +rel+trk (rel=0x04)
OUTSIDE_PRIORITY = 330
"""service_lb: above the REMOTE bypass (300) and the remote commits (310, 320)."""
CT_NOT_REPLY = (0x20, 0x2C)  # +trk-rel-rpl: a new or original-direction packet, not a reply nor related


def pipeline_flows(tables: Tables, round_: int) -> list[Flow]:
    """The reply bypass in np_egress."""
    table = tables["np_egress"]
    to_qos = (Resubmit(table.goto_id("qos")),)
    key = cookie(Category.NETPOL, "replies", round_)
    return [table.flow(REPLY_PRIORITY, {"ct_state": state, "eth_type": ETH_IPV4}, cookie=key, actions=to_qos) for state in (CT_EST_REPLY, CT_RELATED)]


def port_flows(tables: Tables, port: LocalPort, round_: int) -> list[Flow]:
    """service_lb: a packet from outside the cluster to the local ``port``, unless a reply (or
    related) to a connection a pod opened, is judged by np_ingress on this node (its source's
    node is none of ours). Only to a local port: a VLAN trunk may flood a frame to every node,
    and only the destination's may judge it, so that one counter counts it once."""
    match: dict[str, MatchValue] = {"metadata": meta(REMOTE=1, OUTSIDE=1), "eth_type": ETH_IPV4, "ipv4_dst": port.ip, "ct_state": CT_NOT_REPLY}
    key = cookie(Category.NETPOL, port.endpoint_id, round_)
    return [tables["service_lb"].flow(OUTSIDE_PRIORITY, match, cookie=key, goto="np_ingress")]


def _prefix(ip: tuple[int, int]) -> tuple[int, int]:
    mask = ((1 << ip[1]) - 1) << (32 - ip[1])
    return ip[0] & mask, mask


def _matches(rule: NetpolRule) -> list[dict[str, MatchValue]]:
    here, there = ("ipv4_dst", "ipv4_src") if rule.direction == "ingress" else ("ipv4_src", "ipv4_dst")
    match: dict[str, MatchValue] = {"eth_type": ETH_IPV4, here: rule.pod_ip}
    if rule.peer is not None and rule.peer[1]:
        match[there] = _prefix(rule.peer)
    if rule.proto:
        match["ip_proto"] = rule.proto
    if rule.ports is None:
        return [match]
    return [{**match, "tp_dst": block} for block in port_range_masks(*rule.ports)]


def _commit(table: Table) -> Ct:
    return Ct(table.goto_id("qos"), fields.CT_ZONE, commit=True)


def commit_cookie(rule_id: str, round_: int) -> int:
    """The cookie of an isolation's commit flows: not the isolation's own, whose hits are drops."""
    return cookie(Category.NETPOL, f"{rule_id}/commit", round_)


def _remote_commit(tables: Tables, rule: NetpolRule, key: int) -> Flow:
    """Commit what arrives through a tunnel to an egress-isolated pod or from an ingress-isolated one."""
    lb = tables["service_lb"]
    side = "ipv4_dst" if rule.direction == "egress" else "ipv4_src"
    match: dict[str, MatchValue] = {"metadata": meta(REMOTE=1), "eth_type": ETH_IPV4, side: rule.pod_ip}
    return lb.flow(REMOTE_COMMIT_PRIORITY[rule.direction], match, cookie=key, actions=(Ct(lb.goto_id("forward"), fields.CT_ZONE, commit=True),))


def rule_flows(tables: Tables, rule: NetpolRule, round_: int) -> list[Flow]:
    key = cookie(Category.NETPOL, rule.rule_id, round_)
    table = tables[f"np_{rule.direction}"]
    if rule.action == "drop":
        ingress = tables["np_ingress"]
        sides = ("ipv4_src", "ipv4_dst") if rule.direction == "egress" else ("ipv4_src",)
        passing = commit_cookie(rule.rule_id, round_)
        commits = [
            ingress.flow(COMMIT_PRIORITY, {"eth_type": ETH_IPV4, side: rule.pod_ip}, cookie=passing, actions=(_commit(ingress),)) for side in sides
        ]
        return [*(table.flow(rule.priority, m, cookie=key) for m in _matches(rule)), *commits, _remote_commit(tables, rule, passing)]
    if rule.direction == "egress":
        return [table.flow(rule.priority, m, cookie=key, goto="np_ingress") for m in _matches(rule)]
    return [table.flow(rule.priority, m, cookie=key, actions=(_commit(table),)) for m in _matches(rule)]


def pod_flows(tables: Tables, pod: NetpolPod, round_: int) -> list[Flow]:
    """One pod's flows; two rules whose port blocks coincide keep the smaller rule_id's flow
    (the compiler has already merged rules with one match)."""
    chosen: dict[object, Flow] = {}
    for rule in sorted(pod.rules, key=lambda r: r.rule_id):
        for flow in rule_flows(tables, rule, round_):
            chosen.setdefault(flow.key, flow)
    return sorted(chosen.values())


def flows(tables: Tables, inputs: NodeInputs) -> list[Flow]:
    ports = [f for port in inputs.ports() for f in port_flows(tables, port, inputs.round)]
    return sorted(pipeline_flows(tables, inputs.round) + ports + [f for pod in inputs.netpol for f in pod_flows(tables, pod, inputs.round)])

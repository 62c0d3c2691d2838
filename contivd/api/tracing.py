"""`GET /kubernetes/trace/SRC/DST[/PROTO/PORT]` (`ctl trace`, the status page's trace card): the
model's verdict over both kinds of policy (contivd.model.policytrace) and OVS's own answers, the
source node's half and, across nodes, the destination node's, whichever node is asked.

The ends are resolved from this node's snapshot (`trace_end`); each half is asked of the node
that holds the pod through `ask` (the API's authenticated agent call, or this node's agent
directly), so a node that cannot answer is named in its half (`unanswered`), never an error of
the whole trace. `agreement` is pure: a datapath that disagrees with the model is a bug, and is
reported as one (`agree` false, the reasons in `disagreements`). A pod's packet to a Service
address is answered per backend the VIP is DNATed to (`service`, contivd.model.servicetrace).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from openflow import PolicyRuleSpec, ServiceSpec
from openflow.inputs import Backend

from ..agent.hostnet import HostAccessError, node_address, private_subnet
from ..agent.inputs import rule_specs, service_specs
from ..model import NotFoundError
from ..model.netpolicy import Compiled, TraceQuery
from ..model.policytrace import TraceEnd, explain, explanation_json
from ..model.servicetrace import Translation, translate
from ..state import EndpointState, StateSnapshot

Half = dict[str, Any]  # an agent's /trace answer (OvsTrace's fields), or `skipped` / `unanswered` / `error`
Ask = Callable[[str, str, TraceQuery, str, str], Awaitable[Half]]  # (node, side, query, src ip, dst ip) → its half
Judge = Callable[[TraceEnd, TraceEnd, TraceQuery], dict[str, Any]]  # the model's explanation of one pair, as JSON


def _end_of(ep: EndpointState, snapshot: StateSnapshot) -> TraceEnd:
    network = snapshot.networks.get(ep.net_id)
    vxlan = network is not None and network.pkt_tag_type == "vxlan"
    return TraceEnd(int(ipaddress.IPv4Address(ep.ip_address)), ep.id, ep.endpoint_group_id, ep.net_id, ep.homing_host, ep.k8s_pod, vxlan=vxlan)


def node_addresses(snapshot: StateSnapshot) -> set[int]:
    """The addresses a node sends from into its own bridge's host port (trusted, not judged): the
    nodes' private address (the global pvtSubnet's last host) and each node's VTEP (its NodePort
    source on VXLAN bridges)."""
    try:
        found = {int(node_address(private_subnet(snapshot.private_subnet())))}
    except HostAccessError:  # an unusable pvtSubnet: no node has that address either
        found = set()
    return found | {int(ipaddress.IPv4Address(n.vtep_ip)) for n in snapshot.nodes.values() if n.vtep_ip}


def trace_end(snapshot: StateSnapshot, ref: str) -> TraceEnd:
    """A trace end: an IPv4 address (an endpoint's, else an external address), an endpoint id,
    or a pod `namespace/name` (its endpoint; a pod with NetworkPolicy rules but no endpoint here;
    an endpoint whose common name is the pod's name). NotFoundError naming `ref` otherwise."""
    endpoints = sorted((ep for ep in snapshot.endpoints.values() if ep.ip_address), key=lambda ep: ep.id)
    try:
        address = str(ipaddress.IPv4Address(ref))
    except ValueError:
        address = ""
    if address:
        found = next((ep for ep in endpoints if ep.ip_address == address), None)
        if found is not None:
            return _end_of(found, snapshot)
        ip = int(ipaddress.IPv4Address(address))
        return TraceEnd(ip, node_itself=ip in node_addresses(snapshot))
    endpoint = snapshot.endpoints.get(ref)
    if endpoint is not None and endpoint.ip_address:
        return _end_of(endpoint, snapshot)
    found = next((ep for ep in endpoints if ep.k8s_pod == ref), None)
    if found is not None:
        return _end_of(found, snapshot)
    pod = snapshot.k8s_netpol.get(ref)
    if pod is not None and pod.rules:
        ip = pod.rules[0].pod_ip
        found = next((ep for ep in endpoints if int(ipaddress.IPv4Address(ep.ip_address)) == ip), None)
        return _end_of(found, snapshot) if found is not None else TraceEnd(ip, pod=ref)
    _, _, name = ref.partition("/")
    named = [ep for ep in endpoints if name and ep.ep_common_name == name]
    if len(named) == 1:
        return _end_of(named[0], snapshot)
    raise NotFoundError(
        f"trace: {ref!r} is not an IPv4 address, an endpoint id or a pod we know" + (" (several endpoints have that name)" if named else "")
    )


def contiv_rules(snapshot: StateSnapshot) -> list[PolicyRuleSpec]:
    """The Contiv rules as the agents program them (a rule they refuse is left out, as they leave it out)."""
    return rule_specs(snapshot)[0]


def agreement(model_verdict: str, source: Half | None, destination: Half | None, *, judged_there: bool = False) -> tuple[bool | None, list[str]]:
    """Whether the datapaths do what the model says: the source node's OVS gives the model's
    verdict; a packet the model lets through is also delivered by the destination node's OVS,
    and one from outside the cluster (`judged_there`: its ingress is judged at the destination's
    node) gets the model's verdict there. None when no datapath answered."""
    compared = False
    wrong = []
    if source is not None and "verdict" in source:
        compared = True
        if source["verdict"] != model_verdict:
            wrong.append(f"the source's node {source.get('node')}: OVS says {source['verdict']}, the model {model_verdict}")
    if destination is not None and "verdict" in destination and (model_verdict == "allow" or judged_there):
        compared = True
        if destination["verdict"] != model_verdict:
            whence = "from outside the cluster" if judged_there else "from the source's node"
            wrong.append(
                f"the destination's node {destination.get('node')}: OVS says {destination['verdict']} for what arrives {whence}, the model {model_verdict}"
            )
    return (not wrong if compared else None), wrong


def _end_json(end: TraceEnd) -> dict[str, Any]:
    return {"endpoint": end.endpoint or None, "pod": end.pod or None, "node": end.node or None, "group": end.group, "external": not end.endpoint}


def services(snapshot: StateSnapshot) -> list[ServiceSpec]:
    """The services as the agents program them (one they refuse, or a second on one VIP, is left out)."""
    return service_specs(snapshot)[0]


def bridged(snapshot: StateSnapshot, src: TraceEnd, routing: bool) -> bool:
    """Whether the source's bridge only bridges (no route between networks): always but in
    routing mode (`--fwd-mode routing`), which routes on VLAN networks only."""
    network = snapshot.networks.get(src.network)
    return not (routing and network is not None and network.pkt_tag_type == "vlan")


async def trace(snapshot: StateSnapshot, query: TraceQuery, node: str, ask: Ask, *, routing: bool = False) -> dict[str, Any]:
    """The whole answer of the trace route, asked on node `node` (`routing`: the nodes run
    `--fwd-mode routing`). A DST that is a Service's address is judged, and traced, against
    each backend its VIP is DNATed to (`service`)."""
    src, dst = trace_end(snapshot, query.src), trace_end(snapshot, query.dst)
    head: dict[str, Any] = {
        "src": _ip(src.address),
        "dst": _ip(dst.address),
        "proto": query.proto,
        "port": query.port,
        "answered_by": node,
        "ends": {"src": _end_json(src), "dst": _end_json(dst)},
    }
    rules = contiv_rules(snapshot)  # once per trace, not per backend
    netpol = Compiled(tuple(r for pod in snapshot.k8s_netpol.values() for r in pod.rules))

    def judge(src: TraceEnd, dst: TraceEnd, query: TraceQuery) -> dict[str, Any]:
        return explanation_json(explain(rules, netpol, src, dst, query.proto, query.port, bridged=bridged(snapshot, src, routing)))

    # Only a pod's packet is load-balanced: an outside source enters as REMOTE, which skips the VIP flows.
    translation = translate(services(snapshot), dst.address, query.proto, query.port) if src.endpoint and not dst.endpoint else None
    if translation is None:
        return {**head, **await _pair(judge, src, dst, query, ask)}
    return {**head, **await _through_service(snapshot, judge, src, query, translation, ask)}


def _ip(address: int) -> str:
    return str(ipaddress.IPv4Address(address))


async def _pair(judge: Judge, src: TraceEnd, dst: TraceEnd, query: TraceQuery, ask: Ask) -> dict[str, Any]:
    """The model's verdict on src → dst and OVS's halves on the ends' nodes, compared."""
    model = judge(src, dst, query)
    src_ip, dst_ip = _ip(src.address), _ip(dst.address)
    halves: dict[str, Half | None] = {"source": None, "destination": None}
    outside = not src.endpoint and not src.node_itself  # judged at the destination's node, whatever the verdict

    async def asked(side: str, holder: str) -> None:
        halves[side] = await ask(holder, side, query, src_ip, dst_ip)

    async with trio.open_nursery() as nursery:  # the two nodes trace at the same time
        if src.node:
            nursery.start_soon(asked, "source", src.node)
        else:
            halves["source"] = {"skipped": f"{src_ip} is no endpoint: no node's bridge sends it (it enters as REMOTE, see the model's reasons)"}
        if dst.node and dst.node != src.node:
            if model["verdict"] == "allow" or outside:
                nursery.start_soon(asked, "destination", dst.node)
            else:
                halves["destination"] = {"node": dst.node, "skipped": "not reached: the source's node drops the packet"}
    source, destination = halves["source"], halves["destination"]
    agree, disagreements = agreement(model["verdict"], source, destination, judged_there=outside)
    return {**model, "ovs": source, "ovs_destination": destination, "agree": agree, "disagreements": disagreements}


async def _through_service(
    snapshot: StateSnapshot, judge: Judge, src: TraceEnd, query: TraceQuery, translation: Translation, ask: Ask
) -> dict[str, Any]:
    """A packet to a VIP: the source's OVS traced to the VIP (through conntrack to the service's
    select group, where the datapath's hash picks the backend), and each backend as the DNATed
    packet reaches it (its address and target port), judged and traced like any pair."""
    vip = _ip(translation.vip)
    answers: list[dict[str, Any]] = [{} for _ in translation.backends]
    vip_half: list[Half | None] = [None]

    async def backend(index: int, to: Backend) -> None:
        end = trace_end(snapshot, _ip(to.ip))
        pair = await _pair(judge, src, end, dataclasses.replace(query, port=to.port), ask)
        answers[index] = {"backend": f"{_ip(to.ip)}:{to.port}", "end": _end_json(end), **pair}

    async def source() -> None:
        vip_half[0] = await ask(src.node, "source", query, _ip(src.address), vip)

    async with trio.open_nursery() as nursery:
        if src.node:
            nursery.start_soon(source)
        for index, to in enumerate(translation.backends):
            nursery.start_soon(backend, index, to)
    half = vip_half[0] if src.node else {"skipped": f"{_ip(src.address)} is no endpoint: no node's bridge sends it"}
    verdicts = {a["verdict"] for a in answers}
    verdict = "drop" if not answers else (verdicts.pop() if len(verdicts) == 1 else "depends on the backend")
    same = answers and all((a["verdict"], a["deciding"]) == (answers[0]["verdict"], answers[0]["deciding"]) for a in answers)
    model = {key: answers[0][key] for key in ("deciding", "rules", "contiv", "egress", "ingress")} if same else {}
    reasons = [translation.why, *(f"backend {a['backend']}: {a['verdict']}" + (f" by {a['deciding']}" if a["deciding"] else "") for a in answers)]
    expected = "load-balanced" if answers else "drop"
    wrong = []
    if half is not None and "verdict" in half and half["verdict"] != expected:
        wrong.append(f"the source's node {half.get('node')}: OVS says {half['verdict']} for the VIP, the model {expected}")
    wrong += [f"backend {a['backend']}: {why}" for a in answers for why in a["disagreements"]]
    compared = (half is not None and "verdict" in half) or any(a["agree"] is not None for a in answers)
    return {
        "verdict": verdict,
        "deciding": None,
        "rules": [],
        "contiv": None,
        "egress": None,
        "ingress": None,
        **model,
        "reasons": reasons,
        "service": {"id": translation.service, "vip": vip, "backends": answers},
        "ovs": half,
        "ovs_destination": None,
        "agree": (not wrong) if compared else None,
        "disagreements": wrong,
    }


def half_from_agent(node: str, called: tuple[int, bytes] | None, parsed: Mapping[str, Any] | None) -> Half:
    """An agent's answer to `/trace/...` as one half: its trace, or why it has none."""
    if called is None:
        return {"node": node, "unanswered": f"node {node} is not registered or runs no agent"}
    status, body = called
    if status != 200 or parsed is None:
        return {"node": node, "unanswered": f"node {node}'s agent answered HTTP {status}: {body[:300].decode(errors='replace').strip()}"}
    return {"node": node, **parsed}

"""Benchmark Kubernetes NetworkPolicy compilation and flow building: 500 NetworkPolicies over
2 000 pods in 20 namespaces, for 3 nodes, in one process (no OVS, no Raft: the leader's and
the agents' pure code paths, as the daemons run them).

* ``compile_s``: the leader's whole compile (`contivd.k8s.netpol.compile_objects`: parse the
  API objects, select, compile, group per pod), the median of the runs.
* ``flows_per_node``: the NetworkPolicy flows (np tables and commit flows) node 1 holds (pods
  are spread over the 3 nodes): every pod's ingress rules (policy is judged at the source node,
  which needs every destination's ingress), its own pods' egress rules.
* ``np_change_to_flows_p50_ms`` / ``np_change_to_flows_p99_ms``: one policy changed (its peer
  selector), then the leader's recompile and diff against what it wrote, and each of 3 nodes'
  incremental flow engine (`openflow.FlowState.update`, fed the unchanged records as the same
  objects, as the snapshot keeps them) producing its plan; the Raft commit and the OpenFlow
  send are NOT included (see docs/performance.md).
* ``trace_ms``: what `ctl trace` spends on one packet, the median: the model's verdict
  (``trace_model_ms``, `explain`: Contiv's EPG rules, ``contiv_rules`` of them over the 20 app
  groups, then `decide` over the compiled NetworkPolicy rules) plus OVS's (``trace_ovs_ms``:
  `ovs-appctl ofproto/trace` on a bridge of a managed Open vSwitch, in a network namespace of its
  own (a second userspace OVS beside the node's would collide), holding one node's flows: a
  local pod, the other pods as remote endpoints, every Contiv and NetworkPolicy flow). Without
  root or Open vSwitch the OVS half is skipped (null) and ``trace_ms`` is the model's alone.
  One trace across nodes runs ofproto/trace twice (the source's and the destination's node, one
  after the other), so it costs ``trace_model_ms`` + 2 × ``trace_ovs_ms`` plus the agent calls.

Usage: python3 benchmarks/policy_bench.py [--quick]   (--quick: 50 policies over 200 pods, 100 Contiv rules)
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from contivd.agent.inputs import without_egress  # noqa: E402
from contivd.agent.trace import trace_flow  # noqa: E402
from contivd.k8s.netpol import ObjectsCompiler, compile_objects  # noqa: E402
from contivd.k8s.view import NAMESPACES, NETWORK_POLICIES, PODS  # noqa: E402
from contivd.model.policytrace import TraceEnd, explain  # noqa: E402
from openflow.desired import desired  # noqa: E402
from openflow.fields import CATEGORY_SHIFT, Category  # noqa: E402
from openflow.incremental import FlowState  # noqa: E402
from openflow.inputs import LocalPort, NetpolPod, NetworkRef, NodeInputs, PolicyRuleSpec, RemoteEndpoint, TunnelPort, vip_mac  # noqa: E402
from openflow.text import flow_text, group_text  # noqa: E402
from tests.support.ovs_netns import private_ovs  # noqa: E402

NODES = 3
APPS = 20


def pod_ip(index: int) -> str:
    return str(IPv4Address("198.18.0.0") + 1 + index)


def objects(policies: int, pods: int, namespaces: int) -> dict[str, dict[str, dict[str, Any]]]:
    """The API objects by kind and `<ns>/<name>`: pods spread over namespaces, `app` labels in 20
    groups; policies of five shapes in turn (podSelector + port, named port from namespaces by
    name, egress to an ipBlock with except, both selectors + a port range, egress to pods)."""
    out: dict[str, dict[str, dict[str, Any]]] = {NAMESPACES: {}, PODS: {}, NETWORK_POLICIES: {}}
    for n in range(namespaces):
        out[NAMESPACES][f"/ns{n}"] = {"metadata": {"name": f"ns{n}", "labels": {"team": f"t{n % 5}"}}}
    for p in range(pods):
        ns = f"ns{p % namespaces}"
        labels = {"app": f"a{(p // namespaces) % APPS}", "tier": f"t{p % 4}"}
        spec = {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]}
        out[PODS][f"{ns}/p{p}"] = {"metadata": {"namespace": ns, "name": f"p{p}", "labels": labels}, "spec": spec, "status": {"podIP": pod_ip(p)}}
    for i in range(policies):
        out[NETWORK_POLICIES][f"ns{i % namespaces}/np{i}"] = policy(i, namespaces)
    return out


def group_of(p: int, namespaces: int) -> int:
    """Pod p's EPG id: one group per `app` label (1..APPS)."""
    return (p // namespaces) % APPS + 1


def contiv_rules(count: int) -> tuple[PolicyRuleSpec, ...]:
    """Contiv rules between the app groups as the agent programs them: in-rules of one group
    from the next, TCP to one port each, allows and (every fourth) denies, priorities 1..10."""
    return tuple(
        PolicyRuleSpec(
            f"default:a{i % APPS}:default:p{i}:default:p{i}:1:inRx",
            1 + i % 10,
            "deny" if i % 4 == 3 else "allow",
            src_epg=(i + 1) % APPS + 1,
            dst_epg=i % APPS + 1,
            proto=6,
            dst_port=8000 + (i // APPS) % 200,
        )
        for i in range(count)
    )


def policy(i: int, namespaces: int, peer_shift: int = 0) -> dict[str, Any]:
    ns = f"ns{i % namespaces}"
    target = {"matchLabels": {"app": f"a{i % APPS}"}}
    peer = {"matchLabels": {"app": f"a{(i + 1 + peer_shift) % APPS}"}}
    shape = i % 5
    spec: dict[str, Any] = {"podSelector": target}
    if shape == 0:
        spec["ingress"] = [{"from": [{"podSelector": peer}], "ports": [{"port": 8080}]}]
    elif shape == 1:
        by_name = {"matchLabels": {"kubernetes.io/metadata.name": f"ns{(i + 1 + peer_shift) % namespaces}"}}
        spec["ingress"] = [{"from": [{"namespaceSelector": by_name, "podSelector": peer}], "ports": [{"port": "http"}]}]
    elif shape == 2:
        block = {"cidr": "198.19.0.0/16", "except": [f"198.19.{(i + peer_shift) % 256}.0/24"]}
        spec["egress"] = [{"to": [{"ipBlock": block}], "ports": [{"protocol": "UDP", "port": 53}]}]
    elif shape == 3:
        both = {"namespaceSelector": {"matchLabels": {"team": f"t{(i + peer_shift) % 5}"}}, "podSelector": peer}
        spec["ingress"] = [{"from": [both], "ports": [{"port": 9000, "endPort": 9100}]}]
    else:
        spec["policyTypes"] = ["Egress"]
        spec["egress"] = [{"to": [{"podSelector": peer}], "ports": [{"protocol": "TCP"}]}]
    return {"metadata": {"namespace": ns, "name": f"np{i}"}, "spec": spec}


async def ovs_trace_ms(ips: list[int], groups: list[int], netpol: tuple[NetpolPod, ...], rules: tuple[PolicyRuleSpec, ...]) -> float:
    """Median ofproto/trace time of first packets from pod 0 (local, port 1) to other pods,
    on a managed OVS (temporary directory, network namespace of its own) holding the node's flows."""
    net = NetworkRef("pods.default", "vxlan", 1, 100, int(IPv4Address("198.18.255.254")))
    local = LocalPort(1, "pod-0", ips[0], vip_mac(ips[0]), net, groups[0])
    vtep = int(IPv4Address("198.19.0.2"))
    remotes = tuple(RemoteEndpoint(f"pod-{i}", ip, vip_mac(ip), net, groups[i], vtep=vtep) for i, ip in enumerate(ips) if i)
    inputs = NodeInputs("vxlan", (local,), remotes, (TunnelPort(2, vtep),), rules=rules, netpol=netpol)
    want = desired(inputs)
    async with private_ovs("pbench") as ovs:  # beside any other userspace OVS on the machine (contivd's own)
        bridge = "pbench0"
        vsctl = ["ovs-vsctl", f"--db={ovs.db_socket}"]
        await trio.run_process(
            [*vsctl, "add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev", "fail_mode=secure", "protocols=OpenFlow13"]
        )
        group_file, flow_file = ovs.run_dir / "groups", ovs.run_dir / "flows"
        group_file.write_text("".join(group_text(g) + "\n" for g in want.groups))
        flow_file.write_text("".join(flow_text(f) + "\n" for f in want.flows))
        ofctl = ["ovs-ofctl", "-O", "OpenFlow13"]
        await trio.run_process([*ofctl, "add-groups", ovs.management_socket(bridge), str(group_file)])
        await trio.run_process([*ofctl, "add-flows", ovs.management_socket(bridge), str(flow_file)])
        times = []
        for t in range(20):
            dst = ips[1 + (t * 13) % (len(ips) - 1)]
            flow = trace_flow(local, vip_mac(dst), dst, 6, 8080)
            start = time.perf_counter()
            await trio.run_process(["ovs-appctl", "-t", ovs.vswitchd_control, "ofproto/trace", bridge, flow], capture_stdout=True)
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def node_inputs(records: dict[str, NetpolPod], local: set[int]) -> NodeInputs:
    """A node's NetworkPolicy inputs as its agent makes them: remote pods without egress rules
    (made anew here each time; the agent keeps them per record, so this costs the bench more)."""
    return NodeInputs("vxlan", netpol=tuple(r if not r.rules or r.rules[0].pod_ip in local else without_egress(r) for r in records.values()))


def kept(old: dict[str, NetpolPod], new: dict[str, NetpolPod]) -> dict[str, NetpolPod]:
    """`new`, reusing the old record objects where equal (what the leader's diff and the
    snapshot do: an unchanged pod is not rewritten, so every node keeps its object)."""
    return {pod: old[pod] if old.get(pod) == record else record for pod, record in new.items()}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(policies: int, pods: int, namespaces: int, changes: int, contiv: int) -> dict[str, Any]:
    objs = objects(policies, pods, namespaces)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        records, compiled, refused = compile_objects(objs)
        times.append(time.perf_counter() - start)
    assert not refused, refused
    engines = [FlowState() for _ in range(NODES)]
    local = [{int(IPv4Address(pod_ip(p))) for p in range(pods) if p % NODES == node} for node in range(NODES)]
    for node, engine in enumerate(engines):
        engine.update(node_inputs(records, local[node]))
    flows = sum(1 for f in engines[0].installed.flows if (f.cookie >> CATEGORY_SHIFT) & 0xFF == Category.NETPOL)
    leader = ObjectsCompiler()
    records, _, _ = leader.compile(objs)  # the leader's first compile of its term
    change_ms = []
    for c in range(changes):
        i = (c * 7) % policies
        objs[NETWORK_POLICIES][f"ns{i % namespaces}/np{i}"] = policy(i, namespaces, peer_shift=1 + c % 3)
        start = time.perf_counter()
        new, _, _ = leader.compile(objs)
        records = kept(records, new)
        for node, engine in enumerate(engines):
            engine.update(node_inputs(records, local[node]))
        change_ms.append((time.perf_counter() - start) * 1000)
    ips = [int(IPv4Address(pod_ip(p))) for p in range(pods)]
    groups = [group_of(p, namespaces) for p in range(pods)]
    ends = [TraceEnd(ip, f"pod-{p}", groups[p], "pods.default", f"node{p % NODES}") for p, ip in enumerate(ips)]
    rules = contiv_rules(contiv)
    trace = []
    for t in range(50):
        start = time.perf_counter()
        explain(rules, compiled, ends[t % pods], ends[(t * 13 + 1) % pods], 6, 8000 + t % 200)
        trace.append((time.perf_counter() - start) * 1000)
    model_ms = statistics.median(trace)
    ovs = os.geteuid() == 0 and shutil.which("ovs-vswitchd")
    ovs_ms = trio.run(ovs_trace_ms, ips, groups, tuple(records.values()), rules) if ovs else None
    return {
        "policies": policies,
        "pods": pods,
        "nodes": NODES,
        "rules": len(compiled.rules),
        "contiv_rules": contiv,
        "compile_s": round(statistics.median(times), 3),
        "flows_per_node": flows,
        "np_change_to_flows_p50_ms": round(percentile(change_ms, 0.5), 1),
        "np_change_to_flows_p99_ms": round(percentile(change_ms, 0.99), 1),
        "trace_model_ms": round(model_ms, 2),
        "trace_ovs_ms": None if ovs_ms is None else round(ovs_ms, 1),
        "trace_ms": round(model_ms + (ovs_ms or 0.0), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="50 policies over 200 pods, 10 changes, 100 Contiv rules instead of 500 / 2000 / 50 / 1000"
    )
    args = parser.parse_args()
    figures = run(50, 200, 20, 10, 100) if args.quick else run(500, 2000, 20, 50, 1000)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

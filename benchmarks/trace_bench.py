"""Benchmark `ctl trace`'s answer end to end: the HTTP request to the trace route of a contivd
node, the model (Contiv's rules, then NetworkPolicy's) and the OVS halves asked of the nodes
that hold the pods, on three real contivd nodes (each in its namespace with its own OVS, joined
by a fabric namespace, as in tests/support/nodes.py).

* ``trace_cross_p50_ms`` / ``_p99_ms``: source pod on node 1, destination pod on node 2, asked
  of node 3 (both halves through the signed agent call, at the same time), over HTTPS with a
  token, one connection kept alive.
* ``trace_local_p50_ms`` / ``_p99_ms``: both pods on node 1, asked of node 1 (its own agent,
  one ofproto/trace).
* ``trace_service_p50_ms`` / ``_p99_ms``: the source pod to a Contiv serviceLB VIP (TCP 80)
  whose providers are the two other pods (node 1 and node 2), asked of node 3: the VIP half and
  each backend's halves (four ofproto/traces on two nodes, at the same time).
Each is taken over ``--requests`` requests (``--quick``: 20) after 3 warm-up requests; the
policy attached to the destination's group has ``--rules`` Contiv rules (default 200) so the
model and the policy table are not empty. The issue's target is < 500 ms for one answer.

Usage: python3 benchmarks/trace_bench.py [--quick] [--requests N] [--rules N]   (root; Open vSwitch installed)
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.nodes import Node, attach_pod, cluster_of_nodes, reaches, sh, wait_until  # noqa: E402

SUBNET, GATEWAY = "198.18.44.0/24", "198.18.44.254"
SERVICE_SUBNET, SERVICE_GATEWAY = "198.18.45.0/24", "198.18.45.254"
# Run inside the asking node's namespace: N timed GETs on one kept-alive HTTPS connection.
TIMER = (
    "import httpx,json,ssl,sys,time; url,token,ca,n=sys.argv[1],sys.argv[2],sys.argv[3],int(sys.argv[4]);"
    " c=httpx.Client(headers={'Accept':'application/json','Authorization':'Bearer '+token},verify=ssl.create_default_context(cafile=ca),timeout=30);"
    " out=[]\n"
    "for i in range(n+3):\n"
    "    t=time.perf_counter(); r=c.get(url); ms=(time.perf_counter()-t)*1000; a=r.json()\n"
    "    assert r.status_code==200 and a.get('agree') is True, r.text\n"
    "    out.append(ms) if i>=3 else None\n"
    "print(json.dumps(out))"
)


def post(node: Node, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, answer = node.api_call("POST", path, body)
    assert status == 200, answer
    return dict(answer) if isinstance(answer, dict) else {}


def timed(node: Node, path: str, requests: int) -> list[float]:
    done = sh("ip", "netns", "exec", node.ns, sys.executable, "-c", TIMER, node.url() + path, node.token, str(node.ca_file), str(requests))
    return [float(ms) for ms in json.loads(done.stdout)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(requests: int, rules: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="trace-bench-") as tmp, cluster_of_nodes(Path(tmp), 3) as nodes:
        first, second, third = nodes
        post(
            first,
            "/api/v1/networks/default:tb/",
            {"tenantName": "default", "networkName": "tb", "encap": "vxlan", "subnet": SUBNET, "gateway": GATEWAY},
        )
        post(first, "/api/v1/policys/default:tbp/", {"tenantName": "default", "policyName": "tbp"})
        for group in ("tbfront", "tbback"):
            post(first, f"/api/v1/endpointGroups/default:{group}/", {"tenantName": "default", "groupName": group, "networkName": "tb"})
        for i in range(rules):  # allows of TCP ports other than the traced one, then ICMP allowed
            rule = {
                "tenantName": "default",
                "policyName": "tbp",
                "ruleId": str(i),
                "direction": "in",
                "fromEndpointGroup": "tbfront",
                "priority": 1 + i % 10,
            }
            post(first, f"/api/v1/rules/default:tbp:{i}/", {**rule, "protocol": "tcp", "port": 1000 + i, "action": "allow"})
        post(
            first,
            "/api/v1/endpointGroups/default:tbback/",
            {"tenantName": "default", "groupName": "tbback", "networkName": "tb", "policies": ["tbp"]},
        )
        placed = (("src", first, 0, "tbfront"), ("near", first, 1, "tbback"), ("far", second, 0, "tbback"))
        ip = {}
        for name, node, index, group in placed:
            request = {
                "TenantName": "default",
                "NetworkName": "tb",
                "ServiceName": group,
                "EndpointID": name,
                "ConfigEP": {"Container": name, "Host": node.name},
            }
            endpoint = post(node, "/plugin/createEndpoint", request)["EndpointConfig"]
            attach_pod(node, index, endpoint)
            ip[name] = endpoint["ipAddress"]
        wait_until(lambda: reaches(first.pods[0], ip["far"]) and reaches(first.pods[0], ip["near"]), 60, "the pods to reach each other", first)
        cross = timed(third, f"/kubernetes/trace/{ip['src']}/{ip['far']}/icmp", requests)
        local = timed(first, f"/kubernetes/trace/{ip['src']}/{ip['near']}/icmp", requests)
        vip = service_of(first, ("near", "far"))
        service = timed(third, f"/kubernetes/trace/{ip['src']}/{vip}/tcp/80", requests)
    return {
        "requests": requests,
        "contiv_rules": rules,
        "trace_cross_p50_ms": round(statistics.median(cross), 1),
        "trace_cross_p99_ms": round(percentile(cross, 0.99), 1),
        "trace_local_p50_ms": round(statistics.median(local), 1),
        "trace_local_p99_ms": round(percentile(local, 0.99), 1),
        "trace_service_p50_ms": round(statistics.median(service), 1),
        "trace_service_p99_ms": round(percentile(service, 0.99), 1),
    }


def service_of(node: Node, providers: tuple[str, ...]) -> str:
    """A Contiv serviceLB (TCP 80 -> 1080) on its own network whose providers are the
    endpoints `providers`; its VIP once allocated."""
    network = {"tenantName": "default", "networkName": "tbsvc", "encap": "vxlan", "subnet": SERVICE_SUBNET, "gateway": SERVICE_GATEWAY}
    post(node, "/api/v1/networks/default:tbsvc/", network)
    lb = {"tenantName": "default", "serviceName": "tbweb", "networkName": "tbsvc", "selectors": ["app=tbweb"], "ports": ["80:1080:TCP"]}
    post(node, "/api/v1/serviceLBs/default:tbweb/", lb)
    for name in providers:
        update = {"Tenant": "default", "Network": "tb", "EndpointID": name, "Event": "start", "Labels": {"app": "tbweb"}}
        post(node, "/plugin/updateEndpoint", update)

    def providers_known() -> bool:
        oper = node.api_call("GET", "/api/v1/inspect/serviceLBs/default:tbweb/")[1].get("Oper") or {}
        return bool(oper.get("serviceVip")) and len(oper.get("providers") or {}) == len(providers)

    wait_until(providers_known, 60, "the serviceLB's providers", node)
    return str(node.api_call("GET", "/api/v1/inspect/serviceLBs/default:tbweb/")[1]["Oper"]["serviceVip"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 requests and 20 rules")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rules", type=int, default=200)
    args = parser.parse_args()
    figures = run(20, 20) if args.quick else run(args.requests, args.rules)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

"""Screenshots of the status page of a 3-node loopback cluster: docs/img/status-*.png.

    PYTHONPATH=. python3 docs/img/make_screenshots.py [--endpoints N] [--datapath]

Starts three `contivd run` nodes with tests/support/contivd_nodes.py, creates a few networks, groups,
policies and endpoints through the API, opens the page in Debian's chromium through Playwright
and saves full-page and per-section screenshots next to this file. With `--datapath` (root,
Open vSwitch installed) everything runs inside a fresh network namespace and node0 runs the
node agent on its own managed OVS, so the datapath table has real figures.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.support

import httpx  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.support.contivd_nodes import CHROMIUM, CHROMIUM_ARGS, ContivdCluster, ContivdProcess  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

HERE = Path(__file__).resolve().parent


def ok(answer: object) -> None:
    status = getattr(answer, "status_code", 0)
    if status != 200:
        raise SystemExit(f"API call failed: {status} {getattr(answer, 'text', '')}")


def populate(nodes: list[ContivdProcess], endpoints: int) -> None:
    api = nodes[0]
    networks = [
        ("frontend", "vxlan", "198.18.0.0/24", "198.18.0.254"),
        ("backend", "vxlan", "198.18.4.0/22", "198.18.7.254"),
        ("storage", "vlan", "198.18.8.0/26", "198.18.8.62"),
    ]
    for name, encap, subnet, gateway in networks:
        ok(
            api.post(
                f"/api/v1/networks/default:{name}/",
                {"tenantName": "default", "networkName": name, "encap": encap, "subnet": subnet, "gateway": gateway},
            )
        )
    ok(api.post("/api/v1/policys/default:db-in/", {"tenantName": "default", "policyName": "db-in"}))
    ok(api.post("/api/v1/policys/default:web-in/", {"tenantName": "default", "policyName": "web-in"}))
    rules = [
        ("db-in", "1", {"direction": "in", "action": "deny", "priority": 1}),
        ("db-in", "2", {"direction": "in", "action": "allow", "priority": 10, "fromEndpointGroup": "app", "protocol": "tcp", "port": 5432}),
        ("db-in", "3", {"direction": "in", "action": "allow", "priority": 10, "fromNetwork": "storage", "protocol": "tcp", "port": 5432}),
        ("db-in", "4", {"direction": "in", "action": "allow", "priority": 5, "fromIpAddress": "198.18.9.0/24", "protocol": "icmp"}),
        ("web-in", "1", {"direction": "in", "action": "allow", "priority": 5, "protocol": "tcp", "port": 443}),
        ("web-in", "2", {"direction": "in", "action": "deny", "priority": 5, "protocol": "tcp", "port": 80}),
    ]
    groups = [("web", "frontend", []), ("app", "backend", []), ("db", "backend", []), ("backup", "storage", [])]
    for group, network, policies in groups:
        ok(
            api.post(
                f"/api/v1/endpointGroups/default:{group}/",
                {"tenantName": "default", "groupName": group, "networkName": network, "policies": policies},
            )
        )
    for policy, rule_id, rule in rules:
        body = {"tenantName": "default", "policyName": policy, "ruleId": rule_id, **rule}
        ok(api.post(f"/api/v1/rules/default:{policy}:{rule_id}/", body))
    for group, network, policies in [("web", "frontend", ["web-in"]), ("db", "backend", ["db-in"])]:
        ok(
            api.post(
                f"/api/v1/endpointGroups/default:{group}/",
                {"tenantName": "default", "groupName": group, "networkName": network, "policies": policies},
            )
        )
    placement = [("web", "frontend"), ("app", "backend"), ("db", "backend"), ("backup", "storage")]
    for i in range(endpoints):
        group, network = placement[i % len(placement)]
        node = nodes[i % len(nodes)]
        ep = f"{group}-{i:04d}"
        ok(
            node.post(
                "/plugin/createEndpoint",
                {
                    "TenantName": "default",
                    "NetworkName": network,
                    "ServiceName": group,
                    "EndpointID": ep,
                    "ConfigEP": {"Container": ep, "Host": node.name},
                },
            )
        )
        labels = {"app": group, "tier": "frontend" if group == "web" else "backend"}
        if i == 5:
            labels["note"] = "<img src=x onerror=alert(1)>"
        ok(
            node.post(
                "/plugin/updateEndpoint",
                {"Tenant": "default", "Network": network, "EndpointID": ep, "Event": "start", "Labels": labels, "EPCommonName": f"k8s_{group}_{i}"},
            )
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=60)
    parser.add_argument("--datapath", action="store_true", help="run inside a new network namespace with node0 on managed OVS (root)")
    parser.add_argument("--inside-namespace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.datapath and not args.inside_namespace:
        return in_namespace(args.endpoints)
    with tempfile.TemporaryDirectory(prefix="contivd-shots-") as root:
        cluster = ContivdCluster(Path(root), 3)
        for i, node in enumerate(cluster.nodes):
            node.extra = ("--vtep-ip", f"127.0.0.{i + 1}")  # distinct loopback VTEPs, so the diagram has tunnels
        if args.inside_namespace:
            cluster.nodes[0].extra += ("--datapath", "ovs", "--ovs", "managed", "--agent-socket", "agent.sock")  # OpenFlow: its own OVS's run dir
        try:
            cluster.start(timeout=60)
            populate(cluster.nodes, args.endpoints)
            if args.inside_namespace:
                wait_for(lambda: agent_synced(cluster.nodes[0].url), 60, "node0's first reconcile")
            victim = next(n for n in cluster.followers() if n is not cluster.nodes[0])
            shoot(cluster.nodes[0].url, victim)
        finally:
            cluster.close()
            stop_managed_ovs(cluster.nodes[0].data_dir / "ovs")
    print("wrote", ", ".join(sorted(str(f.relative_to(HERE.parent.parent)) for f in HERE.glob("status-*.png"))))
    return 0


def agent_synced(url: str) -> bool:
    agent = httpx.get(url + "/status/api/node", timeout=5).json()["agent"]
    return bool(agent and agent["first_sync_done"] and agent["flows"])


def stop_managed_ovs(ovs_dir: Path) -> None:
    """The managed OVS outlives contivd on purpose (restarts keep pods' traffic); not here."""
    for daemon in ("ovs-vswitchd", "ovsdb-server"):
        pidfile = ovs_dir / f"{daemon}.pid"
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass


def in_namespace(endpoints: int) -> int:
    """Run this script again inside a network namespace of its own, then delete it."""
    namespace = f"cdshot-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"], check=True)
        command = [sys.executable, __file__, "--inside-namespace", "--endpoints", str(endpoints)]
        return subprocess.run(["ip", "netns", "exec", namespace, *command], check=False).returncode
    finally:
        subprocess.run(["ip", "netns", "del", namespace], check=False)


def shoot(url: str, victim: ContivdProcess) -> None:
    """Overview, policy and a filtered endpoint table; then the cluster card once `victim` is killed."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 900}, device_scale_factor=1)
            page.goto(url + "/")
            page.wait_for_selector("body[data-ready=true]", timeout=15000)
            page.wait_for_timeout(2500)  # let a cluster event bring fresh peer reports and reconcile times
            page.screenshot(path=str(HERE / "status-overview.png"), full_page=False)
            page.set_viewport_size({"width": 1360, "height": 2400})  # sections fit without scrolling under the sticky header
            page.locator("#policy-card").screenshot(path=str(HERE / "status-policy.png"))
            page.fill("#ep-search", "app-00")  # app-0005's label holds markup: shown as text
            page.wait_for_timeout(300)
            page.locator("#endpoints-card").screenshot(path=str(HERE / "status-endpoints.png"))
            victim.kill()
            page.wait_for_selector("g.node.down", timeout=20000)
            page.locator("#cluster-card").screenshot(path=str(HERE / "status-node-down.png"))
        finally:
            browser.close()


if __name__ == "__main__":
    sys.exit(main())

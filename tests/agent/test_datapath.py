"""The node agent on real Open vSwitch (userspace datapath): a contivd node in its own network
namespace runs its managed OVS; two pods (namespaces with veths) attached as endpoints
created through the API ping each other through the flows the agent programs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.datapath_nodes import OVS_NODE, PODS_NET, assert_full_mesh, create_endpoints, provision, started_node
from tests.support.nodes import Node, attach_pod, cluster_of_nodes, metric_value, reaches, settled, sh, wait_until
from tests.support.service_pods import first_answer, start_answering

pytestmark = OVS_NODE


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with started_node(tmp_path) as n:
        yield n


def test_two_pods_on_one_node_ping_through_the_agent_flows(node: Node) -> None:
    endpoints = provision(node, [PODS_NET], ("c1", "c2"))
    target = endpoints[1]["ipAddress"]
    wait_until(lambda: reaches(node.pods[0], target), 30, f"pod 1 to ping {target}", node)
    result = sh("ip", "netns", "exec", node.pods[0], "ping", "-c", "3", "-i", "0.2", "-W", "1", target, check=False)
    assert result.returncode == 0 and " 0% packet loss" in result.stdout, result.stdout


def test_policy_deny_blocks_and_removing_it_restores_traffic(node: Node) -> None:
    objects = [
        PODS_NET,
        ("/api/v1/policys/default:lock/", {"tenantName": "default", "policyName": "lock"}),
        ("/api/v1/rules/default:lock:1/", {"tenantName": "default", "policyName": "lock", "ruleId": "1", "direction": "in", "protocol": "icmp", "action": "deny", "priority": 10}),
        ("/api/v1/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "pods", "policies": ["lock"]}),
    ]  # fmt: skip
    endpoints = provision(node, objects, ("c1", "c2"), group="web")
    target = endpoints[1]["ipAddress"]
    mgmt = f"unix:{node.data / 'ovs' / 'contivVxlanBridge.mgmt'}"

    def flows() -> str:
        return sh("ip", "netns", "exec", node.ns, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", mgmt, check=False).stdout

    wait_until(lambda: "icmp" in flows() and f"nw_dst={target}" in flows(), 30, "the deny rule and the endpoints' flows", node)
    blocked = sh("ip", "netns", "exec", node.pods[0], "ping", "-c", "2", "-i", "0.2", "-W", "1", target, check=False)
    assert blocked.returncode != 0, "the deny rule drops ICMP into the group"

    def hits() -> dict[str, int]:
        status, stats = node.agent_call("GET", "/rulestats")
        assert status == 200, stats
        return {rule_id: counts["packets"] for rule_id, counts in stats.items() if counts["flows"]}

    wait_until(lambda: any(packets > 0 for packets in hits().values()), 30, "the deny rule's flows to count the dropped pings", node)
    status, summed = node.api_call("GET", "/policy/hits")
    assert status == 200 and summed["unanswered"] == [], summed
    assert summed["rules"]["default:lock:1"]["packets"] > 0, summed
    status, answer = node.api_call("DELETE", "/api/v1/rules/default:lock:1/")
    assert status == 200, answer
    wait_until(lambda: reaches(node.pods[0], target), 30, "traffic to pass once the rule is gone", node)


VLAN_NET = (
    "/api/v1/networks/default:vpods/",
    {"tenantName": "default", "networkName": "vpods", "encap": "vlan", "pktTag": 100, "subnet": "198.18.2.0/24", "gateway": "198.18.2.254"},
)


def test_pods_on_three_nodes_reach_each_other_over_vxlan_and_over_a_vlan_uplink(tmp_path: Path) -> None:
    """Each node runs both bridges: pod 0 on a VXLAN network (tunnels between VTEPs), pod 1 on a
    VLAN network whose frames leave tagged through `vl0`, one shared trunk (the fabric's `vl` bridge)."""
    with cluster_of_nodes(tmp_path, 3, "--vlan-uplinks", "vl0") as nodes:
        for path, body in (PODS_NET, VLAN_NET):
            status, answer = nodes[0].api_call("POST", path, body)
            assert status == 200, answer
        vxlan, vlan = create_endpoints(nodes, "pods"), create_endpoints(nodes, "vpods")
        for node, on_vxlan, on_vlan in zip(nodes, vxlan, vlan, strict=True):
            attach_pod(node, 0, on_vxlan)
            attach_pod(node, 1, on_vlan, bridge="contivVlanBridge")
        assert_full_mesh(nodes, 0, vxlan, "VXLAN")
        assert_full_mesh(nodes, 1, vlan, "the VLAN uplink")
        status, driver = nodes[0].agent_call("GET", "/inspect/driver")
        assert status == 200, driver
        assert driver["vxlan"]["connected"] and driver["vxlan"]["tunnels"] == 2, driver
        assert driver["vlan"]["connected"] and driver["vlan"]["uplinks"] == ["vl0"], driver
        # `ctl trace` asked of a third node: the source's OVS half from node 1, the destination's
        # from node 2, the packet arriving through the tunnel (VNI) or tagged on the uplink.
        for endpoints, bridge in ((vxlan, "contivVxlanBridge"), (vlan, "contivVlanBridge")):
            status, traced = nodes[2].api_call("GET", f"/kubernetes/trace/{endpoints[0]['ipAddress']}/{endpoints[1]['id']}/icmp")
            assert status == 200 and traced["verdict"] == "allow" and traced["agree"] is True, traced
            source, destination = traced["ovs"], traced["ovs_destination"]
            assert (source["node"], source["bridge"], source["verdict"]) == (nodes[0].name, bridge, "allow"), source
            assert (destination["node"], destination["bridge"], destination["verdict"]) == (nodes[1].name, bridge, "allow"), destination
            assert ("tun_id=" if bridge == "contivVxlanBridge" else "dl_vlan=100") in destination["flow"], destination
        # Between two networks (VXLAN pod on node 1 to VLAN pod on node 2, through the gateway):
        # bridge mode routes nothing, so the packet dies in node 1's forward table, as traced.
        sh("ip", "netns", "exec", nodes[0].pods[0], "ip", "route", "add", "default", "via", "198.18.0.254")
        assert not reaches(nodes[0].pods[0], vlan[1]["ipAddress"]), "bridge mode routes between networks"
        status, traced = nodes[2].api_call("GET", f"/kubernetes/trace/{vxlan[0]['ipAddress']}/{vlan[1]['ipAddress']}/icmp")
        assert status == 200 and traced["verdict"] == "drop" and traced["agree"] is True and traced["deciding"] is None, traced
        assert traced["reasons"][-1].startswith("forward: drop: ") and "in bridge mode nothing routes between networks" in traced["reasons"][-1]
        assert (traced["ovs"]["node"], traced["ovs"]["verdict"]) == (nodes[0].name, "drop") and traced["ovs_destination"] is not None, traced
        # The agent API answered the netmaster's signed calls above (the trace halves of another
        # node); another host calling it itself is refused, without a token and with the admin one.
        first, second = nodes[0], nodes[1]
        trace_half = f"/trace/source/{vxlan[0]['ipAddress']}/{vxlan[1]['ipAddress']}/1/0"
        path = f"/debug/reclaimEndpoint/{vxlan[0]['id']}"
        for token in ("", second.token):
            for method, asked in (("GET", trace_half), ("DELETE", path), ("GET", "/inspect/driver")):
                status, refused = second.api_call(method, asked, port=first.agent, host=first.host, token=token)
                assert status == 401 and "signed calls only" in refused["error"], (method, asked, bool(token), refused)
        assert reaches(second.pods[0], vxlan[0]["ipAddress"]), "the refused reclaim changed nothing"
        # A node that leaves (its registration lease expires) loses its tunnels on the others.
        nodes[2].stop()
        status, hits = first.api_call("GET", "/policy/hits")
        assert status == 200 and hits["unanswered"] == [nodes[2].name], hits  # its counters are missing from the sums: named

        def tunnels() -> int:
            return int(first.agent_call("GET", "/inspect/driver")[1]["vxlan"]["tunnels"])

        wait_until(lambda: tunnels() == 1, 45, "the departed node's tunnel to be removed", first)
        assert reaches(first.pods[0], vxlan[1]["ipAddress"]), "the remaining nodes still reach each other"
        status, traced = first.api_call("GET", f"/kubernetes/trace/{vxlan[2]['ipAddress']}/{vxlan[0]['ipAddress']}/icmp")
        assert status == 200 and nodes[2].name in traced["ovs"].get("unanswered", ""), traced  # the departed node is named, not an error


def test_restarting_contivd_keeps_traffic_flowing(node: Node) -> None:
    endpoints = provision(node, [PODS_NET], ("c1", "c2"))
    target = endpoints[1]["ipAddress"]
    wait_until(lambda: reaches(node.pods[0], target), 30, f"pod 1 to ping {target}", node)
    count = 150  # 0.05 s apart: 7.5 s, across the restart
    pinger = subprocess.Popen(
        ["ip", "netns", "exec", node.pods[0], "ping", "-c", str(count), "-i", "0.05", "-W", "1", target], stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1)  # let traffic flow before the restart: the property under test is continuity
        assert node.proc is not None
        node.proc.send_signal(signal.SIGTERM)
        assert node.proc.wait(timeout=20) == 0
        node.log.close()
        node.start()
        wait_until(lambda: node.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 40, "the restarted node's API", node)
        output, _ = pinger.communicate(timeout=30)
    finally:
        if pinger.poll() is None:
            pinger.kill()
    received = int(re.search(r"(\d+) received", output).group(1))  # type: ignore[union-attr]
    assert received >= count - 1, f"lost {count - received} packets across the restart:\n{output[-500:]}"
    # the switch reconnects on its own schedule (vswitchd retries its controller every few seconds)
    wait_until(lambda: "reconciling under round 2" in node.log_text(), 30, "the restarted agent to replace the flows under a new round", node)


SERVE = (
    "import socket,sys,threading\n"
    "def serve(port):\n"
    "    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', port)); s.listen()\n"
    "    while True: s.accept()[0].close()\n"
    "for p in sys.argv[1:]: threading.Thread(target=serve, args=(int(p),), daemon=True).start()\n"
    "print('ready', flush=True); threading.Event().wait()\n"
)
CONNECT = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()"


def test_tcp_allow_rule_opens_one_port_while_a_deny_keeps_another_closed(node: Node) -> None:
    objects = [
        PODS_NET,
        ("/api/v1/policys/default:web/", {"tenantName": "default", "policyName": "web"}),
        ("/api/v1/rules/default:web:deny-tcp/", {"tenantName": "default", "policyName": "web", "ruleId": "deny-tcp", "direction": "in", "protocol": "tcp", "action": "deny", "priority": 1}),
        ("/api/v1/rules/default:web:allow-8080/", {"tenantName": "default", "policyName": "web", "ruleId": "allow-8080", "direction": "in", "protocol": "tcp", "port": 8080, "action": "allow", "priority": 10}),
        ("/api/v1/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "pods", "policies": ["web"]}),
    ]  # fmt: skip
    endpoints = provision(node, objects, ("c1", "c2"), group="web")
    target = endpoints[1]["ipAddress"]
    server = subprocess.Popen(["ip", "netns", "exec", node.pods[1], sys.executable, "-c", SERVE, "8080", "9090"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"

        def connects(port: int) -> bool:
            return sh("ip", "netns", "exec", node.pods[0], sys.executable, "-c", CONNECT, target, str(port), check=False).returncode == 0

        wait_until(lambda: connects(8080), 30, "TCP 8080 to be allowed", node)
        assert not connects(9090), "TCP 9090 stays denied"
        assert reaches(node.pods[0], target), "ICMP is not affected by TCP rules"

        # Counters: only the rule that matched moves (summed per model rule over the nodes).
        def hits() -> dict[str, int]:
            status, answer = node.api_call("GET", "/policy/hits/default:web")
            assert status == 200 and answer["unanswered"] == [], answer
            return {rule: counts["packets"] for rule, counts in answer["rules"].items()}

        before = settled(hits, "the rule counters", node)
        assert set(before) == {"default:web:allow-8080", "default:web:deny-tcp"}, before
        assert all(connects(8080) for _ in range(3))
        opened = settled(hits, "the rule counters", node)
        assert (
            opened["default:web:allow-8080"] > before["default:web:allow-8080"] and opened["default:web:deny-tcp"] == before["default:web:deny-tcp"]
        )
        assert not connects(9090)
        refused = settled(hits, "the rule counters", node)
        assert (
            refused["default:web:deny-tcp"] > opened["default:web:deny-tcp"] and refused["default:web:allow-8080"] == opened["default:web:allow-8080"]
        )
        assert reaches(node.pods[0], target)
        assert settled(hits, "the rule counters", node) == refused, "no rule matches ICMP: no counter moves"
        ctl = ("ip", "netns", "exec", node.ns, sys.executable, "-m", "contivd", "ctl", "--server", node.url(), "policy", "rule-ls", "web")
        listing = sh(*ctl, "--hits").stdout
        shown = {line.split()[0]: int(line.split()[-2]) for line in listing.splitlines() if line.split()[:1] in (["allow-8080"], ["deny-tcp"])}
        assert shown == {"allow-8080": refused["default:web:allow-8080"], "deny-tcp": refused["default:web:deny-tcp"]}, listing
        assert "Packets" not in sh(*ctl).stdout, "without --hits: netctl's table"
        wait_until(
            lambda: (
                metric_value(node, "contivd_policy_rule_packets_total", {"kind": "contiv", "tenant": "default", "policy": "web", "rule": "deny-tcp"})
                > 0
            ),
            60,
            "the deny rule's counter in /metrics",
            node,
        )
    finally:
        server.kill()
        server.wait()


def test_service_vip_spreads_connections_over_two_providers(node: Node) -> None:
    node.pods.append(node.pods[0] + "x")  # a third pod: the client
    objects = [
        PODS_NET,
        ("/api/v1/networks/default:svc/", {"tenantName": "default", "networkName": "svc", "encap": "vxlan", "subnet": "198.18.1.0/24", "gateway": "198.18.1.254"}),
        ("/api/v1/serviceLBs/default:web/", {"tenantName": "default", "serviceName": "web", "networkName": "svc", "selectors": ["app=web"], "ports": ["80:8080:TCP"]}),
    ]  # fmt: skip
    endpoints = provision(node, objects, ("p1", "p2", "client"), attach=False)
    for name in ("p1", "p2"):
        update = {"Tenant": "default", "Network": "pods", "EndpointID": name, "Event": "start", "Labels": {"app": "web"}}
        assert node.api_call("POST", "/plugin/updateEndpoint", update)[0] == 200
    for index, endpoint in enumerate(endpoints):
        attach_pod(node, index, endpoint)
    vip = node.api_call("GET", "/api/v1/inspect/serviceLBs/default:web/")[1]["Oper"]["serviceVip"]
    # The VIP lives on the service network: the client reaches it through its default route
    # (the bridge answers ARP for the pods network's gateway), as a CNI-attached pod does.
    sh("ip", "netns", "exec", node.pods[2], "ip", "route", "add", "default", "via", "198.18.0.254")
    servers: list[subprocess.Popen[str]] = []
    try:
        servers += (start_answering(node.pods[i], 8080, name) for i, name in enumerate(("p1", "p2")))
        wait_until(lambda: first_answer(node.pods[2], vip, 80), 30, f"the VIP {vip}:80 to answer", node)
        answers = {first_answer(node.pods[2], vip, 80) for _ in range(20)}
        assert answers == {"p1", "p2"}, f"connections to the VIP reached {answers}"
        status, stats = node.agent_call("GET", "/svcstats")
        assert status == 200 and stats["web:default"]["packets"] >= 10, stats  # one SYN per new connection
        # `ctl trace` to the VIP: the serviceLB's two providers, each judged and traced (allowed),
        # the client's OVS handing the packet to the service's select group
        client, providers = endpoints[2]["ipAddress"], sorted(f"{e['ipAddress']}:8080" for e in endpoints[:2])
        status, traced = node.api_call("GET", f"/kubernetes/trace/{client}/{vip}/tcp/80")
        assert status == 200 and traced["verdict"] == "allow" and traced["agree"] is True, traced
        assert traced["service"]["id"] == "web:default" and traced["ovs"]["verdict"] == "load-balanced", traced
        assert sorted(b["backend"] for b in traced["service"]["backends"]) == providers, traced
        assert all(b["ovs"]["verdict"] == "allow" for b in traced["service"]["backends"]), traced
    finally:
        for server in servers:
            server.kill()
            server.wait()


def test_netprofile_bandwidth_polices_the_group_ports(node: Node) -> None:
    objects = [
        PODS_NET,
        ("/api/v1/netprofiles/default:slow/", {"tenantName": "default", "profileName": "slow", "bandwidth": "10Mbps", "burst": 3000}),
        ("/api/v1/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "pods", "netProfile": "slow"}),
    ]  # fmt: skip
    provision(node, objects, ("c1",), group="web")

    def policing() -> tuple[str, str]:
        db = f"--db=unix:{node.data / 'ovs' / 'db.sock'}"
        get = lambda column: sh("ip", "netns", "exec", node.ns, "ovs-vsctl", db, "get", "interface", "vh0", column).stdout.strip()  # noqa: E731
        return get("ingress_policing_rate"), get("ingress_policing_burst")

    wait_until(lambda: policing() == ("10000", "3000"), 30, "the netprofile's rate and burst on the pod's port", node)


RECEIVE_TOS = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); s.settimeout(10)\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    data, (source, _) = s.recvfrom(2048)\n"
    "    if source == sys.argv[1] and data[20] == 8: print(data[1] >> 2, flush=True); break\n"
)


def test_netprofile_dscp_is_set_on_the_wire(node: Node) -> None:
    """An echo request from a pod in a group whose netprofile says DSCP 46 arrives with DSCP 46."""
    objects = [
        PODS_NET,
        ("/api/v1/netprofiles/default:voice/", {"tenantName": "default", "profileName": "voice", "DSCP": 46}),
        ("/api/v1/endpointGroups/default:voice/", {"tenantName": "default", "groupName": "voice", "networkName": "pods", "netProfile": "voice"}),
    ]  # fmt: skip
    sender, receiver = provision(node, objects, ("c1", "c2"), group="voice")
    wait_until(lambda: reaches(node.pods[0], receiver["ipAddress"]), 30, "the pods to reach each other", node)
    listener = subprocess.Popen(
        ["ip", "netns", "exec", node.pods[1], sys.executable, "-c", RECEIVE_TOS, sender["ipAddress"]], stdout=subprocess.PIPE, text=True
    )
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        assert reaches(node.pods[0], receiver["ipAddress"])
        dscp = listener.stdout.readline().strip()
        assert dscp == "46", f"the echo request arrived with DSCP {dscp!r}"
    finally:
        listener.kill()
        listener.wait()


def test_agent_api_reports_the_bridge_and_reclaims_an_endpoint_port(node: Node) -> None:
    (endpoint,) = provision(node, [PODS_NET], ("c1",))
    agent = node.agent

    def driver() -> dict[str, Any]:
        status, answer = node.agent_call("GET", "/inspect/driver")
        assert status == 200, answer
        return answer

    wait_until(lambda: driver()["vxlan"]["ports"] == 1, 30, "the agent to program the pod's port", node)
    state = driver()
    assert state["vxlan"]["connected"] and state["vxlan"]["flows"] > 0 and "vlan" not in state, state
    assert node.agent_call("GET", "/inspect/bgp") == (200, {"Peers": [], "Dsts": []})
    assert node.agent_call("GET", "/svcstats") == (200, {})
    status, info = node.api_call("GET", "/info")
    assert status == 200 and info["agent"]["switch_connected"] and info["agent"]["first_sync_done"], info
    assert info["nodes"][0]["agent_url"].endswith(f":{agent}"), info["nodes"]
    # The netmaster's epcleanup deletes the endpoint and has its node's agent drop the port.
    status, answer = node.api_call("DELETE", "/debug/epcleanup/tenant/default/ep/c1")
    assert status == 200 and "c1" in answer, answer

    def ports() -> str:
        db = f"--db=unix:{node.data / 'ovs' / 'db.sock'}"
        return sh("ip", "netns", "exec", node.ns, "ovs-vsctl", db, "list-ports", "contivVxlanBridge").stdout

    wait_until(lambda: "vh0" not in ports(), 30, "the reclaimed port to leave the bridge", node)
    assert node.api_call("GET", f"/api/v1/inspect/endpoints/{endpoint['id']}/")[0] == 404
    status, answer = node.agent_call("DELETE", "/debug/reclaimEndpoint/nosuch.default-x")
    assert (status, answer) == (200, None), "reclaiming an unknown endpoint is not an error (Contiv's body: null)"
    assert node.agent_call("GET", "/nosuch")[0] == 404


def test_killed_ovs_daemons_come_back_and_the_agent_reprograms_them(node: Node) -> None:
    """SIGKILL ovs-vswitchd, then ovsdb-server: contivd's supervisor restarts them, the agent
    reconnects (OVSDB and OpenFlow), pushes every flow again, and contivd itself keeps running."""
    endpoints = provision(node, [PODS_NET], ("c1", "c2"))
    target = endpoints[1]["ipAddress"]
    wait_until(lambda: reaches(node.pods[0], target), 30, f"pod 1 to ping {target}", node)
    for daemon in ("ovs-vswitchd", "ovsdb-server"):
        pid = int((node.data / "ovs" / f"{daemon}.pid").read_text().strip())
        os.kill(pid, signal.SIGKILL)

        def restarted(d: str = daemon, old: int = pid) -> bool:
            pidfile = node.data / "ovs" / f"{d}.pid"
            return pidfile.exists() and pidfile.read_text().strip() not in ("", str(old))

        wait_until(restarted, 30, f"{daemon} to be restarted", node)
        wait_until(lambda: reaches(node.pods[0], target), 40, f"traffic after {daemon} was killed", node)
        assert node.proc is not None and node.proc.poll() is None, "contivd kept running"
    status, driver = node.agent_call("GET", "/inspect/driver")
    assert status == 200 and driver["vxlan"]["connected"] and driver["vxlan"]["fullPushes"] >= 2, driver

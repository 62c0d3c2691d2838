"""`contivd import-contiv` against Debian's etcd (v2 API) loaded with a Contiv tree, into a real node."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.contiv_tree import ContivTreeBuilder
from tests.support.contivd_nodes import ContivdCluster, ContivdProcess, running_cluster
from tests.support.etcd import ETCD, Etcd
from tests.support.waiting import free_ports

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.skipif(not os.path.exists(ETCD), reason="Debian's etcd-server is not installed (packaging/deps.sh installs it)"),
]


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[Etcd]:
    server = Etcd(tmp_path)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[ContivdCluster]:
    with running_cluster(tmp_path / "contivd", 1) as cluster:
        yield cluster


def contiv_installation() -> dict[str, str]:
    """Three tenants; an exhausted vxlan network, a dual-stack vlan network, groups with policies,
    rules, a netprofile, an EPG pool, a service with providers, non-default global, Bgp."""
    t = ContivTreeBuilder()
    t.glob("100-400", "5000-9000", "198.19.0.0/16")
    for name in ("default", "blue", "red"):
        t.tenant(name)
    t.network("default", "full", "vxlan", "198.18.5.0/29", "198.18.5.6", pkt_tag=2, ext_tag=5001)
    for i in range(1, 6):
        t.endpoint("default", "full", f"f{i}", f"198.18.5.{i}")
    t.network("blue", "web", "vlan", "198.18.10.0/24", "198.18.10.254", pkt_tag=101, ext_tag=0, v6=("2001:db8:10::/64", "2001:db8:10::fe"))
    t.network("red", "db", "vxlan", "198.18.20.0/24", "198.18.20.254", pkt_tag=1, ext_tag=7000, cfg_tag=7000)
    t.obj("netprofile", "blue:gold", {"tenantName": "blue", "profileName": "gold", "DSCP": 10, "bandwidth": "10mbps", "burst": 100})
    t.obj("policy", "blue:allow-web", {"tenantName": "blue", "policyName": "allow-web"})
    t.obj("policy", "red:quiet", {"tenantName": "red", "policyName": "quiet"})
    t.group("blue", "frontend", "web", 7, ["allow-web"], profile="gold", dscp=10)
    t.group("blue", "backend", "web", 3, pool="198.18.10.100-198.18.10.110")
    t.group("red", "store", "db", 12, ["quiet"])
    rule = {"tenantName": "blue", "policyName": "allow-web", "direction": "in", "action": "allow", "protocol": "tcp", "port": 80, "priority": 5}
    t.obj("rule", "blue:allow-web:1", {**rule, "ruleId": "1", "fromEndpointGroup": "backend"})
    t.obj(
        "rule",
        "blue:allow-web:2",
        {"tenantName": "blue", "policyName": "allow-web", "ruleId": "2", "direction": "in", "action": "deny", "priority": 1},
    )
    t.obj(
        "rule",
        "red:quiet:1",
        {"tenantName": "red", "policyName": "quiet", "ruleId": "1", "direction": "out", "action": "deny", "toNetwork": "db", "priority": 2},
    )
    t.endpoint("blue", "web", "w1", "198.18.10.1", "frontend", "2001:db8:10::1", {"app": "web"})
    t.endpoint("blue", "web", "w2", "198.18.10.7", "frontend", "2001:db8:10::2", {"app": "web"})
    t.endpoint("blue", "web", "b1", "198.18.10.104", "backend", "2001:db8:10::3")
    t.endpoint("red", "db", "s1", "198.18.20.9", "store")
    t.service("blue", "websvc", "web", "198.18.10.200", {"app": "web"}, ["80:8080:TCP"], [("w1", "198.18.10.1"), ("w2", "198.18.10.7")])
    t.obj("Bgp", "host1", {"hostname": "host1", "routerip": "198.18.99.1/24", "as": "65001", "neighbor-as": "65002", "neighbor": "198.18.99.2"})
    t.put("/contiv.io/state/auto-vlan/global", {"id": "global", "vlans": ""})  # keys the import has no use for
    return t.finish()


def run_import(server: ContivdProcess, etcd_url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`contivd import-contiv` as root on the node: over its API socket, admin without a token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}
    args = [sys.executable, "-m", "contivd", "import-contiv", "--etcd", etcd_url, "--server", f"unix:{server.socket}", *flags]
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)


def ctl(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "contivd", "ctl", "--server", url, *args], capture_output=True, text=True, timeout=60)


def test_import_keeps_every_object_address_and_id(etcd: Etcd, node: ContivdCluster) -> None:
    etcd.load(contiv_installation())
    before = etcd.dump()
    server = node.leader()

    dry = run_import(server, etcd.url, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing written" in dry.stdout and "network default:full: vxlan 5001 (local vlan 2), 5 endpoints" in dry.stdout
    assert server.get("/api/v1/networks/").json() == []  # nothing written

    done = run_import(server, etcd.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: 18 objects and 9 endpoints match" in done.stdout

    full = server.get("/api/v1/inspect/networks/default:full/").json()["Oper"]
    assert (full["pktTag"], full["externalPktTag"], full["numEndpoints"]) == (2, 5001, 5)
    web = server.get("/api/v1/inspect/networks/blue:web/").json()["Oper"]
    assert web["pktTag"] == 101
    w1 = next(ep for ep in web["endpoints"] if ep["endpointID"] == "w1")
    assert (w1["ipAddress"], w1["macAddress"], w1["endpointGroupId"]) == (["198.18.10.1", "2001:db8:10::1"], "02:02:c6:12:0a:01", 7)
    store = server.get("/api/v1/inspect/endpointGroups/red:store/").json()["Oper"]
    assert store["endpoints"][0]["endpointGroupId"] == 12 and store["externalPktTag"] == 7000
    assert server.get("/api/v1/inspect/serviceLBs/blue:websvc/").json()["Oper"]["serviceVip"] == "198.18.10.200"
    assert server.get("/api/v1/globals/global/").json()["vlans"] == "100-400"
    assert server.get("/api/v1/Bgps/host1/").json()["neighbor-as"] == "65002"
    listed = ctl(server.url, "net", "ls", "-t", "blue")
    assert listed.returncode == 0 and "198.18.10.0/24" in listed.stdout, listed.stdout + listed.stderr

    # The exhausted network stays exhausted; elsewhere imported addresses are not handed out again.
    refused = server.post("/plugin/createEndpoint", {"TenantName": "default", "NetworkName": "full", "EndpointID": "f6"})
    assert refused.status_code in (409, 500) and "exhaustion" in refused.text
    fresh = server.post("/plugin/createEndpoint", {"TenantName": "blue", "NetworkName": "web", "ServiceName": "frontend", "EndpointID": "w3"})
    assert fresh.status_code == 200, fresh.text
    config = fresh.json()["EndpointConfig"]
    assert config["ipAddress"] == "198.18.10.2" and config["endpointGroupId"] == 7
    assert config["ipv6Address"] not in ("2001:db8:10::1", "2001:db8:10::2", "2001:db8:10::3", "2001:db8:10::fe")
    pooled = server.post("/plugin/createEndpoint", {"TenantName": "blue", "NetworkName": "web", "ServiceName": "backend", "EndpointID": "b2"})
    assert pooled.json()["EndpointConfig"]["ipAddress"] == "198.18.10.100"

    again = run_import(server, etcd.url)
    assert again.returncode != 0 and "not empty" in again.stderr and "--force" in again.stderr
    assert server.get("/api/v1/inspect/networks/blue:web/").json()["Oper"]["numEndpoints"] == 5  # refused: nothing changed

    forced = run_import(server, etcd.url, "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert server.get("/api/v1/inspect/networks/blue:web/").json()["Oper"]["numEndpoints"] == 3  # back to Contiv's state

    assert etcd.dump() == before  # the source was only read


def test_clear_errors(tmp_path: Path, etcd: Etcd, node: ContivdCluster) -> None:
    server = node.leader()
    (port,) = free_ports(1)
    unreachable = run_import(server, f"http://127.0.0.1:{port}")
    assert unreachable.returncode != 0 and "cannot reach etcd" in unreachable.stderr

    empty = run_import(server, etcd.url)
    assert empty.returncode != 0 and "not a Contiv installation" in empty.stderr

    etcd.load({"/contiv.io/obj/modeldb/tenant/bad_name": '{"key": "bad_name", "tenantName": "bad_name"}'})
    invalid = run_import(server, etcd.url)
    assert invalid.returncode != 0 and "tenant bad_name: contivd refuses it" in invalid.stderr, invalid.stderr
    assert server.get("/api/v1/tenants/").json() == [server.get("/api/v1/tenants/default/").json()]

    (tmp_path / "v3").mkdir()
    v3_only = Etcd(tmp_path / "v3", enable_v2=False)
    try:
        disabled = run_import(server, v3_only.url)
        assert disabled.returncode != 0 and "does not serve the v2 keys API" in disabled.stderr and "--enable-v2" in disabled.stderr
    finally:
        v3_only.close()

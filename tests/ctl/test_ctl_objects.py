"""Every object command group against a real contivd: create, ls (table, --json, -q),
inspect, rm, and one invalid input per group that must print the server's message."""

from __future__ import annotations

import json
import re

from tests.support.contivd_nodes import ContivdProcess
from tests.support.ctl_runner import Ctl


def rows(text: str) -> list[list[str]]:
    """Table body rows split on runs of 2+ spaces (header and dashes dropped)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()[2:] if line.strip()]


def test_tenant_lifecycle(ctl: Ctl) -> None:
    assert ctl("tenant", "create", "acme").stdout == "Creating tenant: acme\n"
    ctl.fails("tenant", "create", "acme", message="Cant change tenant parameters after its created: tenant acme already exists")
    assert ["acme"] in rows(ctl("tenant", "ls").stdout)
    assert "acme" in ctl("tenant", "ls", "-q").stdout.splitlines()
    assert {"key": "acme", "tenantName": "acme"}.items() <= next(
        t for t in json.loads(ctl("tenant", "ls", "--json").stdout) if t["key"] == "acme"
    ).items()
    assert json.loads(ctl("tenant", "inspect", "acme").stdout)["Config"]["tenantName"] == "acme"
    assert ctl("tenant", "delete", "acme").stdout == "Deleting tenant acme\n"
    assert "acme" not in ctl("tenant", "ls", "-q").stdout.splitlines()
    ctl.fails("tenant", "create", "bad_name", message="tenantName string invalid format")
    ctl.fails("tenant", "rm", "acme", message="tenant not found")


def test_network_lifecycle(ctl: Ctl) -> None:
    ctl("tenant", "create", "blue")
    out = ctl(
        "net",
        "create",
        "-t",
        "blue",
        "-s",
        "198.18.20.0/24",
        "-g",
        "198.18.20.254",
        "-e",
        "vlan",
        "-p",
        "120",
        "--tag",
        "web-net",
        "web",
    )
    assert out.stdout == "Creating network blue:web\n"
    table = ctl("network", "ls", "-t", "blue").stdout
    assert table.startswith("Tenant  Network  Nw Type  Encap type  Packet tag  Subnet          Gateway")
    assert rows(table) == [["blue", "web", "data", "vlan", "120", "198.18.20.0/24", "198.18.20.254", "web-net"]]
    assert ctl("network", "list", "-t", "blue", "-q").stdout == "web\n"
    assert [n["key"] for n in json.loads(ctl("network", "ls", "-t", "blue", "-j").stdout)] == ["blue:web"]
    assert "blue" not in ctl("network", "ls").stdout, "ls shows the default tenant only"
    assert "blue:web" in [n["key"] for n in json.loads(ctl("network", "ls", "-a", "--json").stdout)]
    oper = json.loads(ctl("net", "inspect", "-t", "blue", "web").stdout)["Oper"]
    assert oper["pktTag"] == 120 and oper["allocatedIPAddresses"] == "198.18.20.254"
    ctl.fails("net", "create", "-t", "blue", "-s", "198.18.20.0/25", "web2", message="conflicts with subnet 198.18.20.0/24")
    ctl.fails("net", "ls", "-t", "nope", message="tenant not found")
    ctl.refuses("net", "create", "web3", message="Subnet is required", shows_help=True)  # a usage error, not a request
    assert ctl("net", "rm", "-t", "blue", "web").stdout == "Deleting network blue:web\n"
    assert ctl("net", "ls", "-t", "blue", "-q").stdout == ""
    ctl("tenant", "rm", "blue")


def test_group_lifecycle(ctl: Ctl) -> None:
    ctl("net", "create", "-s", "198.18.21.0/24", "gnet")
    ctl("policy", "create", "gpol")
    ctl("netprofile", "create", "gprof", "-b", "1gbps")
    out = ctl("group", "create", "gnet", "front", "-p", "gpol", "-n", "gprof", "-r", "198.18.21.10-198.18.21.20", "--tag", "fe")
    assert out.stdout == "Creating EndpointGroup default:front\n"
    assert ["default", "front", "gnet", "198.18.21.10-198.18.21.20", "fe", "gpol", "gprof"] in rows(ctl("group", "ls").stdout)
    assert "front" in ctl("group", "ls", "-q").stdout.splitlines()
    group = next(g for g in json.loads(ctl("group", "ls", "--json").stdout) if g["groupName"] == "front")
    assert group["policies"] == ["gpol"] and group["netProfile"] == "gprof"
    assert json.loads(ctl("group", "inspect", "front").stdout)["Oper"]["availableIPAddresses"] == "198.18.21.10-198.18.21.20"
    ctl.fails("group", "create", "nosuchnet", "back", message="Network nosuchnet not found")
    ctl.fails("policy", "rm", "gpol", message="Policy is being used")
    assert ctl("group", "rm", "front").stdout == ""  # netctl prints nothing here
    for args in (("policy", "rm", "gpol"), ("netprofile", "rm", "gprof"), ("net", "rm", "gnet")):
        ctl(*args)


def test_policy_and_rules(ctl: Ctl) -> None:
    ctl("net", "create", "-s", "198.18.22.0/24", "pnet")
    ctl("group", "create", "pnet", "app")
    assert ctl("policy", "create", "web").stdout == "Creating policy default:web\n"
    assert ["default", "web"] in rows(ctl("policy", "ls").stdout)
    assert "web" in ctl("policy", "ls", "-q").stdout.splitlines()
    assert "default:web" in [p["key"] for p in json.loads(ctl("policy", "ls", "--json").stdout)]
    add = ctl("policy", "rule-add", "web", "1", "-p", "10", "-g", "app", "-l", "tcp", "-P", "80")
    assert add.stdout == ""  # netctl prints nothing for rules
    ctl("policy", "rule-add", "web", "2", "--priority", "5", "--from-ip-address", "198.18.0.0/15", "--action", "deny")
    ctl("policy", "rule-add", "web", "3", "--direction", "out", "--to-network", "pnet", "--protocol", "udp", "--port", "53")
    listing = ctl("policy", "rule-ls", "web").stdout
    incoming, outgoing = listing.split("\nOutgoing Rules:\n")
    assert incoming.startswith("Incoming Rules:\nRule  Priority  From EndpointGroup")
    assert rows(incoming.split("\n", 1)[1]) == [["2", "5", "198.18.0.0/15", "0", "deny"], ["1", "10", "app", "tcp", "80", "allow"]]
    assert rows(outgoing) == [["3", "1", "pnet", "198.18.22.0/24", "udp", "53", "allow"]], "Contiv stores the network's subnet in toIpAddress"
    assert sorted(ctl("policy", "rule-ls", "web", "-q").stdout.split()) == ["1", "2", "3"]
    assert {r["key"] for r in json.loads(ctl("policy", "rule-ls", "web", "--json").stdout)} == {
        "default:web:1",
        "default:web:2",
        "default:web:3",
    }
    ctl.refuses("policy", "rule-add", "web", "4", "-e", "app", message="Cant specify to-group for incoming rule")
    ctl.fails("policy", "rule-ls", "nosuch", message="policy not found")
    counted = ctl("policy", "rule-ls", "web", "--hits")  # this node runs no datapath: every counter is 0
    assert rows(counted.stdout.split("\n", 1)[1].split("\nOutgoing Rules:\n")[0])[0] == ["2", "5", "198.18.0.0/15", "0", "deny", "0", "0"]
    assert {(r["ruleId"], r["packets"], r["bytes"]) for r in json.loads(ctl("policy", "rule-ls", "web", "-H", "-j").stdout)} == {
        ("1", 0, 0), ("2", 0, 0), ("3", 0, 0),
    }  # fmt: skip
    ctl.fails("policy", "rule-ls", "nosuch", "--hits", message="policy not found")
    assert ctl("policy", "hits").stdout == "No rule counters (no policy rules on the nodes that answered).\n"
    assert json.loads(ctl("policy", "hits", "web", "--json").stdout)["rules"] == {}
    ctl.fails("policy", "hits", "nosuch", message="policy default:nosuch not found")
    ctl.fails("policy", "hits", "-t", "nosuch", message="tenant 'nosuch' not found")
    assert ctl("policy", "rule-rm", "web", "2").stdout == ""
    assert sorted(ctl("policy", "rule-ls", "web", "-q").stdout.split()) == ["1", "3"]
    assert "Rules" in json.loads(ctl("policy", "inspect", "web").stdout)["Config"]["link-sets"]
    assert ctl("policy", "rm", "web").stdout == "Deleting policy default:web\n"
    ctl.fails("policy", "inspect", "web", message="policy not found")
    ctl("group", "rm", "app")
    ctl("net", "rm", "pnet")


def test_netprofile_lifecycle(ctl: Ctl) -> None:
    assert ctl("netprofile", "create", "gold", "-b", "10 gb", "-d", "10", "-s", "100").stdout == "Creating netprofile default:gold\n"
    assert ["gold", "default", "10Gbps", "10", "100"] in rows(ctl("netprofile", "ls").stdout)
    assert "gold" in ctl("netprofile", "ls", "-q").stdout.splitlines()
    profile = next(p for p in json.loads(ctl("netprofile", "ls", "--json").stdout) if p["profileName"] == "gold")
    assert profile["bandwidth"] == "10 gb" and profile["DSCP"] == 10
    assert json.loads(ctl("netprofile", "inspect", "gold").stdout)["Config"]["burst"] == 100
    ctl.fails("netprofile", "create", "tin", "-b", "10 ms", message="bandwidth string invalid format")
    ctl("netprofile", "rm", "gold")


def test_service_lifecycle(ctl: Ctl) -> None:
    ctl("net", "create", "-s", "198.18.23.0/24", "snet")
    out = ctl(
        "service",
        "create",
        "dns",
        "--network",
        "snet",
        "--selector",
        "app=dns",
        "-l",
        "tier=core",
        "--port",
        "53:5353:UDP",
        "--ip",
        "198.18.23.53",
    )
    assert out.stdout == "Creating ServiceLB default:dns\n"
    assert ["dns", "default", "snet", "[app=dns tier=core]"] in rows(ctl("service", "ls").stdout)
    assert "dns" in ctl("service", "ls", "-q").stdout.splitlines()
    service = next(s for s in json.loads(ctl("service", "ls", "--json").stdout) if s["serviceName"] == "dns")
    assert service["ports"] == ["53:5353:UDP"] and service["ipAddress"] == "198.18.23.53"
    assert json.loads(ctl("service", "inspect", "dns").stdout)["Config"]["networkName"] == "snet"
    ctl.fails("service", "create", "web", "-s", "snet", "-l", "app=web", "-p", "80:x", message="Invalid Port maping")
    assert ctl("service", "rm", "dns").stdout == "Deleting Service  dns,default\n"
    ctl("net", "rm", "snet")


def test_bgp_lifecycle(ctl: Ctl) -> None:
    out = ctl(
        "bgp",
        "create",
        "host1",
        "--router-ip",
        "198.19.9.1/24",
        "--as",
        "65000",
        "--neighbor-as",
        "65001",
        "--neighbor",
        "198.19.9.2",
    )
    assert out.stdout == ""  # netctl prints nothing
    assert rows(ctl("bgp", "ls").stdout) == [["host1", "198.19.9.1/24", "65000", "198.19.9.2", "65001"]]
    assert ctl("bgp", "ls", "-q").stdout == "host1\n"
    assert json.loads(ctl("bgp", "ls", "--json").stdout)[0]["neighbor-as"] == "65001"
    assert json.loads(ctl("bgp", "inspect", "host1").stdout)["Config"]["routerip"] == "198.19.9.1/24"
    ctl.refuses("bgp", "create", "host2", "--router-ip", "198.19.9.1", message="Wrong CIDR format. Enter in x.x.x.x/len format", shows_help=True)
    assert ctl("bgp", "rm", "host1").stdout == "Deleting Bgp router config: host1\n"
    assert ctl("bgp", "ls", "-q").stdout == ""


def test_app_profile_lifecycle(ctl: Ctl) -> None:
    ctl("net", "create", "-s", "198.18.24.0/24", "anet")
    for group in ("ui", "api"):
        ctl("group", "create", "anet", group)
    assert ctl("app-profile", "create", "shop", "-g", "ui,api").stdout == "Creating AppProfile default:shop\n"
    assert ctl("app-profile", "group-ls", "shop").stdout == "ui,api\n"
    assert ctl("app-profile", "update", "shop", "--group", "ui").stdout == ""
    assert ["default", "shop", "ui"] in rows(ctl("app-profile", "ls").stdout)
    assert ctl("app-profile", "ls", "-q").stdout == "shop\n"
    assert json.loads(ctl("app-profile", "ls", "--json").stdout)[0]["endpointGroups"] == ["ui"]
    assert json.loads(ctl("app-profile", "group-list", "shop", "--json").stdout)["appProfileName"] == "shop"
    assert json.loads(ctl("app-profile", "inspect", "shop").stdout)["Config"]["key"] == "default:shop"
    ctl.fails("app-profile", "create", "mall", "-g", "nope", message="EndpointGroup default:nope not found")
    ctl("app-profile", "rm", "shop")
    for group in ("ui", "api"):
        ctl("group", "rm", group)
    ctl("net", "rm", "anet")


def test_external_contracts_lifecycle(ctl: Ctl) -> None:
    out = ctl("external-contracts", "create", "ext", "--provided", "-a", "uni/tn-common/brc-web")
    assert out.stdout == "Creating ExternalContracts default:ext\n"
    assert rows(ctl("external-contracts", "ls").stdout) == [["default", "ext", "provided", "[uni/tn-common/brc-web]"]]
    assert ctl("external-contracts", "ls", "-q").stdout == "ext\n"
    assert json.loads(ctl("external-contracts", "ls", "--json").stdout)[0]["contractsType"] == "provided"
    assert json.loads(ctl("external-contracts", "inspect", "ext").stdout)["Config"]["contracts"] == ["uni/tn-common/brc-web"]
    ctl.refuses("external-contracts", "create", "ext2", "-a", "uni/x", message="Either provided or consumed must be specified")
    ctl("external-contracts", "rm", "ext")


def test_global_info_set_inspect(ctl: Ctl) -> None:
    info = ctl("global", "info").stdout
    assert "Forward mode: bridge\n" in info and "Vlan Range: 1-4094\n" in info
    assert ctl("global", "set", "--vlan-range", "1-2000", "-a", "flood").stdout == ""
    info = ctl("global", "info").stdout
    assert "Vlan Range: 1-2000\n" in info and "ARP mode: flood\n" in info
    # the production default (Contiv's), asserted unchanged, never used as an address
    assert "Private subnet: 172.19.0.0/16\n" in info, "flags not given are left alone"
    assert json.loads(ctl("global", "inspect").stdout)["Config"]["vlans"] == "1-2000"
    assert json.loads(ctl("global", "info", "--json").stdout)[0]["arpMode"] == "flood"
    ctl.fails("global", "set", "--fwd-mode", "teleport", message="fwdMode string invalid format")
    ctl("global", "set", "-v", "1-4094", "-a", "proxy")


def test_aci_gw_set_info_inspect(ctl: Ctl) -> None:
    assert ctl("aci-gw", "info").stdout == ""  # none yet: netctl lists nothing
    ctl("aci-gw", "set", "--phys-dom", "phys1")
    info = ctl("aci-gw", "info").stdout
    assert "Physical domain: phys1\n" in info and "Enforce policies: yes\n" in info and "Include Common-Tenant: no\n" in info
    ctl("aci-gw", "set", "-i", "yes")
    assert json.loads(ctl("aci-gw", "inspect").stdout)["Config"]["includeCommonTenant"] == "yes"
    ctl.fails("aci-gw", "set", "-e", "maybe", message="enforcePolicies string invalid format")


def test_endpoint_inspect(ctl: Ctl, node: ContivdProcess) -> None:
    ctl("net", "create", "-s", "198.18.25.0/24", "enet")
    ctl("group", "create", "enet", "pods")
    answer = node.post(
        "/plugin/createEndpoint",
        {"TenantName": "default", "NetworkName": "enet", "ServiceName": "pods", "EndpointID": "c0ffee42",
         "ConfigEP": {"Container": "c0ffee42", "Host": "node0"}},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    oper = json.loads(ctl("ep", "inspect", "c0ffee42").stdout)["Oper"]
    assert oper["endpointID"] == "c0ffee42" and oper["ipAddress"][0] == "198.18.25.1"
    ctl.fails("endpoint", "inspect", "deadbeef99", message="endpoint not found")
    node.post("/plugin/deleteEndpoint", {"TenantName": "default", "NetworkName": "enet", "EndpointID": "c0ffee42"})
    ctl("group", "rm", "pods")
    ctl("net", "rm", "enet")

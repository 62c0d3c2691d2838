"""Which address NodePort connections leave the node with (the VTEP only when other nodes reach
it: a loopback VTEP, the default single-node install, means the private address), the iptables
SNAT rendered from it, and the NodePort backends reported as unable to answer."""

from __future__ import annotations

import ipaddress

from contivd.agent import noderules
from contivd.agent.nodeport import NodePortSource, nodeport_source, snat_sources, unserved_backends
from openflow import HostPort, LocalPort, NodeInputs, RemoteEndpoint, ServiceSpec
from openflow.flow import IP_TCP
from openflow.inputs import Backend, Encap, NetworkRef, ServicePort

SUBNET = ipaddress.IPv4Network("198.18.0.0/16")
PRIVATE = ipaddress.IPv4Address("198.18.255.254")
GATEWAY_NET = NetworkRef("pods.default", "vxlan", 2, 5000, int(ipaddress.IPv4Address("198.19.10.254")))
BARE_NET = NetworkRef("bare.default", "vxlan", 3, 5001)


def ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def host_port(source: NodePortSource) -> HostPort:
    return HostPort(ofport=9, mac=0x02AA00000001, address=int(PRIVATE), nodeport_source=source.address)


def postrouting(encap: Encap, vtep: str) -> tuple[str, ...]:
    """CONTIVD-POSTROUTING for a node with one bridge of `encap` and this VTEP."""
    sources = snat_sources({encap: host_port(nodeport_source(encap, vtep))})
    return noderules.node_rules(SUBNET, PRIVATE, (), sources).tables["nat"][noderules.POSTROUTING_CHAIN]


def nodeport_snat(body: tuple[str, ...]) -> list[str]:
    """The NodePort rules of CONTIVD-POSTROUTING: SNAT of what the node DNATed."""
    return [rule for rule in body if "--ctstate DNAT -j SNAT" in rule]


def test_a_reachable_vtep_is_the_source_on_the_vxlan_bridge() -> None:
    assert nodeport_source("vxlan", "198.18.100.1") == NodePortSource(ip("198.18.100.1"))
    assert nodeport_snat(postrouting("vxlan", "198.18.100.1")) == [
        "-o cvhost-vxlan -m conntrack --ctstate DNAT -j SNAT --to-source 198.18.100.1",
        f"-o cvhost-+ -m conntrack --ctstate DNAT -j SNAT --to-source {PRIVATE}",
    ]


def test_a_loopback_vtep_as_in_the_default_install_means_the_private_address_never_127() -> None:
    for vtep in ("127.0.0.1", "127.1.2.3", "0.0.0.0", ""):
        source = nodeport_source("vxlan", vtep)
        assert source.address == 0 and source.local_only, vtep
        body = postrouting("vxlan", vtep)
        assert nodeport_snat(body) == [f"-o cvhost-+ -m conntrack --ctstate DNAT -j SNAT --to-source {PRIVATE}"]
        assert not [rule for rule in body if "127." in rule or "0.0.0.0" in rule], body
    assert "--vtep-ip" in nodeport_source("vxlan", "127.0.0.1").local_only


def test_the_vlan_bridge_always_uses_the_private_address() -> None:
    source = nodeport_source("vlan", "198.18.100.1")
    assert source.address == 0 and "VLAN" in source.local_only
    assert snat_sources({"vlan": host_port(source), "vxlan": None}) == {}


def node_inputs(backends: list[str], *, local: list[str], remote: list[str], bare: tuple[str, ...] = ()) -> NodeInputs:
    """A bridge holding local pods, remote pods (on GATEWAY_NET unless in `bare`) and one entered Service."""
    net = {address: BARE_NET if address in bare else GATEWAY_NET for address in (*local, *remote)}
    ports = tuple(LocalPort(i + 1, f"l{i}", ip(a), 0x020000000000 + i, net[a]) for i, a in enumerate(local))
    remotes = tuple(RemoteEndpoint(f"r{i}", ip(a), 0x020000000100 + i, net[a], 0, ip("198.18.100.2")) for i, a in enumerate(remote))
    port = ServicePort(IP_TCP, 80, tuple(sorted(Backend(ip(b), 8080) for b in backends)))
    service = ServiceSpec("k8s:shop/web", ip("198.19.96.10"), (port,), entry_network=GATEWAY_NET)
    idle = ServiceSpec("k8s:shop/other", ip("198.19.96.11"), (port,))  # not entered: no NodePort here
    return NodeInputs("vxlan", ports, remotes, services=(service, idle))


def test_remote_backends_are_reported_only_when_the_source_is_the_private_address() -> None:
    inputs = node_inputs(["198.19.10.1", "198.19.10.2"], local=["198.19.10.1"], remote=["198.19.10.2"])
    assert unserved_backends(inputs, nodeport_source("vxlan", "198.18.100.1")) == []
    (problem,) = unserved_backends(inputs, nodeport_source("vxlan", "127.0.0.1"))
    assert problem.startswith("NodePort of service shop/web: backend 198.19.10.2 on other nodes cannot answer"), problem
    assert "127.0.0.1" in problem and "--vtep-ip" in problem
    assert unserved_backends(node_inputs(["198.19.10.1"], local=["198.19.10.1"], remote=["198.19.10.2"]), nodeport_source("vxlan", "127.0.0.1")) == []


def test_backends_without_a_gateway_are_reported_wherever_they_are() -> None:
    inputs = node_inputs(["198.19.10.1", "198.19.11.1"], local=["198.19.10.1", "198.19.11.1"], remote=[], bare=("198.19.11.1",))
    (problem,) = unserved_backends(inputs, nodeport_source("vxlan", "198.18.100.1"))
    assert "backend 198.19.11.1 on a network without a gateway" in problem, problem


def test_many_backends_are_summarised() -> None:
    far = [f"198.19.10.{i}" for i in range(2, 9)]
    (problem,) = unserved_backends(node_inputs(far, local=[], remote=far), nodeport_source("vlan", ""))
    assert "backends 198.19.10.2, 198.19.10.3, 198.19.10.4 and 4 more on other nodes" in problem, problem

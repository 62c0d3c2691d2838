"""contivd's iptables chains as text: what iptables-save shows is compared chain by chain, and
one restore transaction rewrites the chains and adds only the jumps that are missing."""

from __future__ import annotations

import dataclasses
import ipaddress

from contivd.agent import noderules
from contivd.state import KubeBackend, KubeServicePort, KubeServiceState

SUBNET = ipaddress.IPv4Network("198.18.0.0/16")
RULES = noderules.node_rules(SUBNET, ipaddress.IPv4Address("198.18.255.254"))


def saved(table: str, *, jump: bool = True, extra: str = "") -> str:
    """iptables-save's text for `table` holding RULES (and someone else's rules)."""
    lines = [f"*{table}", ":FORWARD ACCEPT [0:0]", ":KUBE-OTHER - [0:0]", "-A FORWARD -j KUBE-OTHER"]
    lines += [f"-A {builtin} -j {chain}" for builtin, chain in noderules.JUMPS[table] if jump]
    lines += [f"-A {chain} {rule}" for chain, body in RULES.tables[table].items() for rule in body]
    return "\n".join([*lines, extra, "COMMIT"])


def test_matching_tables_need_no_write_and_others_rules_are_ignored() -> None:
    assert not noderules.differs(RULES, "filter", saved("filter"))
    assert not noderules.differs(RULES, "nat", saved("nat", extra="-A KUBE-OTHER -j MASQUERADE"))


def test_a_missing_jump_an_edited_or_an_emptied_chain_is_a_difference() -> None:
    assert noderules.differs(RULES, "filter", saved("filter", jump=False))
    assert noderules.differs(RULES, "filter", saved("filter", extra=f"-A {noderules.FORWARD_CHAIN} -j ACCEPT"))
    assert noderules.differs(RULES, "nat", "*nat\n-A POSTROUTING -j CONTIVD-POSTROUTING\nCOMMIT")


def test_restore_flushes_by_declaring_and_inserts_only_missing_jumps() -> None:
    text = noderules.restore_input(RULES, "filter", {("FORWARD", noderules.FORWARD_CHAIN)})
    lines = text.splitlines()
    assert lines[:2] == ["*filter", f":{noderules.FORWARD_CHAIN} - [0:0]"] and lines[-1] == "COMMIT"
    assert not any(line.startswith("-I") for line in lines)
    assert "-I FORWARD 1 -j CONTIVD-FORWARD" in noderules.restore_input(RULES, "filter", set()).splitlines()


def test_private_traffic_is_masqueraded_only_when_it_leaves_the_pods_and_bridges() -> None:
    body = RULES.tables["nat"][noderules.POSTROUTING_CHAIN]
    masquerade = body.index(f"-s {SUBNET} -j MASQUERADE")
    assert body.index(f"-o {noderules.POD_LINKS} -j RETURN") < masquerade
    assert body.index(f"-o {noderules.HOST_PORTS} -j RETURN") < masquerade


def kube(name: str, *ports: KubeServicePort) -> KubeServiceState:
    return KubeServiceState("shop", name, "198.19.96.10", ports, 0, "1")


def test_node_ports_of_entered_services_with_ready_backends_become_dnat_rules() -> None:
    ready = (KubeBackend("198.19.10.1", 8080),)
    services = [
        kube(
            "web",
            KubeServicePort("http", "TCP", 80, 30080, ready),
            KubeServicePort("dns", "UDP", 53, 30053, ready),
            KubeServicePort("x", "TCP", 81, 0, ready),
        ),
        kube("idle", KubeServicePort("http", "TCP", 80, 30081, ())),
        kube("elsewhere", KubeServicePort("http", "TCP", 80, 30082, ready)),
    ]
    ports = noderules.node_ports(services, {"shop/web", "shop/idle"})
    assert [(p.protocol, p.node_port, p.port) for p in ports] == [("tcp", 30080, 80), ("udp", 30053, 53)], (
        "idle has no backend, elsewhere is not entered"
    )
    rules = noderules.node_rules(SUBNET, ipaddress.IPv4Address("198.18.255.254"), ports).tables["nat"]
    assert rules[noderules.NODE_PORTS_CHAIN] == (
        '-p tcp -m comment --comment "shop/web:http" -m tcp --dport 30080 -j DNAT --to-destination 198.19.96.10:80',
        '-p udp -m comment --comment "shop/web:dns" -m udp --dport 30053 -j DNAT --to-destination 198.19.96.10:53',
    )
    assert rules[noderules.OUTPUT_CHAIN][0] == "! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j CONTIVD-NODEPORTS"


def test_node_port_connections_take_the_source_of_their_host_port_before_the_private_address() -> None:
    private = ipaddress.IPv4Address("198.18.255.254")
    body = noderules.node_rules(SUBNET, private, (), {"cvhost-vxlan": "198.18.100.1"}).tables["nat"][noderules.POSTROUTING_CHAIN]
    assert body[1:3] == (  # after the Local services' RETURN
        "-o cvhost-vxlan -m conntrack --ctstate DNAT -j SNAT --to-source 198.18.100.1",
        f"-o cvhost-+ -m conntrack --ctstate DNAT -j SNAT --to-source {private}",
    )


def test_a_record_iptables_would_refuse_is_left_out_and_comments_stay_plain() -> None:
    ready = (KubeBackend("198.19.10.1", 8080),)
    services = [kube("bad", KubeServicePort("http", "TCP", 80, 70000, ready)), kube("odd", KubeServicePort('a "b"', "TCP", 80, 30080, ready))]
    ports = noderules.node_ports(services, {"shop/bad", "shop/odd"})
    assert [(p.node_port, p.name) for p in ports] == [(30080, "shop/odd:a__b_")]


def test_the_nodes_own_connections_to_service_vips_take_the_node_port_source() -> None:
    private = ipaddress.IPv4Address("198.18.255.254")
    body = noderules.node_rules(SUBNET, private, (), {"cvhost-vxlan": "198.18.100.1"}).tables["nat"][noderules.POSTROUTING_CHAIN]
    own = [rule for rule in body if "-m realm --realm" in rule]
    assert own == [
        "-o cvhost-vxlan -m realm --realm 0xc5 -j SNAT --to-source 198.18.100.1",
        f"-o cvhost-+ -m realm --realm 0xc5 -j SNAT --to-source {private}",
    ]
    assert body.index(own[-1]) < body.index(f"-o {noderules.HOST_PORTS} -j RETURN"), "before traffic to pods keeps its source"


def test_external_ips_of_entered_services_with_ready_backends_become_dnat_rules_for_every_source() -> None:
    ready = (KubeBackend("198.19.10.1", 8080),)
    web = dataclasses.replace(
        kube("web", KubeServicePort("http", "TCP", 80, 0, ready), KubeServicePort("dns", "UDP", 53, 0, ())), external_ips=("198.19.200.1",)
    )
    away = dataclasses.replace(kube("away", KubeServicePort("http", "TCP", 80, 0, ready)), external_ips=("198.19.200.9",))
    external = noderules.external_ports([web, away], {"shop/web"})
    rules = noderules.node_rules(SUBNET, ipaddress.IPv4Address("198.18.255.254"), external=external).tables["nat"]
    assert rules[noderules.EXTERNAL_IPS_CHAIN] == (
        '-d 198.19.200.1/32 -p tcp -m comment --comment "shop/web:http" -m tcp --dport 80 -j DNAT --to-destination 198.19.96.10:80',
    ), "dns has no backend, away is not entered"
    assert f"-j {noderules.EXTERNAL_IPS_CHAIN}" in rules[noderules.PREROUTING_CHAIN], "from other hosts and pods"
    assert f"-j {noderules.EXTERNAL_IPS_CHAIN}" in rules[noderules.OUTPUT_CHAIN], "from the node itself"


def test_nothing_new_is_forwarded_from_a_bridge() -> None:
    forward = RULES.tables["filter"][noderules.FORWARD_CHAIN]
    assert forward[-1] == f"-i {noderules.HOST_PORTS} -j DROP"
    assert forward.index(f"-o {noderules.HOST_PORTS} -m conntrack --ctstate DNAT -j ACCEPT") < len(forward) - 1, "DNATed by the node: accepted first"


def local(name: str, *ports: KubeServicePort, external: tuple[str, ...] = ()) -> KubeServiceState:
    return dataclasses.replace(kube(name, *ports), local_traffic=True, external_ips=external)


def test_local_services_send_outside_clients_to_this_nodes_backends_only_keeping_their_address() -> None:
    backends = (
        KubeBackend("198.19.10.1", 8080),
        KubeBackend("198.19.10.2", 8081),
        KubeBackend("198.19.10.3", 8082),
        KubeBackend("198.19.20.9", 8080),
    )
    web = local("web", KubeServicePort("http", "TCP", 80, 30080, backends), external=("198.19.200.1",))
    none = local("none", KubeServicePort("http", "TCP", 80, 30081, (KubeBackend("198.19.20.9", 8080),)), external=("198.19.200.2",))
    cluster = kube("cluster", KubeServicePort("http", "TCP", 80, 30082, backends))
    mine = {"198.19.10.1", "198.19.10.2", "198.19.10.3"}
    ports = noderules.local_ports([web, none, cluster], {"shop/web", "shop/none", "shop/cluster"}, mine)
    rules = noderules.node_rules(SUBNET, ipaddress.IPv4Address("198.18.255.254"), local=ports)
    head = '-p tcp -m comment --comment "shop/web:http" -m addrtype --dst-type LOCAL -m tcp --dport 30080'
    assert [r for r in rules.tables["nat"][noderules.LOCAL_TRAFFIC_CHAIN] if "shop/web" in r and "-d " not in r] == [
        f"{head} -m statistic --mode random --probability 0.33333333349 -j DNAT --to-destination 198.19.10.1:8080",
        f"{head} -m statistic --mode random --probability 0.50000000000 -j DNAT --to-destination 198.19.10.2:8081",
        f"{head} -j DNAT --to-destination 198.19.10.3:8082",
    ], "the other node's backend is never chosen here; the split is even"
    assert (
        '-d 198.19.200.1/32 -p tcp -m comment --comment "shop/web:http" -m tcp --dport 80 -j DNAT --to-destination 198.19.10.3:8082'
        in (rules.tables["nat"][noderules.LOCAL_TRAFFIC_CHAIN])
    )
    assert (
        '-p tcp -m comment --comment "shop/none:http" -m addrtype --dst-type LOCAL -m tcp --dport 30081 -j ACCEPT'
        in (rules.tables["nat"][noderules.LOCAL_TRAFFIC_CHAIN])
    ), "no local backend: not NATed (the nodePort meets no listener)"
    assert rules.tables["filter"][noderules.FORWARD_CHAIN][0] == (
        '-d 198.19.200.2/32 -p tcp -m comment --comment "shop/none:http" -m tcp --dport 80 -j DROP'
    ), "nor forwarded elsewhere"
    assert not any("shop/cluster" in r for r in rules.tables["nat"][noderules.LOCAL_TRAFFIC_CHAIN])
    prerouting = rules.tables["nat"][noderules.PREROUTING_CHAIN]
    assert prerouting[0] == f"! -s {SUBNET} ! -i cvhost-+ -j {noderules.LOCAL_TRAFFIC_CHAIN}", (
        "outside clients first; pods and the node take the cluster path"
    )
    postrouting = rules.tables["nat"][noderules.POSTROUTING_CHAIN]
    assert postrouting[0] == "-o cvhost-+ -m conntrack --ctstate DNAT -m realm ! --realm 0xc5 -j RETURN", "DNATed to a pod: no SNAT"

"""contivd's iptables chains as text: what iptables-save shows is compared chain by chain, and
one restore transaction rewrites the chains and adds only the jumps that are missing."""

from __future__ import annotations

import ipaddress

from contivd.agent import noderules

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

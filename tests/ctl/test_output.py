"""Pure renderers: exact text, no server."""

from __future__ import annotations

import pytest

from contivd.ctl import output, views
from contivd.ctl.actions import render_list
from contivd.ctl.commands import RESOURCES


def test_table_pads_columns_like_tabwriter_and_strips_trailing_blanks() -> None:
    text = output.table(["Tenant", "Network", "Subnet"], [["default", "n1", "198.18.1.0/24"], ["t", "longer-name", ""]])
    assert text == ("Tenant   Network      Subnet\n------   -------      ------\ndefault  n1           198.18.1.0/24\nt        longer-name\n")


def test_table_without_rows_keeps_the_header_and_pads_short_rows() -> None:
    assert output.table(["Name"], []) == "Name\n----\n"
    assert output.table(["A", "B"], [["x"]]) == "A  B\n-  -\nx\n"


def test_tabwriter_pads_tab_terminated_cells_per_column_block_as_go() -> None:
    """Go's text/tabwriter (netctl's tables): a line's text after its last tab is not padded,
    a cell before a tab is, even when empty or last; a line with fewer cells ends a block."""
    assert output.tabwriter("Name\t\n------\t\ndefault\t\n") == "Name     \n------   \ndefault  \n"
    assert output.tabwriter("a\tbb\tc\nlonger\tb\n") == "a       bb  c\nlonger  b\n"
    assert output.tabwriter("x\ty\ntitle\nwide-cell\tz\n") == "x  y\ntitle\nwide-cell  z\n"


@pytest.mark.parametrize(
    "value, text",
    [(None, ""), ("", ""), ("a", "a"), (0, "0"), (42, "42"), (True, "yes"), (False, "no"), (["a", "b"], "a,b"), ([], "")],
)
def test_cell(value: object, text: str) -> None:
    assert output.cell(value) == text


def test_fields_and_json() -> None:
    assert output.fields([("Forward mode", "bridge"), ("Vlan Range", None)]) == "Forward mode: bridge\nVlan Range: \n"
    assert output.as_json({"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}\n'


def test_json_escapes_as_gos_encoder() -> None:
    """Go's json.MarshalIndent (netctl) writes other scripts as they are and escapes <, > and &."""
    assert output.as_json({"labels": "map[a:<b> & c]", "name": "façade"}) == (
        '{\n  "labels": "map[a:\\u003cb\\u003e \\u0026 c]",\n  "name": "façade"\n}\n'
    )


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("10 gb", "10Gbps"),
        ("2gbps", "2Gbps"),
        ("4g", "4Gbps"),
        ("6 Mbps", "6Mbps"),
        ("18Mb", "18Mbps"),
        ("500kbps", "500Kbps"),
        ("", ""),
        (None, ""),
    ],
)
def test_bandwidth_is_normalised_as_netctl_shows_it(raw: object, shown: str) -> None:
    assert views.bandwidth(raw) == shown


def test_go_list_labelled_joined() -> None:
    assert views.go_list(["app=web", "tier=fe"]) == "[app=web tier=fe]"
    assert views.go_list(None) == "[]"
    labels = (("Forward mode", "fwdMode"), ("ARP mode", "arpMode"))
    assert views.labelled(labels, [{"fwdMode": "routing"}]) == "Forward mode: routing\nARP mode: \n"
    assert views.labelled(labels, []) == ""
    assert views.joined("endpointGroups", {"endpointGroups": ["a", "b"]}) == "a,b\n"
    assert views.joined("endpointGroups", {}) == ""


def test_version_page() -> None:
    assert views.version({"Version": "1.2", "GitCommit": "abc"}, "1.3") == (
        "Client Version:\nVersion: 1.3\nGitCommit: \nBuildTime: \n\nServer Version:\nVersion: 1.2\nGitCommit: abc\nBuildTime: \n"
    )


INFO = {
    "local-ip": "198.18.0.2",
    "leader-ip": "http://198.18.0.1:9999",
    "current-state": "follower",
    "cluster": {
        "self_address": "198.18.0.2:9000", "role": "follower", "leader": "198.18.0.1:9000", "term": 7,
        "commit_index": 120, "last_applied": 119, "has_quorum": True,
        "voters": ["198.18.0.1:9000", "198.18.0.2:9000", "198.18.0.3:9000"], "connected_voters": ["198.18.0.1:9000"],
        "unreachable_voters": [["198.18.0.3:9000", 1795000000.0]], "commit_blockers": [],
    },
    "nodes": [
        {"name": "a", "raft_address": "198.18.0.1:9000", "api_url": "http://198.18.0.1:9999", "vtep_ip": "198.18.0.1", "readonly": False, "version": "0.1.0"},
        {"name": "b", "raft_address": "198.18.0.2:9000", "api_url": "http://198.18.0.2:9999", "vtep_ip": "198.18.0.2", "readonly": False, "version": "0.1.0"},
        {"name": "r", "raft_address": None, "api_url": "http://198.18.0.9:9999", "vtep_ip": "198.18.0.9", "readonly": True, "version": "0.1.0"},
    ],
    "tls": {"caFingerprint": "AB:CD"},
}  # fmt: skip


def test_cluster_status_page() -> None:
    assert views.cluster_status(INFO) == (
        "Leader: a (198.18.0.1:9000)\n"
        "Leader API: http://198.18.0.1:9999\n"
        "This node: 198.18.0.2:9000 (follower)\n"
        "Term: 7\n"
        "Commit index: 120\n"
        "Applied index: 119\n"
        "Quorum: yes\n"
        "Members: 198.18.0.1:9000, 198.18.0.2:9000, 198.18.0.3:9000\n"
        "Connected peers: 198.18.0.1:9000\n"
        "TLS CA (sha256): AB:CD\n"
        "Can commit: yes\n"
        "Unreachable: 198.18.0.3:9000 (198.18.0.3:9000) since 2026-11-18 11:06:40 UTC\n"
        "\n"
        "Registered nodes:\n"
        "Name  Raft address     API URL                 VTEP IP     Role      Version\n"
        "----  ------------     -------                 -------     ----      -------\n"
        "a     198.18.0.1:9000  http://198.18.0.1:9999  198.18.0.1  leader    0.1.0\n"
        "b     198.18.0.2:9000  http://198.18.0.2:9999  198.18.0.2  voter     0.1.0\n"
        "r                      http://198.18.0.9:9999  198.18.0.9  follower  0.1.0\n"
    )


def test_cluster_status_names_the_unreachable_and_why_this_node_cannot_commit() -> None:
    raft = {**INFO["cluster"], "unreachable_voters": [["198.18.0.1:9000", 1795000000.0], ["198.18.0.3:9000", 1795000060.0]]}
    raft["commit_blockers"] = ["it reaches 1 of 3 voters, a majority is 2", "it has no link to the leader 198.18.0.1:9000"]
    text = views.cluster_status({**INFO, "cluster": raft})
    assert "Can commit: NO: it reaches 1 of 3 voters, a majority is 2; it has no link to the leader 198.18.0.1:9000\n" in text
    assert "Unreachable: a (198.18.0.1:9000) since 2026-11-18 11:06:40 UTC, 198.18.0.3:9000 (198.18.0.3:9000) since 2026-11-18 11:07:40 UTC\n" in text


def test_cluster_status_of_a_contiv_netmaster_without_raft_section() -> None:
    text = views.cluster_status({"local-ip": "198.18.0.5", "leader-ip": "198.18.0.5:9999", "current-state": "leader"})
    assert text.startswith("Leader: none\nLeader API: 198.18.0.5:9999\nThis node: 198.18.0.5 (leader)\n")
    assert text.endswith(
        "Registered nodes:\nName  Raft address  API URL  VTEP IP  Role  Version\n----  ------------  -------  -------  ----  -------\n"
    )


RULES = [
    {"ruleId": "a", "direction": "in", "priority": 9, "fromEndpointGroup": "g", "action": "allow"},
    {"ruleId": "b", "direction": "out", "priority": 1, "toNetwork": "n", "protocol": "tcp", "port": 443, "action": "deny"},
    {"ruleId": "c", "direction": "in", "priority": 2, "fromIpAddress": "198.18.0.0/15", "action": "deny"},
]


def test_rule_listing_splits_by_direction_and_sorts_by_priority() -> None:
    rule = next(r for r in RESOURCES if r.name == "rule")
    assert render_list(rule, RULES, "table") == (
        "Incoming Rules:\n"
        "Rule  Priority  From EndpointGroup  From Network  From IpAddress  To IpAddress  Protocol  Port  Action\n"
        "----  --------  ------------------  ------------  ---------       ------------  --------  ----  ------\n"
        "c     2                                           198.18.0.0/15                           0     deny\n"
        "a     9         g                                                                         0     allow\n"
        "Outgoing Rules:\n"
        "Rule  Priority  To EndpointGroup  To Network  To IpAddress  Protocol  Port  Action\n"
        "----  --------  ----------------  ----------  ---------     --------  ----  ------\n"
        "b     1                           n                         tcp       443   deny\n"
    )
    assert render_list(rule, RULES, "quiet") == "b\nc\na\n", "every format lists rules by priority, as netctl"
    assert render_list(rule, [], "json") == "[]\n"


def test_rule_listing_with_hits_adds_packets_and_bytes_columns() -> None:
    rule = next(r for r in RESOURCES if r.name == "rule")
    counted = [{**r, "packets": n, "bytes": n * 100} for n, r in enumerate(RULES)]
    table = render_list(rule, counted, "table", counted=True)
    assert table.splitlines()[1].endswith("Action  Packets  Bytes")
    assert table.splitlines()[3].split() == ["c", "2", "198.18.0.0/15", "0", "deny", "2", "200"]
    assert table.splitlines()[-1].split() == ["b", "1", "n", "tcp", "443", "deny", "1", "100"]
    assert render_list(rule, RULES, "table", counted=False) == render_list(rule, RULES, "table"), "without --hits: netctl's table"


def test_policy_hits_view_lists_each_kind_and_names_silent_nodes() -> None:
    answer = {
        "rules": {"default:lock:1": {"packets": 3, "bytes": 300}},
        "netpol": {"prod/db-in/ingress/0": {"packets": 5, "bytes": 500}},
        "defaultDrops": [{"tenant": "prod", "group": "db", "direction": "ingress", "packets": 2, "bytes": 120}],
        "unanswered": ["node2"],
    }
    text = views.policy_hits(answer)
    assert "Contiv rules:\nTenant   Policy  Rule  Packets  Bytes\n" in text
    assert "default  lock    1     3        300\n" in text
    assert "prod       db-in   ingress/0  5        500\n" in text
    assert "Dropped by default (NetworkPolicy isolation):\n" in text and "prod       db   ingress    2        120\n" in text
    assert text.endswith("Not counted (did not answer): node2\n")
    assert views.policy_hits({"rules": {}, "unanswered": []}) == "No rule counters (no policy rules on the nodes that answered).\n"


def test_cluster_status_of_a_follower_names_its_voter_revision_and_lag() -> None:
    raft = {
        "self_address": None, "role": "store_follower", "leader": "198.18.0.1:9000", "revision": 431, "feed_voter": "198.18.0.2:9000",
        "lag_revisions": 2, "lag_seconds": 0.25, "voters": ["198.18.0.1:9000", "198.18.0.2:9000"], "commit_blockers": [],
    }  # fmt: skip
    text = views.cluster_status({**INFO, "local-ip": "198.18.0.9", "cluster": raft})
    assert text.startswith(
        "Leader: a (198.18.0.1:9000)\n"
        "Leader API: http://198.18.0.1:9999\n"
        "This node: 198.18.0.9 (follower)\n"
        "Follows: b (198.18.0.2:9000)\n"
        "Revision: 431\n"
        "Lag: 2 revisions, last heard 0.2 s ago\n"
        "Voters: 198.18.0.1:9000, 198.18.0.2:9000\n"
        "TLS CA (sha256): AB:CD\n"
        "Can commit: yes\n"
    )
    assert "Followers fed: 5\n" in views.cluster_status({**INFO, "cluster": {**INFO["cluster"], "followers": 5}})

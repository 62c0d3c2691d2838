"""Renderers that know the shape of particular contivd answers (cells and whole pages).

Pure functions over decoded JSON, built on output.py. They tolerate missing keys, so
pointing `contivd ctl` at an older contivd (or a Contiv netmaster, whose `/info` has no
raft section) still prints what is there rather than failing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from . import output

_DIGITS = re.compile(r"[0-9]+")
_UNITS = (("gG", "Gbps"), ("mM", "Mbps"), ("kK", "Kbps"))


def bandwidth(value: Any) -> str:
    """A netprofile bandwidth as netctl's `netprofile ls` shows it: the first number, then
    the unit of the first of g, m, k found anywhere (`10 gb` → `10Gbps`, `4m` → `4Mbps`)."""
    text = output.cell(value)
    digits = _DIGITS.search(text)
    unit = next((name for letters, name in _UNITS if any(letter in text for letter in letters)), "")
    return digits[0] + unit if digits else text


def number(value: Any) -> str:
    """A numeric field as Go's `%v` prints the decoded struct field: absent is 0."""
    return output.cell(0 if value is None else value)


def kube_ports(ports: Any) -> str:
    """A Kubernetes Service's ports as `http:80/TCP` (`->30080` with a NodePort), comma-separated."""
    return ", ".join(
        f"{p['name'] + ':' if p.get('name') else ''}{p['port']}/{p['protocol']}{'->' + str(p['nodePort']) if p.get('nodePort') else ''}"
        for p in ports or ()
    )


def kube_backends(ports: Any) -> str:
    """The ready backends of a Kubernetes Service, `ip:port`, distinct, sorted."""
    found = sorted({(b["ip"], b["port"]) for p in ports or () for b in p.get("backends") or ()})
    return " ".join(f"{ip}:{port}" for ip, port in found) or "none"


def go_list(value: Any) -> str:
    """A list printed like Go's `%v` of a slice (`[a=b c=d]`), as netctl's `service ls` does."""
    return "[" + " ".join(output.cell(item) for item in value or ()) + "]"


def labelled(labels: Sequence[tuple[str, str]], objects: Sequence[Mapping[str, Any]]) -> str:
    """`Label: value` lines for the (label, field) pairs of each object of a collection, as
    netctl's `global info` and `aci-gw info` print them (nothing when there is none)."""
    return "".join(output.fields((label, obj.get(name)) for label, name in labels) for obj in objects)


def joined(field: str, obj: Mapping[str, Any]) -> str:
    """One list field of an object, comma-joined on one line (`app-profile group-ls`); an
    empty list prints nothing, as netctl (which ends no line at all)."""
    text = output.cell(obj.get(field, []))
    return text + "\n" if text else ""


def version(server: Mapping[str, Any], client_version: str) -> str:
    """netctl's version page: this client's version, then the one `/version` reports."""

    def block(title: str, answer: Mapping[str, Any]) -> str:
        return f"{title}:\n" + output.fields((name, answer.get(name, "")) for name in ("Version", "GitCommit", "BuildTime"))

    return block("Client Version", {"Version": client_version}) + "\n" + block("Server Version", server)


def _node_role(node: Mapping[str, Any], leader: str | None) -> str:
    if node.get("readonly"):  # not a voter: a follower of the store (or, before 0.x, a read-only member)
        return "follower"
    return "leader" if leader and node.get("raft_address") == leader else "voter"


def _can_commit(raft: Mapping[str, Any]) -> str | None:
    """`yes`, or `NO: why` (an answer without the field, from an older contivd: empty)."""
    if "commit_blockers" not in raft:
        return None
    blockers = raft["commit_blockers"] or ()
    return "NO: " + "; ".join(blockers) if blockers else "yes"


def _unreachable(raft: Mapping[str, Any], names: Mapping[Any, Any]) -> str | None:
    """The voters the answering node has no Raft link to, each with the UTC time it went away."""
    if "unreachable_voters" not in raft:
        return None
    return (
        ", ".join(
            f"{names.get(address) or address} ({address}) since {datetime.fromtimestamp(since, UTC):%Y-%m-%d %H:%M:%S} UTC"
            for address, since in raft["unreachable_voters"]
        )
        or "none"
    )


def _voter_fields(raft: Mapping[str, Any], info: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The answering Raft member's view (a voter, or a read-only member of an older release)."""
    fields: list[tuple[str, Any]] = [
        ("This node", f"{raft.get('self_address') or info.get('local-ip')} ({raft.get('role') or info.get('current-state')})"),
        ("Term", raft.get("term")),
        ("Commit index", raft.get("commit_index")),
        ("Applied index", raft.get("last_applied")),
        ("Quorum", raft.get("has_quorum")),
        ("Members", ", ".join(raft.get("voters") or ()) or "none"),
        ("Connected peers", ", ".join(raft.get("connected_voters") or ()) or "none"),
    ]
    if "followers" in raft:
        fields.append(("Followers fed", raft["followers"]))
    return fields


def _follower_fields(raft: Mapping[str, Any], info: Mapping[str, Any], names: Mapping[Any, Any]) -> list[tuple[str, Any]]:
    """A follower of the store: the voter it follows, its revision and how far behind it is."""
    voter = raft.get("feed_voter")
    return [
        ("This node", f"{info.get('local-ip')} (follower)"),
        ("Follows", f"{names.get(voter) or '?'} ({voter})" if voter else "no voter (reconnecting)"),
        ("Revision", raft.get("revision")),
        ("Lag", f"{raft.get('lag_revisions', 0)} revisions, last heard {float(raft.get('lag_seconds') or 0):.1f} s ago"),
        ("Voters", ", ".join(raft.get("voters") or ()) or "none"),
    ]


def cluster_status(info: Mapping[str, Any]) -> str:
    """`GET /info` as an operator reads it: raft state as seen by the answering node, then
    the nodes registered in the store (the live membership, since registrations expire)."""
    raft: Mapping[str, Any] = info.get("cluster") or {}
    nodes: Sequence[Mapping[str, Any]] = info.get("nodes") or ()
    leader = raft.get("leader")
    names = {node.get("raft_address"): node.get("name") for node in nodes}
    summary = output.fields(
        (
            ("Leader", f"{names.get(leader) or '?'} ({leader})" if leader else "none"),
            ("Leader API", info.get("leader-ip")),
            *(_follower_fields(raft, info, names) if raft.get("role") == "store_follower" else _voter_fields(raft, info)),
            ("TLS CA (sha256)", (info.get("tls") or {}).get("caFingerprint") or "none (plain HTTP)"),
            ("Can commit", _can_commit(raft)),
            ("Unreachable", _unreachable(raft, names)),
        )
    )
    rows = (
        [output.cell(node.get(name)) for name in ("name", "raft_address", "api_url", "vtep_ip")]
        + [_node_role(node, leader), output.cell(node.get("version"))]
        for node in nodes
    )
    headers = ("Name", "Raft address", "API URL", "VTEP IP", "Role", "Version")
    return summary + "\nRegistered nodes:\n" + output.table(headers, rows)


def trace(answer: Mapping[str, Any]) -> str:
    """`/kubernetes/trace`: the model's verdict and what each policy table did (Contiv's `policy`,
    then NetworkPolicy's `np_egress` and `np_ingress`), then OVS's own answer on the source's
    node and on the destination's, a disagreement flagged loudly; a Service's address, each
    backend it is DNATed to with its own verdict and OVS answers."""
    proto = {6: "tcp", 17: "udp", 1: "icmp", 132: "sctp", 0: "any"}.get(answer.get("proto", 0), str(answer.get("proto")))
    port = f"/{answer['port']}" if answer.get("port") else ""
    text = f"{answer.get('src')} -> {answer.get('dst')} {proto}{port}: {str(answer.get('verdict', '?')).upper()}\n"
    ends = answer.get("ends") or {}
    text += "".join(f"  {name}: {_trace_end(ends[name])}\n" for name in ("src", "dst") if name in ends)
    text += "".join(f"  {reason}\n" for reason in answer.get("reasons") or ())
    text += _ovs_line("source", answer.get("ovs")) + _ovs_line("destination", answer.get("ovs_destination"))
    for backend in (answer.get("service") or {}).get("backends") or ():
        text += f"  backend {backend.get('backend')} ({_trace_end(backend.get('end') or {})}): {str(backend.get('verdict')).upper()}\n"
        text += "".join(f"    {reason}\n" for reason in backend.get("reasons") or ())
        text += "".join(
            "  " + _ovs_line(side, backend.get(key)) for side, key in (("source", "ovs"), ("destination", "ovs_destination")) if backend.get(key)
        )
    if answer.get("agree") is False:
        text += "".join(f"  !!! DISAGREEMENT: {what}: a bug !!!\n" for what in answer.get("disagreements") or ["the datapath and the model differ"])
    return text


def trace_failure(answer: Mapping[str, Any]) -> str | None:
    """`ctl trace` exits non-zero when a datapath disagrees with the model."""
    return "DISAGREEMENT between the model and the datapath (see above)" if answer.get("agree") is False else None


def _trace_end(end: Mapping[str, Any]) -> str:
    if end.get("external"):
        return "an address outside every endpoint" + (f" (pod {end['pod']})" if end.get("pod") else "")
    pod = f", pod {end['pod']}" if end.get("pod") else ""
    return f"endpoint {end.get('endpoint')}{pod}, group {end.get('group')}, on node {end.get('node')}"


def _ovs_line(side: str, half: Mapping[str, Any] | None) -> str:
    if half is None:
        return ""
    where = f" on {half['node']}" if half.get("node") else ""
    if "verdict" not in half:
        return f"  OVS{where} ({side}): {half.get('skipped') or half.get('unanswered') or half.get('error') or 'not traced'}\n"
    return f"  OVS{where} ({side}, {half.get('bridge')}): {str(half['verdict']).upper()} (datapath actions: {half.get('datapath_actions')})\n"


def policy_hits(answer: Mapping[str, Any]) -> str:
    """`/policy/hits`: packets and bytes per Contiv rule, per NetworkPolicy rule and per default
    drop (a NetworkPolicy-isolated pod), summed over the nodes; the nodes that did not answer."""

    def counts(hits: Mapping[str, Any]) -> list[str]:
        return [output.cell(hits.get("packets", 0)), output.cell(hits.get("bytes", 0))]

    sections = (
        ("Contiv rules:", ("Tenant", "Policy", "Rule"), [[*key.split(":", 2), *counts(h)] for key, h in (answer.get("rules") or {}).items()]),
        (
            "NetworkPolicy rules:",
            ("Namespace", "Policy", "Rule"),
            [[*key.split("/", 2), *counts(h)] for key, h in (answer.get("netpol") or {}).items()],
        ),
        (
            "Dropped by default (NetworkPolicy isolation):",
            ("Namespace", "Pod", "Direction"),
            [[d.get("tenant", ""), d.get("group", ""), d.get("direction", ""), *counts(d)] for d in answer.get("defaultDrops") or ()],
        ),
    )
    text = "\n".join(f"{title}\n{output.table((*headers, 'Packets', 'Bytes'), rows)}" for title, headers, rows in sections if rows)
    unanswered = answer.get("unanswered") or []
    if unanswered:
        text += f"{chr(10) if text else ''}Not counted (did not answer): {', '.join(unanswered)}\n"
    return text or "No rule counters (no policy rules on the nodes that answered).\n"

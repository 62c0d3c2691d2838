"""`contivd ctl trace SRC DST [PROTO/PORT]` against a real contivd: the model's verdict (no
policy here: nothing is isolated, no Contiv rule), the ends named, and bad input refused with a
message naming it (4xx JSON for a client asking for JSON). The datapath halves and a
disagreement's exit status: tests/k8s/test_netpol_datapath.py (real OVS on two nodes)."""

from __future__ import annotations

import httpx

from contivd.ctl.views import trace, trace_failure
from tests.support.contivd_nodes import ContivdProcess
from tests.support.ctl_runner import Ctl


def test_trace_without_policies_allows_and_says_why(ctl: Ctl) -> None:
    out = ctl("trace", "198.18.0.2", "198.18.0.3", "tcp/5432").stdout
    assert out.startswith("198.18.0.2 -> 198.18.0.3 tcp/5432: ALLOW\n"), out
    assert "src: an address outside every endpoint" in out
    assert "policy: not judged: neither end is an endpoint" in out, "no pod at either end: no rule applies"
    assert "OVS (source): 198.18.0.2 is no endpoint" in out and "DISAGREEMENT" not in out
    assert ctl("trace", "198.18.0.2", "198.18.0.3").stdout.startswith("198.18.0.2 -> 198.18.0.3 any: ALLOW")


def test_trace_json_names_the_verdict(ctl: Ctl) -> None:
    out = ctl("trace", "198.18.0.2", "198.18.0.3", "udp/53", "--json").stdout
    assert '"verdict": "allow"' in out and '"proto": 17' in out and '"port": 53' in out and '"agree": null' in out


def test_trace_refuses_bad_input(ctl: Ctl) -> None:
    ctl.fails("trace", "198.18.0.2", "198.18.0.3", "gre/1", message="protocol 'gre'")
    ctl.fails("trace", "198.18.0.2", "198.18.0.3", "tcp/70000", message="70000")
    ctl.fails("trace", "prod/nobody", "198.18.0.3", message="'prod/nobody' is not an IPv4 address, an endpoint id or a pod we know")
    ctl.fails("trace", "no.such.endpoint", "198.18.0.3", message="'no.such.endpoint' is not an IPv4 address")


def test_trace_bad_input_is_a_4xx_json_answer_for_json_clients(node: ContivdProcess) -> None:
    for path, status, words in (
        ("/kubernetes/trace/198.18.0.2/198.18.0.3/gre/1", 400, "protocol 'gre'"),
        ("/kubernetes/trace/198.18.0.2/198.18.0.3/tcp/99999", 400, "99999"),
        ("/kubernetes/trace/prod/nobody/198.18.0.3/tcp/80", 404, "'prod/nobody'"),
    ):
        reply = httpx.get(node.url + path, headers={"Accept": "application/json"}, timeout=30)
        assert reply.status_code == status and reply.headers["content-type"].startswith("application/json"), (path, reply.text)
        assert words in reply.text, reply.text


def test_a_disagreement_is_printed_loudly_and_fails_the_command() -> None:
    answer = {
        "src": "198.18.10.1",
        "dst": "198.18.10.2",
        "proto": 6,
        "port": 80,
        "verdict": "allow",
        "reasons": ["policy: no Contiv rule matches (default allow)"],
        "ovs": {"node": "n1", "bridge": "contivVxlanBridge", "verdict": "drop", "datapath_actions": "drop"},
        "ovs_destination": {"node": "n2", "unanswered": "node n2's agent did not answer: timed out"},
        "agree": False,
        "disagreements": ["the source's node n1: OVS says drop, the model allow"],
    }
    text = trace(answer)
    assert "  OVS on n1 (source, contivVxlanBridge): DROP (datapath actions: drop)\n" in text
    assert "  OVS on n2 (destination): node n2's agent did not answer: timed out\n" in text, "a node that cannot answer is named"
    assert "!!! DISAGREEMENT: the source's node n1: OVS says drop, the model allow: a bug !!!" in text
    assert trace_failure(answer) is not None and trace_failure({**answer, "agree": True}) is None


def test_a_service_address_prints_each_backend_with_its_verdict_and_ovs_halves() -> None:
    backend = {
        "backend": "198.18.10.2:8080",
        "end": {"endpoint": "pods.default-2", "pod": "prod/db", "node": "n2", "group": 3},
        "verdict": "drop",
        "reasons": ["np_ingress: drop by prod/db/ingress/isolation (kubernetes, priority 100)"],
        "ovs": {"node": "n1", "bridge": "contivVxlanBridge", "verdict": "drop", "datapath_actions": "drop"},
        "ovs_destination": {"node": "n2", "skipped": "not reached: the source's node drops the packet"},
    }
    answer = {
        "src": "198.18.10.1",
        "dst": "198.18.96.20",
        "proto": 6,
        "port": 80,
        "verdict": "drop",
        "reasons": ["service k8s:prod/db (198.18.96.20) tcp/80: DNATed by its select group to one of 1 backend"],
        "service": {"id": "k8s:prod/db", "vip": "198.18.96.20", "backends": [backend]},
        "ovs": {"node": "n1", "bridge": "contivVxlanBridge", "verdict": "load-balanced", "datapath_actions": "hash(sym_l4(0)),recirc(0x2)"},
        "agree": True,
    }
    text = trace(answer)
    assert "  OVS on n1 (source, contivVxlanBridge): LOAD-BALANCED (datapath actions: hash(sym_l4(0)),recirc(0x2))\n" in text
    assert "  backend 198.18.10.2:8080 (endpoint pods.default-2, pod prod/db, group 3, on node n2): DROP\n" in text
    assert "    np_ingress: drop by prod/db/ingress/isolation" in text and "    OVS on n2 (destination): not reached" in text, text

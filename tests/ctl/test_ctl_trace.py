"""`contivd ctl trace SRC DST [PROTO/PORT]` against a real contivd: the model's verdict (no
NetworkPolicy here: nothing is isolated), and bad input refused with a message naming it."""

from __future__ import annotations

from tests.ctl.conftest import Ctl


def test_trace_without_policies_allows_and_says_why(ctl: Ctl) -> None:
    out = ctl("trace", "198.18.0.2", "198.18.0.3", "tcp/5432").stdout
    assert out.startswith("198.18.0.2 -> 198.18.0.3 tcp/5432: ALLOW\n"), out
    assert "egress: not isolated" in out and "ingress: not isolated" in out
    assert ctl("trace", "198.18.0.2", "198.18.0.3").stdout.startswith("198.18.0.2 -> 198.18.0.3 any: ALLOW")


def test_trace_json_names_the_verdict(ctl: Ctl) -> None:
    out = ctl("trace", "198.18.0.2", "198.18.0.3", "udp/53", "--json").stdout
    assert '"verdict": "allow"' in out and '"proto": 17' in out and '"port": 53' in out


def test_trace_refuses_bad_input(ctl: Ctl) -> None:
    ctl.fails("trace", "198.18.0.2", "198.18.0.3", "gre/1", message="protocol 'gre'")
    ctl.fails("trace", "198.18.0.2", "198.18.0.3", "tcp/70000", message="70000")
    ctl.fails("trace", "prod/nobody", "198.18.0.3", message="'prod/nobody' is not an IPv4 address, an endpoint id or a pod we know")

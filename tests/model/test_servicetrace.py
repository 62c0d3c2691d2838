"""Which backends a traced packet to a Service address is DNATed to (contivd/model/servicetrace.py),
as the pipeline's service_lb programs them: per port, the first live service on a VIP."""

from __future__ import annotations

from contivd.model.servicetrace import owner_of, translate
from openflow.inputs import Backend, ServicePort, ServiceSpec, ipv4

VIP = ipv4("198.18.96.10", "vip")
A, B = Backend(ipv4("198.18.10.1", "a"), 8080), Backend(ipv4("198.18.10.2", "b"), 8081)
WEB = ServiceSpec("k8s:shop/web", VIP, (ServicePort(6, 80, (A, B)), ServicePort(17, 53, ())))


def test_a_port_with_backends_lists_every_backend_with_its_target_port() -> None:
    got = translate([WEB], VIP, 6, 80)
    assert got is not None and got.backends == (A, B) and got.service == "k8s:shop/web"
    assert "one of 2 backends" in got.why


def test_no_backend_no_port_or_another_protocol_is_not_dnated() -> None:
    for proto, port, says in ((17, 53, "has no backend for udp/53"), (6, 443, "has no port tcp/443"), (1, 0, "has no port icmp")):
        got = translate([WEB], VIP, proto, port)
        assert got is not None and got.backends == () and says in got.why and got.why.endswith("not DNATed: dropped"), got


def test_an_address_of_no_service_is_traced_as_addressed() -> None:
    assert translate([WEB], ipv4("198.18.96.11", "x"), 6, 80) is None


def test_the_first_live_service_by_id_owns_a_shared_vip() -> None:
    empty = ServiceSpec("a-empty", VIP, (ServicePort(6, 80, ()),))
    other = ServiceSpec("z-other", VIP, (ServicePort(6, 80, (B,)),))
    assert owner_of([other, WEB, empty], VIP) == WEB
    assert owner_of([empty], VIP) == empty

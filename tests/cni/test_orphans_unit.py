"""The orphan scan's decisions: which endpoints lack their pod end, how long, when they go, what the
status page shows, and `--orphan-grace`."""

from __future__ import annotations

import pytest

from contivd.cni_server.orphans import EndpointDatapath, datapath_view, due, missing_pod_ends, scan_interval, track
from contivd.cni_server.resolve import Attachment
from contivd.config import ConfigError, load
from contivd.state import EndpointState


def ep(container: str, ifname: str = "eth0", host: str = "n1", name: str = "") -> EndpointState:
    endpoint = name or f"{container}-{ifname}"
    return EndpointState(
        f"pods.default-{endpoint}", "pods.default", endpoint, "", 0, "", "198.18.0.9", "", "02:02:c6:12:00:09", host, container_id=container
    )


def host_end(container: str, ifname: str = "eth0") -> str:
    return Attachment(container, ifname).host_ifname


def test_missing_pod_ends_are_this_nodes_cni_endpoints_without_their_host_veth() -> None:
    states = [ep("alive"), ep("gone"), ep("moved"), ep("adding"), ep("gone", host="n2"), ep("", name="docker-ep")]
    # `moved`: its pod end is in another (live) namespace: the host end stays, so it is not missing.
    links = {host_end("alive"): True, host_end("moved"): False, "lo": True}
    missing = missing_pod_ends(states, "n1", links, busy={Attachment("adding", "eth0")})
    assert missing == {"pods.default-gone-eth0": Attachment("gone", "eth0")}


def test_the_clock_starts_when_first_missing_and_restarts_when_the_link_comes_back() -> None:
    pending = track({}, ["a", "b"], now=10.0)
    assert pending == {"a": 10.0, "b": 10.0}
    pending = track(pending, ["a", "c"], now=12.0)  # b came back (e.g. its ADD finished)
    assert pending == {"a": 10.0, "c": 12.0}
    assert due(pending, now=39.9, grace=30) == []
    assert due(pending, now=40.0, grace=30) == ["a"]
    assert due(track(pending, ["a", "b", "c"], now=45.0), now=45.0, grace=5) == ["a", "c"]  # oldest first; b starts again at 45
    assert track(pending, [], now=50.0) == {}


def test_scan_interval_follows_the_grace_period_within_bounds() -> None:
    assert scan_interval(30) == 5.0 and scan_interval(2) == 0.5 and scan_interval(0.1) == 0.25 and scan_interval(3600) == 5.0


def test_datapath_view_shows_port_and_link_of_each_local_endpoint() -> None:
    states = [ep("ok"), ep("down"), ep("gone"), ep("noport"), ep("remote", host="n2"), ep("", name="manual")]
    ports = {"pods.default-ok-eth0": host_end("ok"), "pods.default-down-eth0": host_end("down"), "pods.default-manual": "vh0"}
    links = {host_end("ok"): True, host_end("down"): False, host_end("noport"): True, "vh0": True}
    view = datapath_view(states, "n1", ports, links, {"pods.default-gone-eth0": 100.0}, now=110.0, grace=30)
    assert set(view) == {
        "pods.default-ok-eth0",
        "pods.default-down-eth0",
        "pods.default-gone-eth0",
        "pods.default-noport-eth0",
        "pods.default-manual",
    }
    assert view["pods.default-ok-eth0"].to_json() == ["port, link up", True]
    assert view["pods.default-down-eth0"].to_json() == ["port, link down", False]
    assert view["pods.default-gone-eth0"].to_json() == ["no port, veth gone; orphan, deleted in 20 s", False]
    assert view["pods.default-noport-eth0"].to_json() == ["no port, link up", False]
    assert view["pods.default-manual"].healthy, "a non-CNI endpoint's link is its port's interface"
    unknown = datapath_view([ep("x")], "n1", None, {}, {}, now=0.0, grace=30)
    assert unknown["pods.default-x-eth0"] == EndpointDatapath(None, "missing")
    assert unknown["pods.default-x-eth0"].describe() == "port unknown, veth gone"


def test_orphan_grace_defaults_to_30_seconds_and_refuses_nonsense() -> None:
    assert load({}, environ={}).orphan_grace == 30.0
    assert load({}, environ={"CONTIVD_ORPHAN_GRACE": "2"}).orphan_grace == 2.0
    for bad, problem in (("0.5", "must be between 1 second and one day"), ("soon", "must be a number of seconds")):
        with pytest.raises(ConfigError) as caught:
            load({"orphan_grace": bad}, environ={})
        assert f"--orphan-grace: '{bad}' {problem}" in str(caught.value)

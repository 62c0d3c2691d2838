"""The CNI server's pure decisions: names, where a pod goes, results, error mapping."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from cni.protocol import CniError, Request
from contivd.cni_server.resolve import (
    Addressing,
    Attachment,
    Target,
    add_result,
    check_previous_result,
    error_for_failure,
    resolve_target,
    stale_endpoints,
    stray_host_interfaces,
    valid_attachments,
)
from contivd.http.local_socket import SocketInUseError, bind_socket
from contivd.model import ConflictError, ModelError, NotFoundError, ValidationError
from contivd.state import EndpointState
from raftstore import UnavailableError

CONFIG = {"cniVersion": "1.0.0", "name": "contiv"}


def request(args: dict[str, str] | None = None, **config: object) -> Request:
    return Request("ADD", {**CONFIG, **config}, "c1", "/var/run/netns/p", "eth0", args or {})


def test_names_are_stable_unique_and_fit_linux() -> None:
    a, b = Attachment("c" * 64, "eth0"), Attachment("c" * 64, "eth1")
    assert a.host_ifname == Attachment("c" * 64, "eth0").host_ifname and a.host_ifname != b.host_ifname
    assert len(a.host_ifname) <= 15 and len(a.temp_ifname) <= 15 and a.host_ifname != a.temp_ifname
    assert a.endpoint_name == "c" * 64 + "-eth0"


def test_target_precedence_args_then_runtime_labels_then_pod_then_config_then_defaults() -> None:
    assert resolve_target(request(), {}) == Target("default", "default-net", "")
    assert resolve_target(request(network="cfg", group="g0"), {}) == Target("default", "cfg", "g0")
    pod = {"io.contiv.network": "podnet", "io.contiv.tenant": "t1"}
    assert resolve_target(request(network="cfg"), pod) == Target("t1", "podnet", "")
    runtime = request(runtimeConfig={"labels": {"io.contiv.network": "rt"}})
    assert resolve_target(runtime, pod).network == "rt"
    args = request({"io.contiv.network": "arg", "io.contiv.net-group": ""}, group="cfg-group")
    assert resolve_target(args, {"io.contiv.net-group": "pod-group"}) == Target("default", "arg", "")


def test_runtime_labels_must_be_strings() -> None:
    with pytest.raises(CniError) as caught:
        resolve_target(request(runtimeConfig={"labels": {"a": 1}}), {})
    assert caught.value.code == 7


def test_add_result_is_a_cni_1_result() -> None:
    attachment = Attachment("c1", "eth0")
    result = add_result(
        "1.0.0", attachment, "/var/run/netns/p", Addressing("02:02:c6:12:00:05", "198.18.0.5/24", "198.18.0.254"), "aa:bb:cc:dd:ee:ff"
    )
    assert result == {
        "cniVersion": "1.0.0",
        "interfaces": [
            {"name": attachment.host_ifname, "mac": "aa:bb:cc:dd:ee:ff"},
            {"name": "eth0", "mac": "02:02:c6:12:00:05", "sandbox": "/var/run/netns/p"},
        ],
        "ips": [{"address": "198.18.0.5/24", "gateway": "198.18.0.254", "interface": 1}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "198.18.0.254"}],
        "dns": {},
    }
    assert add_result("1.0.0", attachment, "/p", Addressing("m", "198.18.0.5/24", ""), "h")["routes"] == []


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ValidationError("x", "what went wrong"), 7),
        (NotFoundError("what went wrong"), 7),
        (ConflictError("what went wrong"), 101),
        (UnavailableError("what went wrong"), 11),
        (ModelError("what went wrong"), 100),
    ],
)
def test_control_plane_errors_map_to_cni_codes(exc: Exception, code: int) -> None:
    error = error_for_failure(exc, Target("default", "pods", ""))
    assert error is not None and error.code == code and "what went wrong" in error.msg
    assert error_for_failure(RuntimeError("not ours"), Target("default", "pods", "")) is None


def test_gc_keeps_listed_attachments_and_other_nodes_and_non_cni_endpoints() -> None:
    def ep(container: str, ifname: str = "eth0", host: str = "n1", name: str = "") -> EndpointState:
        endpoint = name or f"{container}-{ifname}"
        return EndpointState(
            f"pods.default-{endpoint}", "pods.default", endpoint, "", 0, "", "198.18.0.9", "", "02:02:c6:12:00:09", host, container_id=container
        )

    states = [
        ep("keep"),
        ep("drop"),
        ep("drop", "eth1"),
        ep("other-node", host="n2"),
        ep("", name="docker-ep"),
    ]
    valid = valid_attachments({"cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "eth0"}]})
    assert [s.endpoint_id for s in stale_endpoints(states, valid, "n1")] == ["drop-eth0", "drop-eth1"]
    for bad in ({"cni.dev/valid-attachments": "keep"}, {}):
        with pytest.raises(CniError) as caught:
            valid_attachments(bad)
        assert caught.value.code == 7


def test_gc_finds_stray_host_veths_by_our_naming_only() -> None:
    kept, stray = Attachment("keep", "eth0"), Attachment("gone", "eth0")
    links = ["lo", "ctl0", "vx0ac80001", "cvphy", kept.host_ifname, stray.host_ifname, "cvZZZZZZZZZZZZ"]
    assert stray_host_interfaces(links, {kept}) == [stray.host_ifname]


def test_check_compares_the_previous_result_when_given() -> None:
    plan = Addressing("m", "198.18.0.5/24", "")
    assert check_previous_result({}, plan) == []
    assert check_previous_result({"prevResult": {"ips": [{"address": "198.18.0.5/24"}]}}, plan) == []
    assert check_previous_result({"prevResult": {"ips": [{"address": "198.18.0.6/24"}]}}, plan) == [
        "prevResult lists 198.18.0.6/24, the endpoint has 198.18.0.5/24"
    ]


def test_socket_is_private_replaces_a_stale_one_and_refuses_a_live_one(tmp_path: Path) -> None:
    path = tmp_path / "run" / "cni.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path.parent.mkdir()
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    live = bind_socket(path, "--cni-socket")
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        with pytest.raises(SocketInUseError):
            bind_socket(path, "--cni-socket")
    finally:
        live.close()
    (tmp_path / "file").write_text(json.dumps({}))
    with pytest.raises(SocketInUseError):
        bind_socket(tmp_path / "file", "--cni-socket")

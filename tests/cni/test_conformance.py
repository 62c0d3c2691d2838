"""The `contiv` CNI plugin driven exactly as a container runtime drives it, against a real
contivd node (managed OVS, userspace datapath) in its own network namespace.

Every test checks that the node holds afterwards exactly what it held before: no veth, no
bridge port, no endpoint, no allocated address left behind, whatever the call did.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from contivd.cni_server.resolve import Attachment
from tests.support.cni_harness import Holdings, Pod, cni_node, create_network, holdings, netconf, new_pod, run_plugin, socket_of
from tests.support.k8s_apiserver import TOKEN, kubeconfig_text
from tests.support.k8s_apiserver import pod as kube_pod
from tests.support.nodes import Node, reaches, sh, wait_until
from tests.support.service_pods import Processes, processes

pytestmark = [
    pytest.mark.cni,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]

NETWORKS = ("pods", "tiny", "labelled")
KUBE_PORT = 18443  # inside the node's own namespace: nothing else listens there


def start_args(node: Node) -> tuple[str, ...]:
    return ("--cni-socket", "cni.sock", "--kubeconfig", str(node.data / "kubeconfig"))


def start_api_server(running: Processes, node: Node) -> None:
    """The test Kubernetes API server in the node's namespace, knowing one labelled pod."""
    node.data.mkdir(parents=True)
    (node.data / "objects.json").write_text(
        json.dumps([kube_pod("shop", "db-0", {"io.contiv.network": "labelled", "io.contiv.net-group": "web", "app": "db"})])
    )
    (node.data / "kubeconfig").write_text(kubeconfig_text(f"http://127.0.0.1:{KUBE_PORT}", TOKEN))
    running.start(node.ns, sys.executable, "-m", "tests.support.k8s_apiserver", str(KUBE_PORT), str(node.data / "objects.json"))


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("cni"))
    with processes() as running, cni_node(n, *start_args(n), prepare=lambda fresh: start_api_server(running, fresh)):
        create_network(n, "pods", "198.18.0.0/24", "198.18.0.254")
        create_network(n, "tiny", "198.18.1.0/30")
        create_network(n, "labelled", "198.18.2.0/24", "198.18.2.254")
        status, answer = n.api_call(
            "POST", "/api/v1/endpointGroups/default:web/", {"tenantName": "default", "groupName": "web", "networkName": "labelled"}
        )
        assert status == 200, answer
        yield n


@pytest.fixture
def baseline(node: Node) -> Iterator[Holdings]:
    """What the node holds before the test; the test must leave exactly that."""
    before = holdings(node, NETWORKS)
    yield before
    assert holdings(node, NETWORKS) == before, "the test left something behind"


def test_version_answers_locally() -> None:
    out = run_plugin("VERSION", {"cniVersion": "1.0.0"})
    assert out.status == 0
    assert out.output == {"cniVersion": "1.0.0", "supportedVersions": ["1.0.0", "1.1.0"]}


def test_add_check_del_and_two_pods_talk(node: Node, pods: list[Pod], baseline: Holdings) -> None:
    first, second = new_pod(pods), new_pod(pods)
    added = [first.add(node, network="pods"), second.add(node, network="pods")]
    for out in added:
        assert out.status == 0, out.output
    result = added[0].output
    assert result["cniVersion"] == "1.0.0"
    host, pod_if = result["interfaces"]
    assert pod_if == {"name": "eth0", "mac": pod_if["mac"], "sandbox": first.netns} and len(host["name"]) <= 15
    ip = result["ips"][0]
    assert ip["address"].startswith("198.18.0.") and ip["address"].endswith("/24") and ip == {**ip, "gateway": "198.18.0.254", "interface": 1}
    assert result["routes"] == [{"dst": "0.0.0.0/0", "gw": "198.18.0.254"}]

    shown = json.loads(first.exec("ip", "-j", "addr", "show", "eth0").stdout)[0]
    assert shown["address"] == pod_if["mac"] and shown["operstate"] == "UP"
    assert f"{shown['addr_info'][0]['local']}/{shown['addr_info'][0]['prefixlen']}" == ip["address"]
    assert "default via 198.18.0.254 dev eth0" in first.exec("ip", "route").stdout
    assert "tx-checksumming: off" in first.exec("ethtool", "-k", "eth0").stdout
    now = holdings(node, NETWORKS)
    assert host["name"] in now.veths and host["name"] in now.ports and len(now.endpoints) == len(baseline.endpoints) + 2

    target = added[1].output["ips"][0]["address"].split("/")[0]
    wait_until(lambda: reaches(first.name, target), 20, f"pod 1 to ping {target}", node)

    checked = run_plugin("CHECK", netconf(node, network="pods", prevResult=result), container=first.container, netns=first.netns)
    assert (checked.status, checked.output) == (0, None), checked.output
    stale = {**result, "ips": [{"address": "198.18.0.99/24", "interface": 1}]}
    assert run_plugin("CHECK", netconf(node, prevResult=stale), container=first.container, netns=first.netns).code == 103
    again = first.add(node, network="pods")
    assert again.code == 102 and again.status == 1, again.output
    assert run_plugin("CHECK", netconf(node), container=first.container, netns=first.netns).status == 0, (
        "a refused second ADD leaves the first intact"
    )

    assert (first.delete(node).status, first.delete(node).status) == (0, 0), "DEL twice succeeds"
    assert run_plugin("CHECK", netconf(node), container=first.container, netns=first.netns).code == 103
    second.remove()  # the runtime may tear the namespace down before DEL
    gone = second.delete(node)
    assert (gone.status, gone.output) == (0, None)
    assert run_plugin("DEL", netconf(node), container="never-added", netns="/var/run/netns/none").status == 0


BAD_INPUT: dict[str, tuple[dict[str, Any], bytes | dict[str, Any], int]] = {
    "missing CNI_CONTAINERID": ({"drop": ("CNI_CONTAINERID",)}, {}, 4),
    "missing CNI_NETNS on ADD": ({"drop": ("CNI_NETNS",)}, {}, 4),
    "unknown CNI_COMMAND": ({"command": "ATTACH"}, {}, 4),
    "CNI_ARGS not K=V": ({"args": "IgnoreUnknown"}, {}, 4),
    "interface name too long": ({"ifname": "a-very-long-interface"}, {}, 4),
    "malformed JSON": ({}, b'{"cniVersion": "1.0.0", "name": ', 6),
    "config not an object": ({}, b"[1, 2]", 6),
    "unsupported cniVersion": ({}, {"cniVersion": "0.4.0"}, 1),
    "no network name": ({}, {"name": ""}, 7),
    "unknown network": ({}, {"network": "nosuch"}, 7),
    "group of another network": ({}, {"network": "pods", "group": "web"}, 7),
    "non-existent netns": ({"netns": "/var/run/netns/cdt-does-not-exist"}, {"network": "pods"}, 3),
}


@pytest.mark.parametrize("case", BAD_INPUT, ids=list(BAD_INPUT))
def test_bad_input_is_a_cni_error_and_leaks_nothing(node: Node, pods: list[Pod], baseline: Holdings, case: str) -> None:
    call, config, code = BAD_INPUT[case]
    pod = new_pod(pods)
    kwargs: dict[str, Any] = {"container": pod.container, "netns": pod.netns, **call}
    command = kwargs.pop("command", "ADD")
    out = run_plugin(command, config if isinstance(config, bytes) else netconf(node, **config), **kwargs)
    assert out.status == 1 and out.code == code, out.output
    assert isinstance(out.output["msg"], str) and out.output["msg"], "the error says what is wrong"


def test_failure_half_way_undoes_everything(node: Node, pods: list[Pod], baseline: Holdings) -> None:
    pod = new_pod(pods)
    sh("ip", "-n", pod.name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")  # the rename into eth0 will fail
    out = pod.add(node, network="pods")
    assert out.status == 1 and out.code == 100 and f"eth0 already exists in {pod.netns}" in out.output["msg"], out.output
    # the endpoint had been created and its address allocated; the baseline fixture checks both are gone


def test_exhausted_subnet_refuses_and_frees_nothing_it_did_not_take(node: Node, pods: list[Pod], baseline: Holdings) -> None:
    added = []
    for _ in range(4):
        pod = new_pod(pods)
        out = pod.add(node, network="tiny")
        if out.status:
            break
        added.append(pod)
    assert out.code == 101 and "exhaustion" in out.output["msg"], out.output
    assert len(added) >= 1, "the /30 had room for at least one pod"
    before_failure = holdings(node, NETWORKS)
    assert pods[-1].add(node, network="tiny").code == 101
    assert holdings(node, NETWORKS) == before_failure
    for pod in added:
        assert pod.delete(node).status == 0


def test_plugin_without_contivd_asks_to_try_again(pods: list[Pod], tmp_path: Path) -> None:
    pod = new_pod(pods)
    config = {"cniVersion": "1.1.0", "name": "contiv", "type": "contiv", "socket": str(tmp_path / "nobody.sock")}
    out = run_plugin("ADD", config, container=pod.container, netns=pod.netns)
    assert out.status == 1 and out.code == 11 and out.output["cniVersion"] == "1.1.0", out.output


def test_concurrent_adds_get_distinct_addresses(node: Node, pods: list[Pod], baseline: Holdings) -> None:
    many = [new_pod(pods) for _ in range(6)]
    twice = many[0]
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda p: p.add(node, network="pods"), [*many, twice]))
    assert sorted(out.status for out in outs) == [0] * 6 + [1] and max(out.code for out in outs) == 102, [o.output for o in outs]
    addresses = {out.output["ips"][0]["address"] for out in outs if out.status == 0}
    assert len(addresses) == 6
    with ThreadPoolExecutor(8) as pool:
        assert all(out.status == 0 for out in pool.map(lambda p: p.delete(node), [*many, twice]))


def test_status_and_gc_keep_only_valid_attachments(node: Node, pods: list[Pod], baseline: Holdings) -> None:
    assert run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0
    kept, dropped = new_pod(pods), new_pod(pods)
    assert kept.add(node, network="pods").status == 0 and dropped.add(node, network="pods").status == 0
    valid = [{"containerID": kept.container, "ifname": "eth0"}]
    out = run_plugin("GC", netconf(node, cniVersion="1.1.0", **{"cni.dev/valid-attachments": valid}))
    assert (out.status, out.output) == (0, None)
    assert run_plugin("CHECK", netconf(node), container=kept.container, netns=kept.netns).status == 0
    assert run_plugin("CHECK", netconf(node), container=dropped.container, netns=dropped.netns).code == 103
    assert dropped.exec("ip", "link", "show", "eth0").returncode != 0, "GC removed the dropped pod's interface"
    stray = Attachment(uuid.uuid4().hex, "eth0").host_ifname  # as an ADD that died before its endpoint existed leaves it
    sh("ip", "-n", node.ns, "link", "add", stray, "type", "veth", "peer", "name", f"cp{stray[2:]}")
    assert run_plugin("GC", netconf(node, cniVersion="1.1.0", **{"cni.dev/valid-attachments": valid})).status == 0
    assert stray not in holdings(node, NETWORKS).veths, "GC removed the stray veth"
    assert run_plugin("CHECK", netconf(node), container=kept.container, netns=kept.netns).status == 0, "and kept the valid pod"
    assert kept.delete(node).status == 0


def test_pod_labels_from_kubernetes_choose_network_group_and_labels(node: Node, pods: list[Pod], baseline: Holdings) -> None:
    k8s_args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=db-0;K8S_POD_INFRA_CONTAINER_ID=x"
    labelled, overridden, unknown = new_pod(pods), new_pod(pods), new_pod(pods)
    out = run_plugin("ADD", netconf(node), container=labelled.container, netns=labelled.netns, args=k8s_args)
    assert out.status == 0 and out.output["ips"][0]["address"].startswith("198.18.2."), out.output
    status, debug = node.api_call("GET", "/debug/ofnet")
    state = next(s for s in debug["EndpointDb"].values() if s["containerId"] == labelled.container)
    assert state["serviceName"] == "web" and state["labels"]["app"] == "db" and state["epCommonName"] == "db-0"
    assert state["k8sPod"] == "shop/db-0", "the leader's pod watch finds the endpoint by it"
    # CNI_ARGS outrank the pod's labels
    out = run_plugin(
        "ADD", netconf(node), container=overridden.container, netns=overridden.netns, args=k8s_args + ";io.contiv.network=pods;io.contiv.net-group="
    )
    assert out.status == 0 and out.output["ips"][0]["address"].startswith("198.18.0."), out.output
    missing = run_plugin("ADD", netconf(node), container=unknown.container, netns=unknown.netns, args="K8S_POD_NAMESPACE=shop;K8S_POD_NAME=nope")
    assert missing.code == 3 and "shop/nope" in missing.output["msg"], missing.output
    for pod in (labelled, overridden):
        assert pod.delete(node).status == 0


def test_a_second_node_does_not_take_over_a_live_socket(node: Node, tmp_path: Path) -> None:
    second = Node(tmp_path, name="node2")
    try:
        second.create_namespace()
        second.start("--cni-socket", str(socket_of(node)))
        wait_until(lambda: "CNI server not started" in second.log_text(), 40, "the second node to refuse the socket", second)
        assert "is served by another process" in second.log_text()
        wait_until(lambda: second.api_call("GET", "/api/v1/tenants/default/")[0] == 200, 40, "the node to keep running without a CNI server", second)
        assert run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0, "the first node still answers on its socket"
    finally:
        second.stop()


def test_garbage_on_the_socket_gets_an_error_and_the_server_carries_on(node: Node) -> None:
    for garbage in (b"\xff\xfe not json\n", b'{"protocol": 1, "command": "ADD", "config": []}\n', b"\n"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(socket_of(node)))
            sock.sendall(garbage)
            answer = json.loads(sock.makefile("rb").readline())
        assert answer["error"]["code"] in (6, 7), answer
    assert run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0


def test_check_and_del_work_across_a_contivd_restart(node: Node, pods: list[Pod], baseline: Holdings) -> None:
    pod = new_pod(pods)
    assert pod.add(node, network="pods").status == 0
    assert node.proc is not None
    node.proc.send_signal(signal.SIGTERM)
    assert node.proc.wait(timeout=20) == 0
    node.log.close()
    node.start(*start_args(node))
    wait_until(lambda: run_plugin("STATUS", netconf(node, cniVersion="1.1.0")).status == 0, 40, "the restarted node's CNI server", node)
    assert run_plugin("CHECK", netconf(node), container=pod.container, netns=pod.netns).status == 0, (
        "names derive from the container: nothing local to lose"
    )
    assert pod.delete(node).status == 0

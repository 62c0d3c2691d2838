"""The CNI server's netlink helpers on real namespaces: work inside a pod namespace through
setns on a fresh thread, the veth pair's life, and CHECK's view of it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyroute2 import IPRoute

from contivd.cni_server.netlink import (
    NetnsMissingError,
    PodInterface,
    PodInterfaceError,
    check_pod_interface,
    configure_pod_end,
    create_veth,
    host_interface_exists,
    in_netns,
    remove_host_interface,
)
from contivd.cni_server.resolve import Addressing, Attachment
from tests.support.cni_harness import Pod
from tests.support.nodes import sh

pytestmark = [pytest.mark.cni, pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")]


@pytest.fixture
def pod() -> Iterator[Pod]:
    made = Pod().create()
    try:
        yield made
    finally:
        made.remove()


def names_here() -> list[str]:
    with IPRoute() as ipr:
        return sorted(str(link.get_attr("IFLA_IFNAME")) for link in ipr.get_links())


def test_work_runs_inside_the_namespace_and_the_caller_stays_outside(pod: Pod) -> None:
    outside = names_here()
    assert in_netns(pod.netns, names_here) == ["lo"]
    assert names_here() == outside, "the calling thread never changed namespace"
    with pytest.raises(ZeroDivisionError):
        in_netns(pod.netns, lambda: 1 // 0)
    with pytest.raises(NetnsMissingError):
        in_netns("/var/run/netns/cdt-no-such-namespace", names_here)


def test_veth_life_and_check(pod: Pod) -> None:
    attachment = Attachment(pod.container, "eth0")
    interface = PodInterface(attachment, pod.netns, Addressing("02:02:c6:12:00:07", "198.18.0.7/24", "198.18.0.254"))
    try:
        create_veth(attachment, pod.netns)
        assert host_interface_exists(attachment.host_ifname)
        configure_pod_end(interface)
        assert check_pod_interface(interface) == []
        assert "tx-checksumming: off" in pod.exec("ethtool", "-k", "eth0").stdout
        sh("ip", "-n", pod.name, "addr", "flush", "dev", "eth0")
        assert check_pod_interface(interface) == ["eth0 lacks address 198.18.0.7/24"]
        with pytest.raises(PodInterfaceError):
            configure_pod_end(interface)  # eth0 exists now
    finally:
        assert remove_host_interface(attachment.host_ifname)
    assert not remove_host_interface(attachment.host_ifname), "a second removal finds nothing"
    assert pod.exec("ip", "link", "show", "eth0").returncode != 0, "the pod end went with the host end"

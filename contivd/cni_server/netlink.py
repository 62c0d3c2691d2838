"""The pod's veth pair through netlink (rtnl.py on the hot path, pyroute2 elsewhere): create and address, check, remove.

Blocking functions: the server calls them through `trio.to_thread.run_sync`. Every netlink
socket and namespace handle is closed before returning. Work inside a pod's namespace runs on
a fresh thread that enters it with setns(2) and ends with the work: pyroute2's NetNS forks a
helper process instead, and a fork from contivd's threads can inherit a lock another thread
holds (trio's signal wake-up) and hang. The pod end is created directly in the pod's
namespace under a temporary name, then (inside it) gets TX checksum offload turned off (with
the userspace datapath frames are forwarded as they are and a receiver would drop TCP
segments whose checksum was left to a NIC), is renamed and addressed. Removing the host end
removes the pair.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pyroute2 import IPRoute, NetlinkError
from pyroute2.ethtool.ioctl import IoctlEthtool

from .resolve import Addressing, Attachment
from .rtnl import Rtnl

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def open_netns(path: str) -> int:
    """A descriptor of the network namespace at `path` (the caller closes it); NetnsMissingError
    when it is gone, so the CNI answer names the namespace."""
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise NetnsMissingError(f"network namespace {path}: {exc.strerror}") from None


class NetnsMissingError(Exception):
    """The pod's network namespace path does not exist (or is not a namespace)."""


class PodInterfaceError(Exception):
    """The pod's namespace cannot take the interface as asked (e.g. the name is taken)."""


def in_netns(path: str, work: Callable[[], T]) -> T:
    """`work()` on a new thread inside the network namespace at `path`; its result or exception."""
    outcome: dict[str, Any] = {}

    def enter_and_work() -> None:
        try:
            fd = open_netns(path)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise NetnsMissingError(f"network namespace {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=enter_and_work, name=f"netns {path}")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class PodInterface:
    attachment: Attachment
    netns: str
    plan: Addressing


def netns_exists(path: str) -> bool:
    try:
        return os.stat(path).st_ino != 0 and os.path.isfile(path)
    except OSError:
        return False


def create_veth(attachment: Attachment, netns: str) -> str:
    """The veth pair, its pod end (under its temporary name) created straight in `netns` and
    the host end up; returns the host end's MAC. Creating the peer inside the namespace costs
    ~2 ms where moving it there afterwards waits ~20 ms for the kernel. On failure the pair is
    removed before the exception propagates. Needs no address yet, so it runs while the
    leader allocates one."""
    host = attachment.host_ifname
    fd = open_netns(netns)
    try:
        with Rtnl() as rtnl:
            rtnl.create_veth(host, attachment.temp_ifname, fd)
            try:
                index, mac = rtnl.link(host)
                rtnl.set_link(index, up=True)
                return mac
            except BaseException:
                remove_host_interface(host)
                raise
    finally:
        os.close(fd)


def configure_pod_end(pod: PodInterface) -> None:
    """TX checksum offload off, rename, address and route the pod end inside its namespace
    (after create_veth)."""
    in_netns(pod.netns, lambda: _configure_pod_end(pod))


def _configure_pod_end(pod: PodInterface) -> None:
    """Inside the pod's namespace: rename, MAC, address, up, default route."""
    address, _, prefix = pod.plan.cidr.partition("/")
    with Rtnl() as ns:  # made in this thread, so in the pod's namespace
        try:
            ns.link(pod.attachment.ifname)
        except NetlinkError as exc:
            if exc.code != errno.ENODEV:
                raise
        else:
            raise PodInterfaceError(f"an interface named {pod.attachment.ifname} already exists in {pod.netns}")
        _disable_tx_checksum(pod.attachment.temp_ifname)  # the ioctl socket is made in this thread's (the pod's) namespace
        index, _ = ns.link(pod.attachment.temp_ifname)
        ns.set_link(index, name=pod.attachment.ifname, address=pod.plan.mac)
        ns.add_address(index, address, int(prefix))
        ns.set_link(index, up=True)
        ns.set_link(ns.link("lo")[0], up=True)
        if pod.plan.gateway:
            ns.add_default_route(pod.plan.gateway)


def _disable_tx_checksum(ifname: str) -> None:
    ethtool = IoctlEthtool(ifname)
    try:
        ethtool.set_offload_flag("tx-checksumming", 0)
    finally:
        ethtool.close()


def remove_host_interface(host_ifname: str) -> bool:
    """Delete the veth pair by its host end; False if it was already gone."""
    with Rtnl() as rtnl:
        try:
            rtnl.delete_link(rtnl.link(host_ifname)[0])
        except NetlinkError as exc:
            if exc.code != errno.ENODEV:
                raise
            return False
        return True


def host_interface_names() -> list[str]:
    with IPRoute() as ipr:
        return [str(link.get_attr("IFLA_IFNAME")) for link in ipr.get_links()]


def host_link_states() -> dict[str, bool]:
    """Every interface of this (the node's) namespace → whether it is up and has a carrier
    (a veth whose pod end is down reports LOWERLAYERDOWN)."""
    with IPRoute() as ipr:
        return {str(link.get_attr("IFLA_IFNAME")): link.get_attr("IFLA_OPERSTATE") in ("UP", "UNKNOWN") for link in ipr.get_links()}


def host_interface_exists(host_ifname: str) -> bool:
    with IPRoute() as ipr:
        return bool(ipr.link_lookup(ifname=host_ifname))


def check_pod_interface(pod: PodInterface) -> list[str]:
    """What differs from what ADD made (empty: all good)."""
    problems = []
    if not host_interface_exists(pod.attachment.host_ifname):
        problems.append(f"host interface {pod.attachment.host_ifname} is missing")
    if not netns_exists(pod.netns):
        return [*problems, f"network namespace {pod.netns} does not exist"]
    return problems + in_netns(pod.netns, lambda: _check_pod_end(pod))


def _check_pod_end(pod: PodInterface) -> list[str]:
    problems = []
    address, _, prefix = pod.plan.cidr.partition("/")
    with IPRoute() as ns:
        found = ns.link_lookup(ifname=pod.attachment.ifname)
        if not found:
            return [f"interface {pod.attachment.ifname} is missing in {pod.netns}"]
        link = ns.get_links(found[0])[0]
        mac = str(link.get_attr("IFLA_ADDRESS"))
        if mac.lower() != pod.plan.mac.lower():
            problems.append(f"{pod.attachment.ifname} has MAC {mac}, expected {pod.plan.mac}")
        addresses = {(a.get_attr("IFA_ADDRESS"), a["prefixlen"]) for a in ns.get_addr(index=found[0], family=socket.AF_INET)}
        if (address, int(prefix)) not in addresses:
            problems.append(f"{pod.attachment.ifname} lacks address {pod.plan.cidr}")
    return problems

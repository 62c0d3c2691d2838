"""The host-access veth through netlink: the node's private address, both ends, their routes.

Blocking functions (the server calls them through `trio.to_thread.run_sync`), like netlink.py
whose helpers they share. The node's private address sits once on `lo` (contivd.agent.hostnet), not on every node end.
Each node end carries the routes to its pod (the private /32, which is also the allocation
record, and the pod's data address, so the node reaches the pod on it), both with the node's
private address as their source. Removing the node end removes the pair and its routes.
Not responsible for: forwarding rules and masquerading (contivd.agent.hostnet).
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket

from pyroute2 import IPRoute, NetlinkError

from .hostaccess import POD_IFNAME, HostAccess, is_host_access_ifname
from .netlink import PodInterfaceError, in_netns, open_netns, remove_host_interface
from .rtnl import Rtnl

log = logging.getLogger("contivd.cni")


def used_private_addresses(subnet: ipaddress.IPv4Network) -> list[str]:
    """Private addresses routed to a node end of a host-access veth (allocated ones)."""
    with IPRoute() as ipr:
        ours = {int(link["index"]) for link in ipr.get_links() if is_host_access_ifname(str(link.get_attr("IFLA_IFNAME")))}
        if not ours:
            return []
        found = []
        for route in ipr.get_routes(family=socket.AF_INET, table=254):
            dst = route.get_attr("RTA_DST")
            if route["dst_len"] == 32 and route.get_attr("RTA_OIF") in ours and dst and ipaddress.IPv4Address(dst) in subnet:
                found.append(str(dst))
        return found


def create_host_access(access: HostAccess, netns: str) -> tuple[str, str]:
    """Both ends, addressed and routed (after the data interface is configured: the Service
    route goes through it); returns (node end MAC, pod end MAC). On failure the pair is removed
    before the exception propagates."""
    fd = open_netns(netns)
    try:
        with Rtnl() as rtnl:
            rtnl.create_veth(access.host_ifname, access.temp_ifname, fd)
            try:
                index, host_mac = rtnl.link(access.host_ifname)
                rtnl.set_link(index, up=True)
                rtnl.add_route(access.pod_address, 32, oif=index, prefsrc=access.node_address)
                try:
                    rtnl.add_route(access.pod_data_address, 32, oif=index, prefsrc=access.node_address)
                except NetlinkError as exc:  # another tenant's pod on this node has the same address
                    if exc.code != errno.EEXIST:
                        raise
                    log.warning("host access: %s is already routed on this node; it reaches another pod", access.pod_data_address)
                pod_mac = in_netns(netns, lambda: _configure_pod_end(access, netns))
                return host_mac, pod_mac
            except BaseException:
                remove_host_interface(access.host_ifname)
                raise
    finally:
        os.close(fd)


def _configure_pod_end(access: HostAccess, netns: str) -> str:
    """Inside the pod: rename to host1, address, up, default route via the node, Service subnet via the data interface."""
    with Rtnl() as ns:
        try:
            ns.link(POD_IFNAME)
        except NetlinkError as exc:
            if exc.code != errno.ENODEV:
                raise
        else:
            raise PodInterfaceError(f"an interface named {POD_IFNAME} already exists in {netns}")
        index, mac = ns.link(access.temp_ifname)
        ns.set_link(index, name=POD_IFNAME)
        ns.add_address(index, access.pod_address, access.prefixlen)
        ns.set_link(index, up=True)
        ns.add_default_route(access.node_address)
        if access.service_cidr:
            network = ipaddress.IPv4Network(access.service_cidr)
            ns.add_route(str(network.network_address), network.prefixlen, oif=ns.link(access.data_ifname)[0])
        return mac

"""Pure decisions for host access, Contiv's `hportN`/`host1` for pods on networks without a gateway.

A pod on such a network has no router on its data interface, so (as in Contiv's Kubernetes
mode) it gets a second interface, `host1`, addressed from the global object's `pvtSubnet`,
with its default route through the node's private address on the node end of that veth; the
Service subnet is routed through the data interface instead, where the switch answers for the
VIPs. The node end is a plain kernel interface, not an OVS port: what Contiv's host bridge did
with flows (hport → node only, never hport → hport) the node's routing does, since the node
knows no route from one pod's private address to another's (each is a /32 on its own veth).

Private addresses are node-local (every node masquerades its own pods' private traffic), so
they are allocated on the node, from what the kernel holds: the /32 routes on the node ends.
No store round trip, and a restart finds them where it left them. The node end's name derives
from the attachment like the data veth's, so DEL finds it with no record.

No I/O here: hostlink.py carries out what these functions decide.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..agent.hostnet import HostAccessError, node_address
from .resolve import Attachment

POD_IFNAME = "host1"  # Contiv's name for the pod end
HOST_PREFIX = "ch"  # node end: `ch` + the attachment's 12-hex digest, beside the data veth's `cv`
SERVICE_CIDR_KEY = "serviceCidr"  # optional network-config key; it wins over contivd's --service-cidr


class HostAccessExhaustedError(HostAccessError):
    """Every private address of the node is in use."""


@dataclass(frozen=True)
class HostAccess:
    """Both ends of one pod's host-access veth and the routes around it."""

    host_ifname: str
    """The node end (Contiv's `hportN`)."""
    temp_ifname: str
    """The pod end's name until it is renamed `host1` inside the pod."""
    pod_address: str
    """The pod's private address (no prefix)."""
    prefixlen: int
    """The private subnet's prefix length (the pod's `host1` address carries it, as in Contiv)."""
    node_address: str
    """The node's private address: on every node end, the pod's default gateway."""
    pod_data_address: str
    """The pod's address on its data interface: the node routes it through this veth."""
    data_ifname: str
    service_cidr: str
    """Routed through the data interface in the pod ('' when unknown)."""


def host_ifname(attachment: Attachment) -> str:
    return HOST_PREFIX + attachment.host_ifname[2:]


def temp_ifname(attachment: Attachment) -> str:
    return "cq" + attachment.host_ifname[2:]


def is_host_access_ifname(name: str) -> bool:
    return len(name) == 14 and name.startswith(HOST_PREFIX) and all(c in "0123456789abcdef" for c in name[2:])


def service_cidr(config: Mapping[str, Any], daemon_default: str | None) -> str:
    """The Service subnet the pod routes through its data interface ('' when none is known)."""
    value = config.get(SERVICE_CIDR_KEY, daemon_default or "")
    if not isinstance(value, str):
        raise HostAccessError(f"{SERVICE_CIDR_KEY} must be a string such as 10.96.0.0/12")
    if not value:
        return ""
    try:
        return str(ipaddress.IPv4Network(value))
    except ValueError:
        raise HostAccessError(f"{SERVICE_CIDR_KEY} {value!r} is not an IPv4 subnet") from None


def overlap_problem(subnet: ipaddress.IPv4Network, network_subnet: str, network_id: str, services: str) -> str:
    """Why the private subnet cannot be used beside the pod's network and the Service subnet ('' if it can)."""
    if subnet.overlaps(ipaddress.IPv4Network(network_subnet, strict=False)):
        return f"global pvtSubnet {subnet} overlaps the subnet {network_subnet} of network {network_id}"
    if services and subnet.overlaps(ipaddress.IPv4Network(services)):
        return f"global pvtSubnet {subnet} overlaps the Service subnet {services}"
    return ""


def pick_address(subnet: ipaddress.IPv4Network, used: Iterable[str]) -> ipaddress.IPv4Address:
    """The lowest private address neither in use nor the node's; HostAccessError when none is left."""
    taken = {ipaddress.IPv4Address(a) for a in used} | {node_address(subnet)}
    for address in subnet.hosts():
        if address not in taken:
            return address
    raise HostAccessExhaustedError(f"global pvtSubnet {subnet} has no free address for host access ({len(taken) - 1} pods on this node use it)")


def plan(
    attachment: Attachment,
    subnet: ipaddress.IPv4Network,
    used: Iterable[str],
    pod_data_address: str,
    services: str,
) -> HostAccess:
    return HostAccess(
        host_ifname(attachment),
        temp_ifname(attachment),
        str(pick_address(subnet, used)),
        subnet.prefixlen,
        str(node_address(subnet)),
        pod_data_address,
        attachment.ifname,
        services,
    )


def add_to_result(result: Mapping[str, Any], access: HostAccess, host_mac: str, pod_mac: str, netns: str) -> dict[str, Any]:
    """The ADD result with both host-access interfaces, the private address (on `host1`) and the
    pod's routes: the default through the node, the Service subnet on the data interface."""
    interfaces = [*result["interfaces"], {"name": access.host_ifname, "mac": host_mac}, {"name": POD_IFNAME, "mac": pod_mac, "sandbox": netns}]
    ip = {"address": f"{access.pod_address}/{access.prefixlen}", "gateway": access.node_address, "interface": len(interfaces) - 1}
    routes: list[dict[str, Any]] = [*result["routes"], {"dst": "0.0.0.0/0", "gw": access.node_address}]
    if access.service_cidr:
        routes.append({"dst": access.service_cidr})
    return {**result, "interfaces": interfaces, "ips": [*result["ips"], ip], "routes": routes}


def stray_host_access(links: Iterable[str], keep: Iterable[Attachment]) -> list[str]:
    """GC: node ends of host-access veths that belong to no attachment in `keep`."""
    kept = {host_ifname(attachment) for attachment in keep}
    return sorted(name for name in links if is_host_access_ifname(name) and name not in kept)

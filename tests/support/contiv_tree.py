"""A Contiv installation's etcd v2 tree, written the way Contiv's netmaster writes it (for the
import tests): modeldb objects, network / group / endpoint / service state with Go bitsets."""

from __future__ import annotations

import base64
import json
import struct
from ipaddress import IPv4Address, IPv4Network, IPv6Address
from typing import Any


def go_bitset(length: int, indices: set[int]) -> str:
    """Go's `jainvipin/bitset` JSON string: URL base64 of a BE uint64 length and BE uint64 words."""
    words = [0] * ((length + 63) // 64)
    for i in indices:
        words[i // 64] |= 1 << (i % 64)
    return base64.urlsafe_b64encode(struct.pack(f">Q{len(words)}Q", length, *words)).decode()


def _mac(ip: str) -> str:
    return "02:02:" + ":".join(f"{b:02x}" for b in IPv4Address(ip).packed)


class ContivTreeBuilder:
    """Builds `key → JSON text` consistently: every address an endpoint, gateway, pool or VIP
    holds is set in its network's bitmap."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.nets: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.used: dict[str, set[int]] = {}

    def put(self, key: str, value: Any) -> None:
        self.values[key] = json.dumps(value)

    def obj(self, kind: str, key: str, body: dict[str, Any], links: bool = False) -> None:
        extra = {"link-sets": {}, "links": {}} if links else {}
        self.put(f"/contiv.io/obj/modeldb/{kind}/{key}", {"key": key, **body, **extra})

    def glob(self, vlans: str, vxlans: str, pvt: str) -> None:
        body = {
            "name": "global",
            "networkInfraType": "default",
            "vlans": vlans,
            "vxlans": vxlans,
            "fwdMode": "bridge",
            "arpMode": "proxy",
            "pvtSubnet": pvt,
        }
        self.obj("global", "global", body)
        self.put(
            "/contiv.io/master/config/global", {"id": "", "nw-infra-type": "default", "fwd-mode": "bridge", "arp-mode": "proxy", "pvt-subnet": pvt}
        )
        self.put("/contiv.io/state/global/global", {"id": "", "auto": {"VLANs": vlans, "VXLANs": vxlans}})

    def tenant(self, name: str) -> None:
        self.obj("tenant", name, {"tenantName": name}, links=True)

    def network(
        self,
        tenant: str,
        name: str,
        encap: str,
        subnet: str,
        gateway: str,
        pkt_tag: int,
        ext_tag: int,
        cfg_tag: int = 0,
        v6: tuple[str, str] | None = None,
    ) -> None:
        net = IPv4Network(subnet)
        body: dict[str, Any] = {"tenantName": tenant, "networkName": name, "encap": encap, "nwType": "data", "subnet": subnet, "gateway": gateway}
        if cfg_tag:
            body["pktTag"] = cfg_tag
        if v6:
            body.update(ipv6Subnet=v6[0], ipv6Gateway=v6[1])
        self.obj("network", f"{tenant}:{name}", body, links=True)
        net_id = f"{name}.{tenant}"
        self.used[net_id] = {0, net.num_addresses - 1, int(IPv4Address(gateway)) - int(net.network_address)}
        state: dict[str, Any] = {
            "id": net_id, "tenant": tenant, "networkName": name, "nwType": "data", "pktTagType": encap, "pktTag": pkt_tag,
            "extPktTag": ext_tag, "subnetIP": str(net.network_address), "subnetLen": net.prefixlen, "gateway": gateway,
            "ipAddrRange": f"{net.network_address}-{net.broadcast_address}",  # the whole subnet, as Contiv writes it
            "epAddrCount": 0, "epCount": 0, "networkTag": net_id,
        }  # fmt: skip
        if v6:
            net6 = v6[0].split("/")
            state.update(
                ipv6SubnetIP=net6[0], ipv6SubnetLen=int(net6[1]), ipv6Gateway=v6[1], ipv6AllocMap={self._host6(net6[0], v6[1]): True}, ipv6LastHost=""
            )
        self.nets[net_id] = state

    @staticmethod
    def _host6(subnet: str, address: str) -> str:
        return str(IPv6Address(int(IPv6Address(address)) - int(IPv6Address(subnet))))

    def _offset(self, net_id: str, ip: str) -> int:
        return int(IPv4Address(ip)) - int(IPv4Address(self.nets[net_id]["subnetIP"]))

    def group(
        self, tenant: str, name: str, network: str, epg_id: int, policies: list[str] = (), pool: str = "", profile: str = "", dscp: int = 0
    ) -> None:  # type: ignore[assignment]
        body: dict[str, Any] = {"tenantName": tenant, "groupName": name, "networkName": network}
        if policies:
            body["policies"] = list(policies)
        if pool:
            body["ipPool"] = pool
        if profile:
            body["netProfile"] = profile
        self.obj("endpointGroup", f"{tenant}:{name}", body, links=True)
        net_id = f"{network}.{tenant}"
        net = self.nets[net_id]
        state: dict[str, Any] = {
            "id": f"{name}:{tenant}", "groupName": name, "tenantName": tenant, "networkName": network, "endpointGroupId": epg_id,
            "pktTagType": net["pktTagType"], "pktTag": net["pktTag"], "extPktTag": net["extPktTag"], "epCount": 0, "DSCP": dscp,
            "Bandwidth": "", "Burst": 0, "IPPool": pool, "groupTag": f"{name}.{tenant}",
        }  # fmt: skip
        if pool:
            first, last = (self._offset(net_id, a) for a in pool.split("-"))
            self.used[net_id] |= set(range(first, last + 1))
            size = 1 << (32 - net["subnetLen"])
            state["_pool_used"] = set(range(size)) - set(range(first, last + 1))
        self.groups[f"{name}:{tenant}"] = state

    def endpoint(self, tenant: str, network: str, name: str, ip: str, group: str = "", ip6: str = "", labels: dict[str, str] | None = None) -> None:
        net_id = f"{network}.{tenant}"
        net = self.nets[net_id]
        epg = self.groups.get(f"{group}:{tenant}") if group else None
        if epg is not None and epg["IPPool"]:
            epg["_pool_used"].add(self._offset(net_id, ip))
        else:
            self.used[net_id].add(self._offset(net_id, ip))
            net["epAddrCount"] += 1
        net["epCount"] += 1
        if epg is not None:
            epg["epCount"] += 1
        if ip6:
            host = self._host6(net["ipv6SubnetIP"], ip6)
            net["ipv6AllocMap"][host] = True
            net["ipv6LastHost"] = host
        self.put(
            f"/contiv.io/state/eps/{net_id}-{name}",
            {
                "id": f"{net_id}-{name}", "netID": net_id, "endpointID": name, "serviceName": group,
                "endpointGroupId": epg["endpointGroupId"] if epg else 0, "endpointGroupKey": f"{group}:{tenant}" if group else "",
                "ipAddress": ip, "ipv6Address": ip6, "macAddress": _mac(ip), "homingHost": "host1", "intfName": "", "vtepIP": "",
                "labels": labels, "containerId": f"c-{name}", "epCommonName": name,
            },
        )  # fmt: skip

    def service(
        self, tenant: str, name: str, network: str, vip: str, selectors: dict[str, str], ports: list[str], providers: list[tuple[str, str]]
    ) -> None:
        body = {
            "tenantName": tenant,
            "serviceName": name,
            "networkName": network,
            "selectors": [f"{k}={v}" for k, v in selectors.items()],
            "ports": ports,
        }
        self.obj("serviceLB", f"{tenant}:{name}", body)
        self.used[f"{network}.{tenant}"].add(self._offset(f"{network}.{tenant}", vip))
        provs = {f"{ip}:{tenant}": {"IPAddress": ip, "ContainerID": f"c-{ep}", "Labels": selectors, "Tenant": tenant, "Network": network,
                                     "Services": [f"{name}:{tenant}"], "Container": f"c-{ep}", "EpIDKey": f"{network}.{tenant}-{ep}"} for ep, ip in providers}  # fmt: skip
        self.put(f"/contiv.io/state/serviceLB/{name}:{tenant}", {"id": f"{name}:{tenant}", "servicename": name, "tenantname": tenant, "subnet": network,
                                                                  "ports": ports, "selectors": selectors, "ipaddress": vip, "providers": provs})  # fmt: skip
        self.put(
            f"/contiv.io/state/provider/{name}:{tenant}",
            {"id": f"{name}:{tenant}", "ServiceName": f"{name}:{tenant}", "Providers": [ip for _, ip in providers]},
        )

    def finish(self) -> dict[str, str]:
        """The tree's values, bitmaps encoded."""
        for net_id, net in self.nets.items():
            size = 1 << (32 - net["subnetLen"])
            self.put(f"/contiv.io/state/nets/{net_id}", {**net, "ipAllocMap": go_bitset(size, self.used[net_id])})
        for key, epg in self.groups.items():
            net = self.nets[f"{epg['networkName']}.{epg['tenantName']}"]
            pool_used = epg.pop("_pool_used", None)
            encoded = go_bitset(1 << (32 - net["subnetLen"]), pool_used) if pool_used is not None else go_bitset(0, set())
            self.put(f"/contiv.io/state/endpointGroups/{key}", {**epg, "epgIpAllocMap": encoded})
        return dict(self.values)

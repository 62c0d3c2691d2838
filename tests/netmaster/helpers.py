"""Requests and state reads for the in-process leader tests (the real Netmaster on a MemoryStore)."""

from __future__ import annotations

from typing import Any

from contivd.netmaster.service import Netmaster
from contivd.state import keys as layout
from raftstore import MemoryStore

TENANT = "default"


def network(name: str, subnet: str, gateway: str = "", **extra: Any) -> dict[str, Any]:
    return {"tenantName": TENANT, "networkName": name, "encap": "vxlan", "subnet": subnet, "gateway": gateway, **extra}


def endpoint_request(endpoint: str, network: str, *, group: str = "", ip: str = "", ipv6: str = "") -> dict[str, Any]:
    return {
        "TenantName": TENANT,
        "NetworkName": network,
        "ServiceName": group,
        "EndpointID": endpoint,
        "ConfigEP": {"Container": endpoint, "Host": "node1", "IPAddress": ip, "IPv6Address": ipv6},
    }


def delete_request(endpoint: str, network: str) -> dict[str, Any]:
    return {"TenantName": TENANT, "NetworkName": network, "EndpointID": endpoint}


def state(store: MemoryStore, key: str) -> Any:
    found = store.get_nowait(key)
    return None if found is None else found.value


def under(store: MemoryStore, prefix: str) -> dict[str, Any]:
    """Every state key under `prefix`, with the prefix cut off."""
    return {kv.key[len(prefix) :]: kv.value for kv in store.list_nowait(prefix)}


def net_state(store: MemoryStore, name: str) -> Any:
    return state(store, layout.net_state(TENANT, name))


async def create(netmaster: Netmaster, endpoint: str, network: str, **options: str) -> dict[str, Any]:
    answer = await netmaster.create_endpoint(endpoint_request(endpoint, network, **options))
    config: dict[str, Any] = answer["EndpointConfig"]
    return config

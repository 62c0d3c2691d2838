"""An endpoint as Contiv's inspect shows it (`EndpointOper`).

`GET /api/v1/inspect/endpoints/{key}/` returns `{"Oper": <this>}` and the network, group, policy,
tenant and service inspects embed lists of it. Contiv builds it in five places from the endpoint
state the master stores (`CfgEndpointState`); `from_state` is that mapping, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


def _json(name: str) -> Any:
    return field(default="", metadata={"json": name})


def go_map_string(labels: Mapping[str, str] | None) -> str:
    """Labels the way Go's `fmt.Sprintf("%s", map)` prints them: `map[app:web tier:1]`."""
    return "map[" + " ".join(f"{key}:{value}" for key, value in sorted((labels or {}).items())) + "]"


def omit_empty(value: Any) -> Any:
    """`value` as Go's encoder writes it when every member is `omitempty` (Contiv's oper structs):
    members that are 0, "", false, an empty list or object are dropped, inside lists too."""
    if isinstance(value, Mapping):
        return {key: omit_empty(member) for key, member in value.items() if member not in (0, "", None, [], {})}
    if isinstance(value, list):
        return [omit_empty(item) for item in value]
    return value


@dataclass(frozen=True)
class EndpointOper:
    """Fields in Contiv's JSON order; `key` is set only for the endpoint inspect itself."""

    key: str = _json("key")
    container_id: str = _json("containerID")
    container_name: str = _json("containerName")
    endpoint_group_id: int = field(default=0, metadata={"json": "endpointGroupId"})
    endpoint_group_key: str = _json("endpointGroupKey")
    endpoint_id: str = _json("endpointID")
    homing_host: str = _json("homingHost")
    intf_name: str = _json("intfName")
    ip_address: tuple[str, str] = field(default=("", ""), metadata={"json": "ipAddress"})
    labels: str = _json("labels")
    mac_address: str = _json("macAddress")
    network: str = _json("network")
    service_name: str = _json("serviceName")
    virtual_port: str = _json("virtualPort")
    vtep_ip: str = _json("vtepIP")

    @classmethod
    def from_state(cls, state: Mapping[str, Any], *, key: str = "", port_name: str = "") -> EndpointOper:
        """Build from a `/contiv.io/state/eps/...` value; `port_name` is the agent's OVS port name.

        `containerID` is shown once a start event (`/plugin/updateEndpoint`) has given the
        endpoint its labels, as in Contiv: its createEndpoint ignores `ConfigEP.Container` and
        only the start event records the container, so an endpoint that was only created has no
        `containerID` (omitempty). contivd stores the container at create, for its CNI server,
        which finds a container's endpoints by it; that stored id is not shown before.
        """
        started = state.get("labels") is not None
        return cls(
            key=key,
            container_id=state.get("containerId", "") if started else "",
            container_name=state.get("epCommonName", ""),
            endpoint_group_id=state.get("endpointGroupId", 0),
            endpoint_group_key=state.get("endpointGroupKey", ""),
            endpoint_id=state.get("endpointID", ""),
            homing_host=state.get("homingHost", ""),
            intf_name=state.get("intfName", ""),
            # Always two entries, IPv4 then IPv6, either possibly empty.
            ip_address=(state.get("ipAddress", ""), state.get("ipv6Address", "")),
            labels=go_map_string(state.get("labels")),
            mac_address=state.get("macAddress", ""),
            network=state.get("netID", ""),
            service_name=state.get("serviceName", ""),
            virtual_port=f"v{port_name}" if port_name else "",
            vtep_ip=state.get("vtepIP", ""),
        )

    def to_json(self) -> dict[str, Any]:
        """Contiv's JSON (`omitempty`: empty strings and 0 are left out)."""
        out: dict[str, Any] = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value:
                out[spec.metadata["json"]] = list(value) if isinstance(value, tuple) else value
        return out

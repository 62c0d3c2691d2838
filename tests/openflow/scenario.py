"""Store-shaped states and NodeInputs shared by the openflow tests (two nodes, one tenant).

The states are parsed with contivd's state records and turned into flow inputs by the agent's
adapter (contivd.agent.inputs), as the daemon does: openflow itself knows no store format.

Node A (vtep 198.19.254.1) hosts web1 (EPG 5, port 3) and db1 (EPG 6, port 4, DSCP 46);
node B (vtep 198.19.254.2) hosts web2 (EPG 5); all on network blue (VNI 100, local VLAN 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contivd.agent.inputs import kube_service_spec, local_port, remote_endpoint, rule_spec, service_spec
from contivd.state import EndpointGroupState, EndpointState, KubeServiceState, NetworkState, ServiceLBState
from contivd.state.records import policy_rule_from_json
from openflow.flow import Flow
from openflow.inputs import (
    Backend,
    LocalPort,
    NodeInputs,
    PolicyRuleSpec,
    RemoteEndpoint,
    ServicePort,
    ServiceSpec,
    TunnelPort,
    ipv4,
    mac,
)
from openflow.text import flow_text


def local_of(ep: dict[str, Any], net: dict[str, Any], epg: dict[str, Any] | None, ofport: int) -> LocalPort:
    """A local port from stored states, through the records and the agent's adapter."""
    group = None if epg is None else EndpointGroupState.from_json({"id": f"g{epg['endpointGroupId']}:t", **epg})
    return local_port(EndpointState.from_json(ep), _network(net), group, ofport)


def remote_of(ep: dict[str, Any], net: dict[str, Any], vtep: str = "") -> RemoteEndpoint:
    return remote_endpoint(EndpointState.from_json(ep), _network(net), vtep)


def rule_of(state: dict[str, Any]) -> PolicyRuleSpec:
    return rule_spec(policy_rule_from_json(state))


def service_of(lb: dict[str, Any], provider: dict[str, Any] | None = None) -> ServiceSpec:
    return service_spec(ServiceLBState.from_json(lb), None if provider is None else provider.get("Providers") or [])


def kube_service_of(state: dict[str, Any]) -> ServiceSpec:
    """A Kubernetes Service from its stored state (as the leader writes it), through the adapter."""
    return kube_service_spec(KubeServiceState.from_json(state))


def with_backends(spec: ServiceSpec, *ips: int) -> ServiceSpec:
    """``spec`` with each port's backends replaced by ``ips`` on the port's first target port."""
    ports = tuple(ServicePort(p.proto, p.port, tuple(Backend(ip, p.backends[0].port) for ip in ips)) for p in spec.ports)
    return ServiceSpec(spec.service_id, spec.vip, ports, spec.affinity_timeout)


def _network(net: dict[str, Any]) -> NetworkState:
    return NetworkState.from_json({"subnetIP": "198.19.10.0", "subnetLen": 24, **net})


BLUE = {"id": "blue.t", "pktTagType": "vxlan", "pktTag": 1, "extPktTag": 100}
RED_VLAN = {"id": "red.t", "pktTagType": "vlan", "pktTag": 200, "extPktTag": 0}
WEB_EPG = {"endpointGroupId": 5, "DSCP": 0, "Bandwidth": "", "Burst": 0}
DB_EPG = {"endpointGroupId": 6, "DSCP": 46, "Bandwidth": "10Mbps", "Burst": 64}
VTEP_A, VTEP_B = "198.19.254.1", "198.19.254.2"


def ep(name: str, ip: str, epg: int, net: dict[str, Any] = BLUE) -> dict[str, Any]:
    """An endpoint state as contivd.netmaster.endpoints writes it (the fields the agent reads)."""
    octets = [int(x) for x in ip.split(".")]
    return {
        "id": f"{net['id']}-{name}",
        "netID": net["id"],
        "endpointGroupId": epg,
        "ipAddress": ip,
        "macAddress": "02:02:" + ":".join(f"{o:02x}" for o in octets),
    }


WEB1 = ep("web1", "198.19.10.2", 5)
DB1 = ep("db1", "198.19.10.3", 6)
WEB2 = ep("web2", "198.19.10.9", 5)
IP = {name: ipv4(e["ipAddress"], name) for name, e in (("web1", WEB1), ("db1", DB1), ("web2", WEB2))}
MAC = {name: mac(e["macAddress"], name) for name, e in (("web1", WEB1), ("db1", DB1), ("web2", WEB2))}

DENY_WEB_TO_DB_TCP_5432 = {
    "RuleId": "t:db-policy:rule1:outTx", "Priority": 2, "SrcEndpointGroup": 5, "DstEndpointGroup": 6,
    "SrcIpAddr": "", "DstIpAddr": "", "IpProtocol": 6, "SrcPort": 0, "DstPort": 5432, "TcpFlags": "",
    "Action": "deny",
}  # fmt: skip
SERVICE_LB = {
    "id": "web:t", "servicename": "web", "tenantname": "t", "subnet": "blue", "ports": ["80:8080:TCP"],
    "selectors": {"app": "web"}, "ipaddress": "198.19.10.250",
    "providers": {"198.19.10.2:t": {"IPAddress": "198.19.10.2"}, "198.19.10.9:t": {"IPAddress": "198.19.10.9"}},
}  # fmt: skip

KUBE_WEB = {
    "namespace": "shop", "name": "web", "clusterIP": "198.19.112.10", "resourceVersion": "7",
    "ports": [
        {"name": "http", "protocol": "TCP", "port": 80, "nodePort": 0,
         "backends": [{"ip": "198.19.10.2", "port": 8080}, {"ip": "198.19.10.9", "port": 8081}]},
        {"name": "dns", "protocol": "UDP", "port": 53, "nodePort": 0, "backends": [{"ip": "198.19.10.9", "port": 5353}]},
    ],
}  # fmt: skip


def node_a(round_: int = 1, **changes: Any) -> NodeInputs:
    """Node A's inputs; keyword arguments replace NodeInputs fields."""
    fields: dict[str, Any] = {
        "encap": "vxlan",
        "local_ports": (local_of(WEB1, BLUE, WEB_EPG, 3), local_of(DB1, BLUE, DB_EPG, 4)),
        "remote_endpoints": (remote_of(WEB2, BLUE, VTEP_B),),
        "tunnels": (TunnelPort(7, ipv4(VTEP_B, "vtep")),),
        "rules": (rule_of(DENY_WEB_TO_DB_TCP_5432),),
        "services": (service_of(SERVICE_LB),),
        "round": round_,
    }
    fields.update(changes)
    return NodeInputs(**fields)


def texts(flows: Iterable[Flow]) -> list[str]:
    """Golden form: dump-flows text without cookies (cookies are tested on their own)."""
    return [flow_text(f, cookie=False) for f in flows]

"""Pure decisions of the CNI server: names, tenant/network/group resolution, results, error mapping.

No I/O here: the server shell (server.py) feeds requests, store values and API answers in,
and carries out what these functions decide.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cni.protocol import (
    ADDRESS_UNAVAILABLE,
    INTERNAL_ERROR,
    INVALID_NETWORK_CONFIG,
    TRY_AGAIN_LATER,
    CniError,
    Request,
)
from raftstore import UnavailableError

from ..k8s.labels import GROUP_LABEL, NETWORK_LABEL, TENANT_LABEL
from ..model import ConflictError, ModelError, NotFoundError, ValidationError
from ..netmaster.control import CreateEndpoint
from ..state import EndpointState, NetworkState

DEFAULT_TENANT = "default"
DEFAULT_NETWORK = "default-net"  # Contiv's k8s default


@dataclass(frozen=True)
class Attachment:
    """One container interface: the unit ADD creates and DEL removes.

    Names derive from the container id and interface name only, so DEL, CHECK and GC find
    what ADD made without any local record, across contivd restarts."""

    container_id: str
    ifname: str

    @property
    def endpoint_name(self) -> str:
        """Contiv's EndpointID (the endpoint's full id is `<net>.<tenant>-<this>`)."""
        return f"{self.container_id}-{self.ifname}"

    @property
    def _digest(self) -> str:
        return hashlib.sha256(f"{self.container_id}/{self.ifname}".encode()).hexdigest()[:12]

    @property
    def host_ifname(self) -> str:
        """The host end of the veth: 14 characters, within Linux's 15."""
        return f"cv{self._digest}"

    @property
    def temp_ifname(self) -> str:
        """The pod end's name until it is inside the pod's namespace and renamed."""
        return f"cp{self._digest}"


@dataclass(frozen=True)
class Target:
    tenant: str
    network: str
    group: str


def runtime_labels(config: Mapping[str, Any]) -> dict[str, str]:
    runtime = config.get("runtimeConfig")
    labels = runtime.get("labels") if isinstance(runtime, Mapping) else None
    if labels is None:
        return {}
    if not isinstance(labels, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise CniError(INVALID_NETWORK_CONFIG, "runtimeConfig.labels must map strings to strings")
    return dict(labels)


def k8s_pod(request: Request) -> tuple[str, str] | None:
    namespace, name = request.args.get("K8S_POD_NAMESPACE", ""), request.args.get("K8S_POD_NAME", "")
    return (namespace, name) if namespace and name else None


def resolve_target(request: Request, pod_labels: Mapping[str, str]) -> Target:
    """First of: CNI_ARGS, runtimeConfig labels, the pod's labels, the network config, defaults.
    A key given empty in an earlier source means the default (e.g. `io.contiv.net-group=`: no group)."""
    sources: list[Mapping[str, str]] = [request.args, runtime_labels(request.config), pod_labels]
    config = request.config

    def pick(label: str, config_key: str, default: str) -> str:
        for source in sources:
            if label in source:
                return source[label] or default
        value = config.get(config_key)
        return value if isinstance(value, str) and value else default

    return Target(
        tenant=pick(TENANT_LABEL, "tenant", DEFAULT_TENANT),
        network=pick(NETWORK_LABEL, "network", DEFAULT_NETWORK),
        group=pick(GROUP_LABEL, "group", ""),
    )


def endpoint_labels(request: Request, pod_labels: Mapping[str, str]) -> dict[str, str]:
    """What the endpoint is labelled with (policies and services select on these)."""
    return {**pod_labels, **runtime_labels(request.config)}


def create_request(target: Target, attachment: Attachment, node: str, pod: tuple[str, str] | None) -> CreateEndpoint:
    """The endpoint names its Kubernetes pod (`<namespace>/<name>`): the leader's pod watch finds it by that."""
    namespace, name = pod or ("", "")
    return CreateEndpoint(
        target.tenant,
        target.network,
        attachment.endpoint_name,
        node,
        target.group,
        attachment.container_id,
        name,
        f"{namespace}/{name}" if pod else "",
    )


def is_ours(endpoint: EndpointState, node: str) -> bool:
    """An endpoint this node's CNI server made: homed here, id = `<container id>-<ifname>`."""
    container, name = endpoint.container_id, endpoint.endpoint_id
    return endpoint.homing_host == node and bool(container) and name.startswith(f"{container}-") and len(name) > len(container) + 1


def attachment_of(endpoint: EndpointState) -> Attachment:
    container = endpoint.container_id
    return Attachment(container, endpoint.endpoint_id[len(container) + 1 :])


def find_endpoints(states: Iterable[EndpointState], attachment: Attachment, node: str) -> list[EndpointState]:
    return [s for s in states if is_ours(s, node) and s.endpoint_id == attachment.endpoint_name and s.container_id == attachment.container_id]


def stale_endpoints(states: Iterable[EndpointState], valid: set[tuple[str, str]], node: str) -> list[EndpointState]:
    """GC: endpoints of this node's CNI attachments that the runtime no longer lists."""
    stale = []
    for state in states:
        if is_ours(state, node):
            attachment = attachment_of(state)
            if (attachment.container_id, attachment.ifname) not in valid:
                stale.append(state)
    return stale


def stray_host_interfaces(links: Iterable[str], keep: Iterable[Attachment]) -> list[str]:
    """GC: host veth ends named like ours (`cv` + 12 hex digits) that belong to no attachment
    in `keep` (an ADD that died before its endpoint existed leaves one behind)."""
    kept = {attachment.host_ifname for attachment in keep}
    return sorted(name for name in links if _is_host_ifname(name) and name not in kept)


def _is_host_ifname(name: str) -> bool:
    return len(name) == 14 and name.startswith("cv") and all(c in "0123456789abcdef" for c in name[2:])


def valid_attachments(config: Mapping[str, Any]) -> set[tuple[str, str]]:
    """GC's `cni.dev/valid-attachments`: [{"containerID": ..., "ifname": ...}]. Required: without
    it every CNI endpoint of the node would look stale."""
    if "cni.dev/valid-attachments" not in config:
        raise CniError(INVALID_NETWORK_CONFIG, "GC needs cni.dev/valid-attachments (an empty list removes every CNI endpoint of this node)")
    listed = config["cni.dev/valid-attachments"]
    if not isinstance(listed, list) or not all(isinstance(a, Mapping) for a in listed):
        raise CniError(INVALID_NETWORK_CONFIG, "cni.dev/valid-attachments must be a list of {containerID, ifname} objects")
    return {(str(a.get("containerID", "")), str(a.get("ifname", ""))) for a in listed}


@dataclass(frozen=True)
class Addressing:
    """How the pod's interface is addressed: from the endpoint and its network's state."""

    mac: str
    cidr: str  # 198.18.1.5/24
    gateway: str  # "" when the network has none


def addressing(endpoint: EndpointState, network: NetworkState) -> Addressing:
    return Addressing(endpoint.mac_address, f"{endpoint.ip_address}/{network.subnet_len}", network.gateway)


def add_result(cni_version: str, attachment: Attachment, netns: str, plan: Addressing, host_mac: str) -> dict[str, Any]:
    """The CNI 1.x ADD result: both veth ends, the address on the pod end, the default route."""
    ip: dict[str, Any] = {"address": plan.cidr, "interface": 1}
    result: dict[str, Any] = {
        "cniVersion": cni_version,
        "interfaces": [{"name": attachment.host_ifname, "mac": host_mac}, {"name": attachment.ifname, "mac": plan.mac, "sandbox": netns}],
        "ips": [ip],
        "routes": [],
        "dns": {},
    }
    if plan.gateway:
        ip["gateway"] = plan.gateway
        result["routes"] = [{"dst": "0.0.0.0/0", "gw": plan.gateway}]
    return result


def check_previous_result(config: Mapping[str, Any], plan: Addressing) -> list[str]:
    """CHECK: the prevResult the runtime passes must list the address the endpoint has."""
    previous = config.get("prevResult")
    if not isinstance(previous, Mapping):
        return []
    ips = previous.get("ips")
    listed = {ip.get("address") for ip in ips if isinstance(ip, Mapping)} if isinstance(ips, list) else set()
    if plan.cidr not in listed:
        return [f"prevResult lists {', '.join(sorted(str(a) for a in listed)) or 'no address'}, the endpoint has {plan.cidr}"]
    return []


def error_for_failure(exc: Exception, target: Target) -> CniError | None:
    """A control-plane failure → the CNI error the runtime sees (None: not a control-plane error).
    The same typed errors come from the leader's netmaster and from a forwarded call."""
    where = f"tenant {target.tenant}, network {target.network}" + (f", group {target.group}" if target.group else "")
    if isinstance(exc, (ValidationError, NotFoundError)):
        return CniError(INVALID_NETWORK_CONFIG, f"{exc} ({where})")
    if isinstance(exc, ConflictError):
        return CniError(ADDRESS_UNAVAILABLE, f"{exc} ({where})")
    if isinstance(exc, UnavailableError):
        return CniError(TRY_AGAIN_LATER, f"the cluster cannot take the request now: {exc}")
    if isinstance(exc, ModelError):
        return CniError(INTERNAL_ERROR, f"the control plane refused the request: {exc}")
    return None

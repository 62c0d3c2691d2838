"""The part of Kubernetes' EndpointSlice controller the tests need: a Service with a selector gets
one slice (`<service>-auto`) listing the pods of its namespace whose labels include the selector,
by `status.podIP`, ready, with the Service's ports (a named `targetPort` is looked up in the pod's
container ports, a number taken as it is). The test API server has no controllers, so a test
calls `sync_slices` where the real controller would act: after a pod's or a Service's change."""

from __future__ import annotations

from typing import Any

from tests.support.k8s_apiserver import KubeApiServer


def _target_port(port: dict[str, Any], pod: dict[str, Any]) -> int | None:
    target = port.get("targetPort", port["port"])
    if isinstance(target, int):
        return target
    named = [p for c in pod.get("spec", {}).get("containers", []) for p in c.get("ports", []) if p.get("name") == target]
    return int(named[0]["containerPort"]) if named else None


def desired_slice(service: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    meta, selector = service["metadata"], service["spec"]["selector"]
    chosen = [
        p
        for p in pods
        if p["metadata"].get("namespace") == meta["namespace"]
        and selector.items() <= (p["metadata"].get("labels") or {}).items()
        and p.get("status", {}).get("podIP")
    ]
    ports = service["spec"]["ports"]
    resolved = [(port, _target_port(port, chosen[0]) if chosen else None) for port in ports]
    return {
        "kind": "EndpointSlice",
        "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"namespace": meta["namespace"], "name": f"{meta['name']}-auto", "labels": {"kubernetes.io/service-name": meta["name"]}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [p["status"]["podIP"]], "conditions": {"ready": True}} for p in chosen],
        "ports": [{"name": port.get("name", ""), "protocol": port.get("protocol", "TCP"), "port": target} for port, target in resolved if target],
    }


def sync_slices(api: KubeApiServer) -> None:
    """Write the slice of every Service with a selector where it differs from what the server holds."""
    pods = api.list("Pod")
    for service in api.list("Service"):
        if not service["spec"].get("selector"):
            continue
        wanted = desired_slice(service, pods)
        held = api.get("EndpointSlice", wanted["metadata"]["namespace"], wanted["metadata"]["name"])
        if held is None or (held["endpoints"], held["ports"]) != (wanted["endpoints"], wanted["ports"]):
            api.apply(wanted)

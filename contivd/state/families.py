"""Where the records of `records.py` live: one `Family` per kind a writer outside the netmaster
reads or writes by id (node registrations, the Kubernetes watch's Services and NetworkPolicy
records, endpoints as the pod label watch reads them)."""

from __future__ import annotations

from openflow.inputs import NetpolPod

from . import keys
from .records import EndpointState, KubeServiceState, NodeRecord, netpol_pod_from_json, netpol_pod_to_json
from .stored import Family

NODES: Family[NodeRecord] = Family(keys.NODES_PREFIX, NodeRecord.from_json, NodeRecord.to_json)
"""Live nodes by name, each under its node's lease."""

ENDPOINTS: Family[EndpointState] = Family(keys.EPS_PREFIX, EndpointState.from_json, EndpointState.to_json)
"""Endpoint states by endpoint id (`<net>.<tenant>-<endpoint>`)."""

KUBE_SERVICES: Family[KubeServiceState] = Family(keys.K8S_SERVICES_PREFIX, KubeServiceState.from_json, KubeServiceState.to_json)
"""Kubernetes Services as the leader resolved them, by `<namespace>/<name>` (`KubeServiceState.key`)."""

NETPOL_PODS: Family[NetpolPod] = Family(keys.K8S_NETPOL_PREFIX, netpol_pod_from_json, netpol_pod_to_json)
"""Pods' compiled NetworkPolicy rules, by pod `<namespace>/<name>`."""

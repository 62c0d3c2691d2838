"""Kubernetes mode's control-plane half: the Raft leader lists and watches Services and
EndpointSlices (one watch per cluster) and keeps `/contiv.io/k8s/services/` equal to them;
every node's agent programs those records. It watches Pods too, and moves a running pod's
endpoint between groups when the pod's labels change (pods.py). See docs/kubernetes.md.

The watch and its client (`KubernetesWatch`, `KubeApi`, ...) load on first use (PEP 562): only
the leader runs them, and a node that reads the watch's health (`KubeHealth`) or the store's
Kubernetes records must not carry them (nor the netmaster's write side they drive).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .status import KubeHealth as KubeHealth
from .status import KubeStatusView as KubeStatusView

if TYPE_CHECKING:
    from .client import KubeApi as KubeApi
    from .syncer import KubernetesWatch as KubernetesWatch
    from .syncer import ServiceSync as ServiceSync
    from .syncer import run_while_leader as run_while_leader

_LEADER_ONLY = {"KubeApi": ".client", **dict.fromkeys(["KubernetesWatch", "ServiceSync", "run_while_leader"], ".syncer")}


def __getattr__(name: str) -> Any:
    """Load the leader's watch on first use."""
    module = _LEADER_ONLY.get(name)
    if module is None:
        raise AttributeError(f"module 'contivd.k8s' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value

"""Kubernetes mode's control-plane half: the Raft leader lists and watches Services and
EndpointSlices (one watch per cluster) and keeps `/contiv.io/k8s/services/` equal to them;
every node's agent programs those records. It watches Pods too, and moves a running pod's
endpoint between groups when the pod's labels change (pods.py). See docs/kubernetes.md."""

from .client import KubeApi as KubeApi
from .status import KubeHealth as KubeHealth
from .status import KubeStatusView as KubeStatusView
from .syncer import KubernetesWatch as KubernetesWatch
from .syncer import ServiceSync as ServiceSync
from .syncer import run_while_leader as run_while_leader

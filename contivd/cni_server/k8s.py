"""A pod's labels from the Kubernetes API server (contivd.k8s.client's PodReader).

Blocking: the server calls `pod_labels` through `trio.to_thread.run_sync`. The reader is built
once per kubeconfig and reused; lightkube is imported on first use, so nodes without
Kubernetes never load it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from cni.protocol import INVALID_NETWORK_CONFIG, TRY_AGAIN_LATER, UNKNOWN_CONTAINER, CniError

from ..k8s.client import KubeRefused, KubeUnavailable, PodReader


@lru_cache(maxsize=4)
def _reader(kubeconfig: Path) -> PodReader:
    try:
        return PodReader(kubeconfig)
    except ValueError as exc:
        raise CniError(INVALID_NETWORK_CONFIG, str(exc)) from None


def pod_labels(kubeconfig: Path, namespace: str, name: str) -> dict[str, str]:
    try:
        pod = _reader(kubeconfig).get(namespace, name)
    except KubeRefused as exc:
        if exc.status == 404:
            raise CniError(UNKNOWN_CONTAINER, f"pod {namespace}/{name} does not exist in the Kubernetes API") from None
        raise CniError(TRY_AGAIN_LATER, f"reading pod {namespace}/{name} from the Kubernetes API failed: {exc}") from None
    except KubeUnavailable as exc:
        raise CniError(TRY_AGAIN_LATER, f"the Kubernetes API server did not answer: {exc}") from None
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}

"""A pod's labels from the Kubernetes API server (official `kubernetes` client, extra `k8s`).

Blocking: the server calls `pod_labels` through `trio.to_thread.run_sync`. The client is built
once per kubeconfig and reused; the import happens on first use so nodes without Kubernetes
do not need the package.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from cni.protocol import INVALID_NETWORK_CONFIG, TRY_AGAIN_LATER, UNKNOWN_CONTAINER, CniError

TIMEOUT_SECONDS = 10.0


@lru_cache(maxsize=4)
def _core_api(kubeconfig: Path) -> Any:
    try:
        from kubernetes import client, config
    except ImportError:
        raise CniError(INVALID_NETWORK_CONFIG, "--kubeconfig is set but the kubernetes client is not installed (pip install contivd[k8s])") from None
    try:
        api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    except Exception as exc:  # noqa: BLE001 - the client raises several unrelated types for a bad file
        raise CniError(INVALID_NETWORK_CONFIG, f"kubeconfig {kubeconfig} cannot be used: {exc}") from None
    return client.CoreV1Api(api_client)


def pod_labels(kubeconfig: Path, namespace: str, name: str) -> dict[str, str]:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    api = _core_api(kubeconfig)
    try:
        pod = api.read_namespaced_pod(name, namespace, _request_timeout=TIMEOUT_SECONDS)
    except ApiException as exc:
        if exc.status == 404:
            raise CniError(UNKNOWN_CONTAINER, f"pod {namespace}/{name} does not exist in the Kubernetes API") from None
        raise CniError(TRY_AGAIN_LATER, f"reading pod {namespace}/{name} from the Kubernetes API failed: {exc.status} {exc.reason}") from None
    except (OSError, HTTPError) as exc:
        raise CniError(TRY_AGAIN_LATER, f"the Kubernetes API server did not answer: {exc}") from None
    labels = pod.metadata.labels or {}
    return {str(k): str(v) for k, v in labels.items()}

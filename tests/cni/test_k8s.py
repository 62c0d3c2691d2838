"""Pod labels through contivd's Kubernetes client (contivd.k8s.client.PodReader), against the test API server on loopback."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cni.protocol import CniError
from contivd.cni_server.k8s import pod_labels
from tests.support.k8s_apiserver import KubeApiServer, kubeconfig_text, pod


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Path]:
    """The test API server on a free loopback port; yields a kubeconfig for it."""
    with KubeApiServer().start() as server:
        server.apply(pod("shop", "web-0", {"app": "web", "io.contiv.network": "front"}))
        yield server.kubeconfig(tmp_path / "kubeconfig")


def code_of(kubeconfig_path: Path, namespace: str, name: str) -> int:
    with pytest.raises(CniError) as caught:
        pod_labels(kubeconfig_path, namespace, name)
    assert caught.value.msg
    return caught.value.code


def test_labels_of_a_pod(api: Path) -> None:
    assert pod_labels(api, "shop", "web-0") == {"app": "web", "io.contiv.network": "front"}


def test_an_unknown_pod_is_an_unknown_container(api: Path) -> None:
    assert code_of(api, "shop", "nope") == 3


def test_an_unreachable_api_server_means_try_again(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text(f"http://127.0.0.1:{port}", "token"))
    assert code_of(config, "shop", "web-0") == 11


def test_an_unusable_kubeconfig_is_invalid_config(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("clusters: [")
    assert code_of(config, "shop", "web-0") == 7

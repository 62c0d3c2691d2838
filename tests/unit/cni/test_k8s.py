"""Pod labels through the official kubernetes client, against the fake API server on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cni.protocol import CniError
from contivd.cni_server.k8s import pod_labels
from tests.cni.fake_kube import kubeconfig
from tests.support.waiting import free_ports

pytest.importorskip("kubernetes")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Path]:
    """A fake API server on a free loopback port; yields a kubeconfig for it."""
    (port,) = free_ports(1)
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"shop/web-0": {"labels": {"app": "web", "io.contiv.network": "front"}}}))
    server = subprocess.Popen([sys.executable, "-m", "tests.cni.fake_kube", str(port), str(pods)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        config = tmp_path / "kubeconfig"
        config.write_text(kubeconfig(port))
        yield config
    finally:
        server.kill()
        server.wait()


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
    config.write_text(kubeconfig(port))
    assert code_of(config, "shop", "web-0") == 11


def test_an_unusable_kubeconfig_is_invalid_config(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("clusters: [")
    assert code_of(config, "shop", "web-0") == 7

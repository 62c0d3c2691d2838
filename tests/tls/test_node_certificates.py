"""One node on loopback with `--tls always` (real processes, no namespaces): the operator's own
certificates (and the node-to-node client verifying them: the right CA, not another one), a
restart that keeps the node's files, and a cluster secret that cannot open the store's CA key
(a clear refusal, nothing served)."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import httpx
import pytest
import trio

from contivd.http.forwarder import ForwardingClient
from contivd.tls.fingerprint import fingerprint_pem
from contivd.tls.material import peer_context
from contivd.tls.pki import create_ca, issue_node_certificate
from tests.support.contivd_nodes import ContivdProcess
from tests.support.waiting import free_ports, wait_for

pytestmark = pytest.mark.cluster


def _node(root: Path, secret: str = "tls-test-secret", *extra: str) -> ContivdProcess:
    raft, api = free_ports(2)
    node = ContivdProcess("tls1", root, f"127.0.0.1:{raft}", api, [], secret=secret, tls=True)
    node.extra += extra
    return node


def test_operator_certificates_are_served_and_no_cluster_ca_is_made(tmp_path: Path) -> None:
    ca = create_ca("operator")
    issued = issue_node_certificate(ca, "tls1", ("127.0.0.1",))
    files = {"cert": tmp_path / "node.crt", "key": tmp_path / "node.key", "ca": tmp_path / "ca.crt"}
    files["cert"].write_text(issued.certificate)
    files["key"].write_text(issued.key)
    files["ca"].write_text(ca.certificate)
    node = _node(tmp_path, "tls-test-secret", "--tls-cert", str(files["cert"]), "--tls-key", str(files["key"]), "--tls-ca", str(files["ca"]))
    node.start()
    try:
        info = lambda: httpx.get(node.url + "/info", verify=ssl.create_default_context(cafile=files["ca"]), timeout=10)  # noqa: E731

        def answers() -> bool:
            try:
                return info().status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(answers, 60, "the node to answer over TLS", interval=0.3)
        assert info().json()["tls"] == {"caFingerprint": fingerprint_pem(ca.certificate)}
        assert httpx.get(node.url + "/ca.crt", verify=ssl.create_default_context(cafile=files["ca"]), timeout=10).text == ca.certificate
        assert not (node.data_dir / "tls").exists()
        assert trio.run(_forward, node.url, ca.certificate) == 200
        with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            trio.run(_forward, node.url, create_ca("another").certificate)
    finally:
        node.kill()


async def _forward(url: str, ca_pem: str) -> int:
    """One GET through the client nodes forward and call agents with, trusting `ca_pem`."""
    http = ForwardingClient(timeout=30, ssl_context=peer_context(ca_pem))
    try:
        return (await http.request("GET", url, "/version", {}, b""))[0]
    finally:
        await http.aclose()


def test_a_restart_keeps_the_node_certificate_and_another_secret_is_refused(tmp_path: Path) -> None:
    node = _node(tmp_path)
    node.start()
    try:
        wait_for(node.ready, 60, "the node to be ready over TLS", interval=0.3)
        first = (node.data_dir / "tls" / "node.crt").read_text()
        assert node.stop() == 0
        node.start()
        wait_for(node.ready, 60, "the restarted node to be ready", interval=0.3)
        assert (node.data_dir / "tls" / "node.crt").read_text() == first
        assert node.stop() == 0
    finally:
        node.kill()
    for name in ("node.crt", "node.key"):  # the node must issue itself a new certificate from the store's CA
        (node.data_dir / "tls" / name).unlink()
    other = _node(tmp_path, "another-cluster-secret")
    other.raft, other.api_listen, other.url = node.raft, node.api_listen, node.url
    other.start()
    try:
        assert other.proc is not None
        code = other.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        other.kill()
        raise
    assert code != 0
    assert "cannot set up TLS: the cluster CA key in the store cannot be decrypted with this node's cluster secret" in other.log_text()

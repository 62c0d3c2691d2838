"""Rotating the cluster CA on three nodes in network namespaces while pods talk over VXLAN
(issue 26 item 4): `contivd ctl cluster ca rotate` through a follower; every node trusts old
and new, re-issues its certificate under the new CA without a restart, and trusts only the new
one after the grace period; forwarded writes over TLS keep working throughout; a client pinning
the old CA works during the grace period (told to re-pin) and is refused after it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cryptography import x509

from contivd.tls.fingerprint import fingerprint_pem
from tests.support.datapath_nodes import PODS_NET, assert_full_mesh, create_endpoints
from tests.support.nodes import Node, attach_pod, cluster_of_nodes, wait_until
from tests.tls.test_listeners import _leader_and_follower, ctl, probe

pytestmark = [
    pytest.mark.ovs,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("ovs-vswitchd") is None, reason="Open vSwitch is not installed"),
]
GRACE_SECONDS = 45  # long enough for the checks made during it on a loaded machine


def issued_by(node: Node, ca_pem: str) -> bool:
    certificate = x509.load_pem_x509_certificate((node.data / "tls" / "node.crt").read_bytes())
    try:
        certificate.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem.encode()))
    except (ValueError, TypeError, x509.InvalidSignature):
        return False
    return True


def served_fingerprints(client: Node, server: Node) -> list[str]:
    """The CAs `server` says it trusts (`/ca.crt`), current first, asked from `client`'s namespace."""
    status, text = probe(client, f"https://{server.host}:{server.api}/ca.crt", str(client.ca_file))
    assert status == 200, text
    end = "-----END CERTIFICATE-----"
    return [fingerprint_pem(pem.strip() + "\n" + end + "\n") for pem in text.split(end) if "BEGIN" in pem]


def create_endpoint(through: Node, name: str) -> int:
    request = {"TenantName": "default", "NetworkName": "pods", "EndpointID": name, "ConfigEP": {"Container": name}}
    return through.api_call("POST", "/plugin/createEndpoint", request)[0]


def test_the_cluster_ca_rotates_on_three_nodes_while_pods_talk(tmp_path: Path) -> None:
    with cluster_of_nodes(tmp_path, 3) as nodes:
        assert nodes[0].api_call("POST", *PODS_NET)[0] == 200
        endpoints = create_endpoints(nodes, "pods")
        for node, endpoint in zip(nodes, endpoints, strict=True):
            attach_pod(node, 0, endpoint)
        assert_full_mesh(nodes, 0, endpoints, "VXLAN")
        leader, follower = _leader_and_follower(nodes)
        old_ca = follower.ca_file.read_text()
        old = fingerprint_pem(old_ca)
        server = f"https://{follower.host}:{follower.api}"
        pinging = subprocess.Popen(
            ["ip", "netns", "exec", nodes[0].pods[0], "ping", "-i", "0.2", "-W", "1", endpoints[1]["ipAddress"]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            code, said = ctl(
                follower, "--server", server, "--ca-file", str(follower.ca_file), "cluster", "ca", "rotate", "--grace", f"{GRACE_SECONDS}s"
            )
            assert code == 0, said
            new = re.search(r"new cluster CA sha256 (\S+)", said).group(1)  # type: ignore[union-attr]
            assert new != old and f"the old CA ({old}) stays trusted until" in said and f"login --fingerprint {new}" in said, said
            rotated_at = time.monotonic()

            # Every node: trusts new and old, serves a certificate of the new CA, no restart.
            pids = [node.proc.pid for node in nodes]  # type: ignore[union-attr]
            for node in nodes:
                wait_until(lambda n=node: served_fingerprints(follower, n) == [new, old], 20, f"{node.name} trusting new and old", node)
                new_ca = node.ca_file.read_text()
                wait_until(lambda n=node, pem=new_ca: issued_by(n, pem), 20, f"{node.name}'s certificate under the new CA", node)
            assert [node.proc.pid for node in nodes] == pids  # type: ignore[union-attr]

            # Meanwhile: forwarded writes over TLS, a second rotation refused, a client pinned to the old CA told to re-pin.
            assert create_endpoint(follower, "during-grace") == 200
            code, said = ctl(follower, "--server", server, "--ca-file", str(follower.ca_file), "cluster", "ca", "rotate", "--grace", "30s")
            assert code != 0 and "grace period runs until" in said, said
            code, said = ctl(follower, "--server", server, "--fingerprint", old, "network", "ls")
            assert code == 0 and "pods" in said and f"Re-pin: --fingerprint {new}" in said, said
            code, said = ctl(follower, "--server", server, "--ca-file", str(follower.ca_file), "cluster", "ca", "rotate", "--grace", "1s")
            assert code != 0 and "grace must be between" in said, said

            # After the grace period: the new CA only.
            for node in nodes:
                wait_until(lambda n=node: served_fingerprints(follower, n) == [new], GRACE_SECONDS + 20, f"{node.name} dropping the old CA", node)
            assert time.monotonic() - rotated_at >= GRACE_SECONDS - 2
            code, said = ctl(follower, "--server", server, "--fingerprint", old, "network", "ls")
            assert code != 0 and f"not the pinned {old}" in said, said
            old_only = tmp_path / "old-ca.crt"
            old_only.write_text(old_ca)
            status, error = probe(follower, f"https://{leader.host}:{leader.api}/api/v1/tenants/", str(old_only))
            assert status == 0 and "CERTIFICATE_VERIFY_FAILED" in error, error
            assert create_endpoint(follower, "after-grace") == 200
            assert_full_mesh(nodes, 0, endpoints, "VXLAN after the rotation")
        finally:
            pinging.send_signal(signal.SIGINT)  # ping prints its summary on SIGINT
            summary = pinging.communicate(timeout=10)[0]
        sent, received = (int(n) for n in re.search(r"(\d+) packets transmitted, (\d+) received", summary).groups())  # type: ignore[union-attr]
        assert sent > 50 and received >= sent * 0.9, summary  # pods kept talking through it all

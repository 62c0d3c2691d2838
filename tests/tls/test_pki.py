"""The cluster CA, node certificates, the sealed CA key and fingerprints (pure functions), and
the TLS options' rules in the configuration."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from contivd.config import ConfigError, load
from contivd.tls.fingerprint import fingerprint_pem, normalise_pin
from contivd.tls.pki import KeyPair, PkiError, certificate_fits, create_ca, issue_node_certificate, open_key, seal_key

HOSTS = ("198.18.0.5", "127.0.0.1", "::1", "localhost", "node-a")


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return create_ca("unit")


def test_a_node_certificate_verifies_against_its_ca_for_each_of_its_hosts(ca: KeyPair, tmp_path: Path) -> None:
    node = issue_node_certificate(ca, "node-a", HOSTS)
    assert certificate_fits(node.certificate, ca.certificate, HOSTS)
    assert certificate_fits(node.certificate, ca.certificate, HOSTS[:2])
    assert not certificate_fits(node.certificate, ca.certificate, (*HOSTS, "198.18.0.6"))  # a new address: re-issued
    assert not certificate_fits(node.certificate, create_ca("other").certificate, HOSTS)  # another CA: re-issued
    (tmp_path / "node.crt").write_text(node.certificate)
    (tmp_path / "node.key").write_text(node.key)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "node.crt", tmp_path / "node.key")  # the pair hypercorn loads


def test_the_sealed_ca_key_opens_only_with_the_cluster_secret(ca: KeyPair) -> None:
    sealed = seal_key(ca.key, "the-cluster-secret")
    assert "PRIVATE KEY" not in sealed
    assert open_key(sealed, "the-cluster-secret") == ca.key
    with pytest.raises(PkiError, match="cannot be decrypted with this node's cluster secret"):
        open_key(sealed, "another-secret")


def test_fingerprints_and_pins(ca: KeyPair) -> None:
    found = fingerprint_pem(ca.certificate)
    assert len(found.split(":")) == 32 and found == found.upper()
    assert normalise_pin(found) == found
    assert normalise_pin("sha256:" + found.replace(":", "").lower()) == found
    with pytest.raises(ValueError, match="not a SHA-256 fingerprint"):
        normalise_pin("AB:CD")


def test_tls_options(tmp_path: Path) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("x")
    secret = {"cluster_secret": "a-long-enough-secret"}
    off_loopback = load({**secret, "api_listen": "198.18.0.5:9999", "agent_listen": "198.18.0.5:9090"}, None, {})
    assert off_loopback.uses_tls and off_loopback.api_url == "https://198.18.0.5:9999" and off_loopback.agent_url == "https://198.18.0.5:9090"
    assert "198.18.0.5" in off_loopback.tls_hosts and "127.0.0.1" in off_loopback.tls_hosts
    on_loopback = load({}, None, {})
    assert not on_loopback.uses_tls and on_loopback.api_url == "http://127.0.0.1:9999"
    assert load({**secret, "tls": "always"}, None, {}).api_url == "https://127.0.0.1:9999"
    with pytest.raises(ConfigError, match="--tls-ca, --tls-key missing"):
        load({"tls_cert": str(pem)}, None, {})
    with pytest.raises(ConfigError, match="needs a cluster secret"):
        load({"tls": "always"}, None, {})
    with pytest.raises(ConfigError, match="CONTIVD_TLS: 'sometimes' must be one of auto, always"):
        load({}, None, {"CONTIVD_TLS": "sometimes"})

"""The cluster CA and node certificates: pure functions over PEM texts (no files, no store).

Keys are ECDSA P-256: their handshakes cost a fraction of RSA's, which keeps TLS within the
API benchmark's budget. The CA's private key travels only encrypted (AES-GCM under a key
derived from the cluster secret with PBKDF2): every node that holds the cluster secret may
issue itself a certificate, and nobody else can — the same trust boundary as joining Raft.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
NODE_DAYS = 365
RENEW_BEFORE_DAYS = 30  # a node certificate this close to expiry is re-issued at start
KDF_ITERATIONS = 200_000  # the CA key's encryption survives in backups: slow down guessing a weak secret


class PkiError(ValueError):
    """A certificate or key cannot be used; the message says which and why."""


@dataclass(frozen=True)
class KeyPair:
    certificate: str  # PEM
    key: str  # PEM, PKCS#8, unencrypted


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


def create_ca(cluster: str) -> KeyPair:
    """A self-signed CA for one cluster, allowed to sign node certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "contivd"), x509.NameAttribute(NameOID.COMMON_NAME, f"contivd cluster CA {cluster}")]
    )
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key))


def _names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(h for h in hosts if h):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if host.isascii():  # a node name that is no DNS name is left out: peers call addresses
                names.append(x509.DNSName(host))
    return names


def issue_node_certificate(ca: KeyPair, node: str, hosts: Iterable[str]) -> KeyPair:
    """A server and client certificate for `node`, valid for `hosts` (addresses or DNS names)."""
    ca_cert = x509.load_pem_x509_certificate(ca.certificate.encode())
    ca_key = serialization.load_pem_private_key(ca.key.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise PkiError("the cluster CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "contivd"), x509.NameAttribute(NameOID.COMMON_NAME, node)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=NODE_DAYS))
        .add_extension(x509.SubjectAlternativeName(_names(hosts)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key))


def certificate_fits(certificate: str, ca_certificate: str, hosts: Iterable[str]) -> bool:
    """Whether a node certificate was issued by this CA, covers every host and is not due for renewal."""
    try:
        cert = x509.load_pem_x509_certificate(certificate.encode())
        ca = x509.load_pem_x509_certificate(ca_certificate.encode())
        cert.verify_directly_issued_by(ca)
        covered = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    fresh = cert.not_valid_after_utc - _now() > datetime.timedelta(days=RENEW_BEFORE_DAYS)
    return fresh and set(_names(hosts)) <= covered


def _cipher(secret: str, salt: bytes) -> AESGCM:
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=KDF_ITERATIONS)
    return AESGCM(kdf.derive(b"contivd-ca-key-v1\0" + secret.encode()))


def seal_key(key_pem: str, secret: str) -> str:
    """The CA key encrypted under the cluster secret: hex of salt (16) + nonce (12) + ciphertext."""
    salt, nonce = os.urandom(16), os.urandom(12)
    return (salt + nonce + _cipher(secret, salt).encrypt(nonce, key_pem.encode(), b"contivd-ca")).hex()


def open_key(sealed: str, secret: str) -> str:
    """The CA key back from `seal_key`; PkiError when the secret is not the one it was sealed with."""
    try:
        raw = bytes.fromhex(sealed)
        return _cipher(secret, raw[:16]).decrypt(raw[16:28], raw[28:], b"contivd-ca").decode()
    except (ValueError, InvalidTag):
        raise PkiError("the cluster CA key in the store cannot be decrypted with this node's cluster secret (another secret sealed it)") from None

"""A node's TLS files: the operator's (`--tls-cert/--tls-key/--tls-ca`) or issued by the cluster CA.

The cluster CA lives in the store (contivd.state.ca): its certificate in clear, its private
key sealed with the cluster secret (`pki.seal_key`). The first node that needs TLS creates it
(a transaction that only succeeds while the key is absent, so two nodes starting together
agree on one CA); every node then issues itself a certificate for its addresses, keeping its
own private key on its disk only (`<data dir>/tls/node.key`, mode 0600). A restart reuses the
files while they still fit, so a node restarts without waiting for a quorum.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from raftstore import StoreError

from ..state.ca import CLUSTER_CA, CaRecord
from .authority import bundle
from .fingerprint import fingerprint_pem
from .pki import KeyPair, certificate_fits, create_ca, issue_node_certificate, open_key, seal_key

if TYPE_CHECKING:  # annotations only: a follower of the store never loads PySyncObj
    from ..nodes import NodeStore

log = logging.getLogger("contivd.tls")
RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class TlsFiles:
    """The files hypercorn serves and the CA peers are verified against."""

    certificate: Path
    key: Path
    ca: Path

    @property
    def ca_pem(self) -> str:
        return self.ca.read_text()

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the CA certificate: what operators pin (`contivd ctl --fingerprint`)."""
        return fingerprint_pem(self.ca_pem)

    def client_context(self) -> ssl.SSLContext:
        return peer_context(self.ca_pem)


def peer_context(ca_pem: str) -> ssl.SSLContext:
    """For calls to peers: their certificate must chain to `ca_pem` (the cluster CA) and name
    the address called. HTTP/1.1 only: the forwarding client speaks h11."""
    context = ssl.create_default_context(cadata=ca_pem)
    context.set_alpn_protocols(["http/1.1"])
    return context


def _write(path: Path, text: str, mode: int) -> None:
    """Whole or not at all: a temporary file with its final mode, renamed over the old one."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


async def _cluster_ca(store: NodeStore, secret: str, creator: str) -> CaRecord:
    """The cluster CA record from the store, created when there is none; waits for a leader."""
    waiting_logged = False
    while True:
        try:
            held = await CLUSTER_CA.get(store)
            if held is not None:
                return held.record
            ca = create_ca(creator)
            record = CaRecord(ca.certificate, seal_key(ca.key, secret), creator)
            if (await store.txn([CLUSTER_CA.absent()], [CLUSTER_CA.put(record)])).succeeded:
                log.info("created the cluster CA (fingerprint sha256 %s)", fingerprint_pem(ca.certificate))
                return record
        except StoreError as exc:
            if not waiting_logged:
                log.info("waiting for the store to read the cluster CA (TLS listeners start after it): %s", exc)
                waiting_logged = True
            await trio.sleep(RETRY_SECONDS)


async def issue_files(files: TlsFiles, record: CaRecord, secret: str, node: str, hosts: tuple[str, ...], now: float | None = None) -> None:
    """Make `files` trust the record's CAs (current first) and hold a certificate of its current
    CA for `hosts`, issuing one when the present one is not; raises PkiError when the CA key
    cannot be opened with `secret`."""
    present = files.certificate.is_file() and files.key.is_file()
    if not (present and certificate_fits(files.certificate.read_text(), record.certificate, hosts)):
        ca = KeyPair(record.certificate, open_key(record.sealed_key, secret))
        issued = await trio.to_thread.run_sync(issue_node_certificate, ca, node, hosts)
        files.certificate.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write(files.key, issued.key, 0o600)
        _write(files.certificate, issued.certificate, 0o644)
        log.info("issued this node's certificate for %s (cluster CA sha256 %s)", ", ".join(hosts), fingerprint_pem(record.certificate))
    _write(files.ca, bundle(record.trusted(time.time() if now is None else now)), 0o644)


async def issued_tls_files(store: NodeStore, directory: Path, secret: str, node: str, hosts: tuple[str, ...]) -> TlsFiles:
    """This node's files under `directory`, issued by the cluster CA for `hosts` when missing
    or no longer fitting; raises PkiError when the store's CA cannot be opened with `secret`.
    A restart reuses fitting files without the store (a node restarts without a quorum)."""
    files = TlsFiles(directory / "node.crt", directory / "node.key", directory / "ca.crt")
    present = all(path.is_file() for path in (files.certificate, files.key, files.ca))
    if present and certificate_fits(files.certificate.read_text(), files.ca_pem, hosts):
        return files
    await issue_files(files, await _cluster_ca(store, secret, node), secret, node, hosts)
    return files

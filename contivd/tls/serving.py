"""The node's TLS as its listeners and clients use it right now, following CA rotations.

Hypercorn builds a listener's SSLContext once (`Config.create_ssl_context`); the contexts are
kept here, and a new certificate is loaded into them in place (`load_cert_chain`), which every
later handshake uses: a rotation restarts no listener and drops no connection. Clients (the
forwarding client, the status page's peer client) are handed a fresh context trusting the
current set of CAs. With the cluster CA (not operator files) the node watches the CA record:
on a rotation it trusts old and new, issues itself a certificate under the new CA, and when the
grace period ends it trusts the new one only.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import time
from typing import TYPE_CHECKING, Protocol

import trio
from hypercorn.config import Config as HypercornConfig

from ..state.ca import CLUSTER_CA, CaRecord
from .fingerprint import fingerprint_pem
from .material import TlsFiles, issue_files, peer_context

if TYPE_CHECKING:  # annotations only: a follower of the store never loads PySyncObj
    from ..nodes import NodeStore

log = logging.getLogger("contivd.tls")


class TlsClient(Protocol):
    ssl_context: ssl.SSLContext | None


class ServingTls:
    """One node's TLS files and every context made from them."""

    def __init__(self, files: TlsFiles, issued: bool):
        self.files = files
        self.issued = issued  # by the cluster CA (follows rotations); False: the operator's files
        self._server_contexts: list[ssl.SSLContext] = []
        self._clients: list[TlsClient] = []
        self.ca_pem = files.ca_pem  # the trusted CAs, the current one first

    @property
    def fingerprint(self) -> str:
        """The current CA's SHA-256 fingerprint: what operators pin."""
        return fingerprint_pem(self.ca_pem)

    def client_context(self) -> ssl.SSLContext:
        return peer_context(self.ca_pem)

    def attach(self, client: TlsClient) -> None:
        """Keep `client`'s context trusting the current CAs."""
        client.ssl_context = self.client_context()
        self._clients.append(client)

    def hypercorn_config(self, config: HypercornConfig) -> HypercornConfig:
        """`config` serving this node's certificate, reloadable in place."""
        config.certfile, config.keyfile = str(self.files.certificate), str(self.files.key)
        build = config.create_ssl_context

        def create() -> ssl.SSLContext | None:
            context = build()
            if context is not None:
                self._server_contexts.append(context)
            return context

        config.create_ssl_context = create  # type: ignore[method-assign]
        return config

    def reload(self) -> None:
        """Serve the files' certificate from the next handshake on, and trust the files' CAs."""
        self.ca_pem = self.files.ca_pem
        for context in self._server_contexts:
            context.load_cert_chain(str(self.files.certificate), str(self.files.key))
        for client in self._clients:
            client.ssl_context = self.client_context()

    async def follow_rotations(self, store: NodeStore, secret: str, node: str, hosts: tuple[str, ...]) -> None:
        """Apply every change of the CA record, and the end of each grace period, to this node."""
        if not self.issued:
            return
        send, receive = trio.open_memory_channel[None](1)

        async def watch() -> None:
            async for _ in CLUSTER_CA.changes(store):
                with contextlib.suppress(trio.WouldBlock):
                    send.send_nowait(None)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            applied: tuple[str, ...] = ()
            while True:
                wake_at = float("inf")
                record = CLUSTER_CA.get_nowait(store)
                if record is not None:
                    now = time.time()
                    wake_at = record.next_change(now) or wake_at
                    if record.trusted(now) != applied:
                        await self._follow(record, secret, node, hosts, now)
                        applied = record.trusted(now)
                with trio.move_on_after(min(max(wake_at - time.time(), 0.0), 3600.0)):
                    await receive.receive()

    async def _follow(self, record: CaRecord, secret: str, node: str, hosts: tuple[str, ...], now: float) -> None:
        trusted = record.trusted(now)
        await issue_files(self.files, record, secret, node, hosts, now)
        self.reload()
        also = f", also trusting {len(trusted) - 1} retired CA(s) until their grace period ends" if len(trusted) > 1 else ""
        log.info("TLS follows the cluster CA sha256 %s%s", fingerprint_pem(record.certificate), also)

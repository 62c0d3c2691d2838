"""Which TLS server certificates `contivd ctl` trusts, and what it says when it trusts none.

contivd issues node certificates from a cluster CA that no system trust store knows. An
operator either hands ctl that CA (`--ca-file`, e.g. a node's `<data dir>/tls/ca.crt`) or pins
its SHA-256 fingerprint (`--fingerprint`, as `contivd ctl cluster status` and the installer
print it): ctl then fetches the CA from the server's public `/ca.crt` — no token is sent on that
unverified connection — and trusts it only if its fingerprint is the pinned one. Every request
after that verifies the server fully (chain and address) against that CA.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import click
import httpx

from ..tls.fingerprint import fingerprint_pem, normalise_pin

CA_PATH = "/ca.crt"
FETCH_TIMEOUT_SECONDS = 10.0


class TrustError(Exception):
    """The server cannot be trusted as asked; the message says why and what to do."""


def _server_ca(server: str) -> str:
    """The server's CA certificate, read without verification (checked by the caller)."""
    try:
        answer = httpx.get(server.rstrip("/") + CA_PATH, verify=False, timeout=FETCH_TIMEOUT_SECONDS)  # noqa: S501 - pinned below
    except httpx.HTTPError as exc:
        raise TrustError(f"cannot read the CA certificate of {server}: {exc}") from None
    if answer.status_code != 200 or "BEGIN CERTIFICATE" not in answer.text:
        raise TrustError(f"{server}{CA_PATH} answered HTTP {answer.status_code} without a CA certificate (is it a contivd serving TLS?)")
    return answer.text


def _certificates(pem: str) -> list[str]:
    """Each certificate of a PEM bundle."""
    end = "-----END CERTIFICATE-----"
    return [part.strip() + "\n" + end + "\n" for part in pem.split(end) if "BEGIN CERTIFICATE" in part]


def verification(server: str, ca_file: str | None, fingerprint: str | None, insecure: bool) -> bool | ssl.SSLContext:
    """httpx's `verify` for these flags: False (--insecure), a context trusting one CA, or True (system CAs)."""
    if insecure:
        return False
    if ca_file is not None:
        try:
            return ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TrustError(f"--ca-file {ca_file}: not a readable PEM CA certificate ({exc})") from None
    if fingerprint is not None:
        try:
            pin = normalise_pin(fingerprint)
        except ValueError as exc:
            raise TrustError(f"--fingerprint: {exc}") from None
        if not server.startswith("https://"):
            raise TrustError(f"--fingerprint pins a TLS certificate, but {server} is not an https:// URL")
        ca = _server_ca(server)
        found = [fingerprint_pem(pem) for pem in _certificates(ca)]  # during a CA rotation: the new CA, then the old
        if pin not in found:
            raise TrustError(f"{server} presents a CA with SHA-256 fingerprint {found[0]}, not the pinned {pin}: refusing to talk to it")
        if found[0] != pin:
            click.echo(
                f"warning: the cluster CA was rotated; {pin} is trusted only until the grace period ends. "
                f"Re-pin: --fingerprint {found[0]} (contivd ctl login --fingerprint {found[0]})",
                err=True,
            )
        return ssl.create_default_context(cadata=ca)
    return True


def untrusted_message(server: str, error: str) -> str:
    """What to tell a user whose client did not trust the server: the CA's fingerprint to check."""
    try:
        found = fingerprint_pem(_server_ca(server))
    except TrustError as exc:
        return f"contivd at {server} presents a certificate this client does not trust ({error}); {exc}"
    return (
        f"contivd at {server} presents a certificate this client does not trust ({error}). "
        f"Its CA's SHA-256 fingerprint is {found}: if `contivd ctl cluster status` on a node (or the install output) "
        f"shows the same, re-run with --fingerprint {found} (or --ca-file with a node's {Path('/var/lib/contivd/tls/ca.crt')})."
    )

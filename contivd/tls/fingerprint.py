"""SHA-256 fingerprints of certificates, as `openssl x509 -fingerprint -sha256` prints them.

Standard library only: `contivd ctl` pins a CA by this fingerprint and imports nothing else of
the daemon's TLS code.
"""

from __future__ import annotations

import hashlib
import ssl


def fingerprint_der(der: bytes) -> str:
    """`AB:CD:…` (32 upper-case hex pairs) of a DER certificate."""
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def fingerprint_pem(pem: str) -> str:
    """The fingerprint of the first certificate in a PEM text."""
    return fingerprint_der(ssl.PEM_cert_to_DER_cert(pem))


def normalise_pin(pin: str) -> str:
    """An operator's pin in the canonical form; accepts `sha256:`/`SHA256 ` prefixes, lower case,
    and hex with or without colons. Raises ValueError for anything that is not 64 hex digits."""
    text = pin.strip()
    for prefix in ("sha256:", "sha256 ", "sha256="):
        if text.lower().startswith(prefix):
            text = text[len(prefix) :].strip()
    digits = text.replace(":", "").upper()
    if len(digits) != 64 or any(c not in "0123456789ABCDEF" for c in digits):
        raise ValueError(f"{pin!r} is not a SHA-256 fingerprint (64 hex digits, colons optional)")
    return ":".join(digits[i : i + 2] for i in range(0, 64, 2))

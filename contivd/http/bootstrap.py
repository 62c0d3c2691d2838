"""Minting a token as the node itself: how root gets the first admin token.

Operators' tokens are created by admins; the first admin token has to come from somewhere
else. Root on a node can read the node's configuration, hence the cluster secret, so it can
make the one call a node can: a signed `POST /api/v1/auth/tokens/<name>/` (role node, allowed
everything). `contivd auth bootstrap` and packaging/install.sh use this; the tests use it to
get tokens for their clients.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import httpx

from . import auth
from .errors import TYPED_ERRORS_HEADER


class BootstrapError(Exception):
    """The node refused or could not be reached; the message says which."""


def tokens_path(name: str) -> str:
    return f"/api/v1/auth/tokens/{name}/"


def mint_token(
    api_url: str, secret: str | None, name: str, role: str, ttl: float | None = None, who: str = "bootstrap", ca_file: Path | None = None
) -> dict[str, Any]:
    """Create token `name` with `role` through the node at `api_url`, signed with `secret` (without
    one, the node must be reached on loopback, where callers are the local administrator). An
    https:// node is verified against `ca_file` (the cluster CA the node's certificate chains to).
    The answer holds the token (`token`), shown this once."""
    path = tokens_path(name)
    body = json.dumps({"role": role, "ttl": ttl}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json", TYPED_ERRORS_HEADER: "typed", auth.PRINCIPAL_HEADER: who}
    if secret:
        headers[auth.SIGNATURE_HEADER] = auth.sign(secret, "POST", path, body)
    try:
        verify = ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else True
        answer = httpx.post(api_url.rstrip("/") + path, content=body, headers=headers, timeout=30.0, verify=verify)
    except (httpx.HTTPError, OSError, ssl.SSLError) as exc:
        raise BootstrapError(f"cannot reach contivd at {api_url}: {exc}") from None
    try:
        value = answer.json()
    except ValueError:
        value = None
    if answer.status_code != 200 or not isinstance(value, dict):
        message = value.get("error") if isinstance(value, dict) else answer.text.strip()
        raise BootstrapError(f"contivd at {api_url} refused to create token {name!r}: HTTP {answer.status_code} {message}")
    return value

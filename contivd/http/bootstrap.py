"""Minting a token as root on a node: how the first admin token comes to be.

Operators' tokens are created by admins; the first admin token has to come from somewhere
else. Root on a node is admin on the node's root-only API socket, so it can simply ask there;
root can also read the node's configuration, hence the cluster secret, and make the one call
a node can over TCP: a signed `POST /api/v1/auth/tokens/<name>/` (role node, allowed
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
    api_url: str,
    secret: str | None,
    name: str,
    role: str,
    ttl: float | None = None,
    who: str = "bootstrap",
    ca_file: Path | None = None,
    socket: Path | None = None,
) -> dict[str, Any]:
    """Create token `name` with `role` through the node's API socket `socket` (as root: no
    signature needed), else at `api_url`, signed with `secret`. The answer holds the token
    (`token`), shown this once. `ca_file` verifies an https:// node (its cluster CA)."""
    path = tokens_path(name)
    body = json.dumps({"role": role, "ttl": ttl}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json", TYPED_ERRORS_HEADER: "typed"}
    if socket is not None:
        where, url, transport = f"unix:{socket}", "http://contivd" + path, httpx.HTTPTransport(uds=str(socket))
    else:
        where, url, transport = api_url, api_url.rstrip("/") + path, None
        if not secret:
            raise BootstrapError(f"no cluster secret to sign with, and no API socket: over TCP ({api_url}) a token needs the secret")
        headers[auth.SIGNATURE_HEADER] = auth.sign(secret, "POST", path, body)
        headers[auth.PRINCIPAL_HEADER] = who
    try:
        verify = ssl.create_default_context(cafile=ca_file) if ca_file is not None and socket is None else True
        with httpx.Client(transport=transport, verify=verify, timeout=30.0) as http:
            answer = http.post(url, content=body, headers=headers)
    except (httpx.HTTPError, OSError) as exc:  # OSError: the CA file is not there (yet)
        raise BootstrapError(f"cannot reach contivd at {where}: {exc}") from None
    try:
        value = answer.json()
    except ValueError:
        value = None
    if answer.status_code != 200 or not isinstance(value, dict):
        message = value.get("error") if isinstance(value, dict) else answer.text.strip()
        raise BootstrapError(f"contivd at {where} refused to create token {name!r}: HTTP {answer.status_code} {message}")
    return value

"""The CLI side of the import's one write: POST the Contiv tree to the leader's import route.

The node named by --server may be a follower: it answers 503 with the leader's API URL, and
the tree is sent there once. Errors become MigrationError with the server's message.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

import httpx

from .commit import IMPORT_PATH
from .source import MigrationError

IMPORT_TIMEOUT_SECONDS = 300.0  # planning and one transaction of a whole installation on the leader


def submit_import(
    server: str,
    values: Mapping[str, str],
    force: bool,
    token: str | None = None,
    ca_file: str | None = None,
    via: tuple[str, httpx.BaseTransport | None] | None = None,
) -> dict[str, Any]:
    """Send the tree to the leader; its answer (`revision`, `counts`). `ca_file`: the CA an
    https:// server is verified against (the cluster CA), else the system's. `via`: the base URL
    and transport that reach `server` (e.g. a node's API socket, where root needs no token)."""
    headers = {"Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    body = {"values": dict(values), "force": force}
    target = server.rstrip("/")
    base_url, transport = via if via is not None else (target, None)
    for _ in range(2):
        try:
            with httpx.Client(
                transport=transport, timeout=IMPORT_TIMEOUT_SECONDS, verify=ssl.create_default_context(cafile=ca_file) if ca_file else True
            ) as http:
                answer = http.post(base_url + IMPORT_PATH, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise MigrationError(f"cannot reach contivd at {target}: {exc or type(exc).__name__}") from None
        try:
            reply = answer.json()
        except ValueError:
            reply = {"error": answer.text.strip() or f"HTTP {answer.status_code}"}
        if answer.status_code == 200:
            return dict(reply)
        leader = reply.get("leader") if isinstance(reply, dict) else None
        if answer.status_code == 503 and isinstance(leader, str) and leader.rstrip("/") != target:
            target = base_url = leader.rstrip("/")  # the leader's TCP API: root's socket is this node's only
            transport = None
            continue
        message = reply.get("error") if isinstance(reply, dict) else None
        raise MigrationError(f"contivd at {target} refused the import (HTTP {answer.status_code}): {message or answer.text.strip()}")
    raise MigrationError(f"contivd at {target} is not the leader either; retry when the cluster has a leader")

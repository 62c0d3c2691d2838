"""The client side of `contivd ctl cluster snapshot save FILE`.

Streams the leader's snapshot (any node named by --server answers 503 with the leader's URL;
the request is sent there once) into a temporary file beside FILE, created 0600 (the backup
holds the whole store), fsyncs it, checks it completely (end mark, checksum, every record:
raftstore's `read_backup_file`) and only then renames it over FILE and fsyncs the directory.
An interrupted or damaged download therefore never leaves a FILE behind; the temporary file
is removed on every failure.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import httpx

from raftstore import BackupFileError, BackupHeader, read_backup_file

from ..ctl.client import http_target
from .protocol import SNAPSHOT_PATH

SAVE_TIMEOUT_SECONDS = 300.0  # between two chunks of the stream, not for the whole file
CHUNK_BYTES = 1 << 20


class SnapshotSaveError(Exception):
    """The snapshot could not be saved; the message says why (nothing was written to FILE)."""


def _error_text(answer: httpx.Response) -> tuple[str, str | None]:
    try:
        body = answer.json()
    except ValueError:
        return answer.text.strip() or f"HTTP {answer.status_code}", None
    if not isinstance(body, dict):
        return str(body), None
    leader = body.get("leader")
    return str(body.get("error") or f"HTTP {answer.status_code}"), leader if isinstance(leader, str) else None


def _download(server: str, headers: dict[str, str], partial: Path, verify: bool | ssl.SSLContext) -> str | None:
    """Stream the snapshot of `server` (a URL or `unix:/path`) into `partial`; the leader's URL
    if this node is not the leader."""
    base_url, transport = http_target(server)
    url = base_url + SNAPSHOT_PATH
    with (
        httpx.Client(transport=transport, timeout=SAVE_TIMEOUT_SECONDS, verify=verify) as http,
        http.stream("GET", url, headers=headers) as answer,
    ):
        if answer.status_code != 200:
            answer.read()
            message, leader = _error_text(answer)
            if answer.status_code == 503 and leader:
                return leader
            raise SnapshotSaveError(f"{server}{SNAPSHOT_PATH} refused the snapshot (HTTP {answer.status_code}): {message}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            for chunk in answer.iter_bytes(CHUNK_BYTES):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
    return None


def save_snapshot(server: str, token: str | None, path: Path, verify: bool | ssl.SSLContext = True) -> BackupHeader:
    """Save the cluster's snapshot to `path` atomically (0600); its header (revision, keys …).
    `verify`: how https:// servers are verified (ctl's --ca-file/--fingerprint context)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    target = server.rstrip("/")
    try:
        for _ in range(2):
            try:
                leader = _download(target, headers, partial, verify)
            except httpx.HTTPError as exc:
                raise SnapshotSaveError(f"snapshot from {target} failed: {exc or type(exc).__name__}") from None
            except OSError as exc:
                raise SnapshotSaveError(f"cannot write {partial}: {exc.strerror}") from None
            if leader is None:
                break
            target = leader.rstrip("/")
        else:
            raise SnapshotSaveError(f"{target} is not the leader either; retry once the cluster has a leader")
        try:
            header, _ = read_backup_file(partial)
        except BackupFileError as exc:
            raise SnapshotSaveError(f"the snapshot received from {target} is unsound, not saved: {exc}") from None
        os.replace(partial, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return header
    finally:
        partial.unlink(missing_ok=True)

"""A single node's own cluster secret, when the operator configured none.

The Raft port listens on loopback by default, and a Raft port without a secret takes any
process that connects for a read-only member: every local user could read the whole store
and write to it through the leader (a token record, a network), whatever the API allows.
So a node always runs with a secret: the configured one (a cluster with peers must share it,
config.load insists), else one generated on the first start and kept in the data dir (0600,
root). To grow such a node into a cluster, give the others that file's content as
`cluster_secret` (docs/operations.md, "Changing the voters").
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

from .config import Config

SECRET_FILE = "cluster-secret"


def generated_secret_path(config: Config) -> Path:
    return config.data_dir / SECRET_FILE


def _read_or_create(path: Path) -> str:
    """The secret in `path`, created first (exclusively, 0600) when missing."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        secret = path.read_text().strip()
        if len(secret) < 8:
            raise ValueError(f"{path} does not hold a cluster secret (at least 8 characters); remove it to have a new one generated") from None
        return secret
    secret = secrets.token_urlsafe(32)
    with os.fdopen(descriptor, "w") as file:
        file.write(secret + "\n")
        file.flush()
        os.fsync(file.fileno())
    return secret


def with_cluster_secret(config: Config) -> Config:
    """`config` with a secret: the configured one, else the node's own generated one."""
    if config.cluster_secret:
        return config
    return dataclasses.replace(config, cluster_secret=_read_or_create(generated_secret_path(config)))

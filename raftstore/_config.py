"""Store configuration, validated once at the boundary."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import StoreConfigError
from ._wire import CURRENT_VERSION, WIRE_VERSIONS


def parse_address(text: str, what: str) -> tuple[str, int]:
    """Split 'host:port' (or '[v6]:port') and check the port; raise StoreConfigError otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise StoreConfigError(f"{what} {text!r} must be host:port with a port from 1 to 65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """True when every address `host` names is a loopback address."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def _check_common(addresses: list[str], secret: str | None, request_timeout: float, wire_format: int, history_limit: int) -> None:
    """What voters and followers of the store both need: a secret for any remote address."""
    if not secret:
        remote = [a for a in addresses if not is_loopback(parse_address(a, "raft address")[0])]
        if remote:
            raise StoreConfigError(
                f"refusing non-loopback raft address(es) {', '.join(remote)} without a cluster secret: "
                "anyone reaching the raft port could join the cluster and rewrite the store"
            )
    elif len(secret) < 8:
        raise StoreConfigError("the cluster secret must be at least 8 characters")
    if request_timeout <= 0:
        raise StoreConfigError("request_timeout must be positive")
    if wire_format not in WIRE_VERSIONS:
        raise StoreConfigError(f"wire_format must be one of {', '.join(map(str, WIRE_VERSIONS))}, not {wire_format}")
    if history_limit < 1:
        raise StoreConfigError("history_limit must be at least 1")


@dataclass(frozen=True)
class StoreConfig:
    """How one store member runs.

    listen: this member's Raft address ('host:port'); None for a read-only member, which
        connects out to the voters and never accepts connections.
    peers: Raft addresses of the other voters. Only a bootstrap hint: once the cluster has
        taken a snapshot, the replicated member list in it wins (PySyncObj issue #133).
    secret: shared cluster secret. Every Raft frame is encrypted and authenticated with it
        (AES-GCM) before it is decoded; required unless every address is loopback.
    data_dir: journal and snapshot location; None keeps everything in memory (tests only).
    fsync: flush the journal to disk before a write is acknowledged or an AppendEntries is
        answered, and fsync term/vote. Off trades power-loss durability for latency;
        SIGKILL never loses acknowledged writes either way (the page cache survives it).
    request_timeout: seconds a write or linearizable read may wait for a leader and quorum.
    wire_format: the newest Raft wire format this member speaks (it also speaks every older
        one); pin the previous version during a rolling upgrade (docs/raftstore.md).
    """

    listen: str | None = "127.0.0.1:9002"
    peers: tuple[str, ...] = ()
    secret: str | None = None
    data_dir: Path | None = None
    fsync: bool = True
    request_timeout: float = 5.0
    history_limit: int = 10_000
    compaction_min_entries: int = 20_000
    compaction_min_seconds: float = 60.0
    wire_format: int = CURRENT_VERSION
    readonly: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "readonly", self.listen is None)
        addresses: list[str] = list(self.peers)
        if self.listen is not None:
            addresses.append(self.listen)
        if self.readonly and not self.peers:
            raise StoreConfigError("a read-only member (no listen address) needs the voters' addresses in peers")
        seen: set[tuple[str, int]] = set()
        for address in addresses:
            parsed = parse_address(address, "raft address")
            if parsed in seen:
                raise StoreConfigError(f"raft address {address!r} is listed twice (peers must not include listen)")
            seen.add(parsed)
        _check_common(addresses, self.secret, self.request_timeout, self.wire_format, self.history_limit)


@dataclass(frozen=True)
class FollowerConfig:
    """How a follower of the store runs (not a Raft member; docs/raftstore.md).

    voters: the voters' Raft addresses; the follower prefers one by a hash of its name (so
        followers spread over the voters) and moves to the next on failure.
    name: this node's name (logs, the spread).
    secret: the cluster secret, as for the voters.
    heartbeat_timeout: seconds without a frame from the voter before moving to another.
    history_limit: change events kept for this follower's own watches.
    """

    voters: tuple[str, ...]
    name: str
    secret: str | None = None
    request_timeout: float = 5.0
    heartbeat_timeout: float = 3.0
    history_limit: int = 10_000
    wire_format: int = CURRENT_VERSION

    def __post_init__(self) -> None:
        if not self.voters:
            raise StoreConfigError("a follower of the store needs the voters' addresses")
        if not self.name:
            raise StoreConfigError("a follower of the store needs a name")
        if len(set(self.voters)) != len(self.voters):
            raise StoreConfigError("a voter address is listed twice")
        for address in self.voters:
            parse_address(address, "voter address")
        _check_common(list(self.voters), self.secret, self.request_timeout, self.wire_format, self.history_limit)
        if self.heartbeat_timeout <= 1.0:
            raise StoreConfigError("heartbeat_timeout must exceed the voters' heartbeat period of 1 s")

"""Dropped Raft peers are logged, but a peer redialling with a wrong secret cannot flood the log."""

from __future__ import annotations

import logging

import pytest

from raftstore._transport import DROP_LOG_SECONDS, _DropLog


def test_one_warning_per_kind_per_period_then_the_count_of_the_quiet_ones(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    drops = _DropLog(clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="raftstore.transport"):
        for _ in range(20):
            drops.warn("wire", "raft peer %s dropped: %s", "127.0.0.1:5", "forged")
        drops.warn("stranger", "raft peer %s: not a member", "127.0.0.1:6")
        now[0] += DROP_LOG_SECONDS
        drops.warn("wire", "raft peer %s dropped: %s", "127.0.0.1:7", "forged")
    assert [r.getMessage() for r in caplog.records] == [
        "raft peer 127.0.0.1:5 dropped: forged",
        "raft peer 127.0.0.1:6: not a member",
        f"raft peer 127.0.0.1:7 dropped: forged (19 more like it in the last {DROP_LOG_SECONDS:g} s not logged)",
    ]

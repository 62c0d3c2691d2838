"""Request ids (what makes a retried proposal exactly-once) are unique within a process and
across processes, a forked child included, without a syscall per write."""

from __future__ import annotations

import os

from raftstore._commands import new_request_id


def test_ids_are_unique_and_keep_the_uuid_shape() -> None:
    ids = [new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_a_forked_child_draws_its_own_ids() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, to the parent
        os.write(write_end, new_request_id().encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    child = os.read(read_end, 64).decode()
    os.close(read_end)
    parent = new_request_id()
    assert child != parent and child[:16] != parent[:16]  # another prefix, not just the next count

"""The Consensus boundary: Store's side of it loads no PySyncObj, and a member's status reads right."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from raftstore._node import consensus_status

RAFTSTORE = Path(__file__).resolve().parents[2] / "raftstore"


def _imports(module: str) -> set[str]:
    """Modules `raftstore.<module>` imports: raftstore's as `_name`, others by their top package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((RAFTSTORE / f"{module}.py").read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.ImportFrom):
            found.update(alias.name for alias in node.names)
    return found


def _reachable(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(m for m in _imports(name) if (RAFTSTORE / f"{m}.py").is_file())
        seen.update(m for m in _imports(name) if not (RAFTSTORE / f"{m}.py").is_file())
    return seen


def test_the_consensus_boundary_loads_neither_pysyncobj_nor_the_raft_node() -> None:
    """A follower of the store (issue 27) implements Consensus without PySyncObj."""
    reached = _reachable("_consensus")
    assert not reached & {"pysyncobj", "_node", "_durability", "_propagation", "_pysyncobj_compat", "_transport"}
    assert {"_fsm", "_disk_space"} <= reached  # the walk follows raftstore's own imports


@pytest.mark.parametrize(
    "module", ["_base", "memory", "_protocol", "_fsm", "_commands", "_keys", "_types", "_image", "_backup", "_errors", "_config"]
)
def test_the_store_layer_imports_no_pysyncobj(module: str) -> None:
    """docs/raftstore.md "Code layout": PySyncObj stays below the Consensus boundary."""
    assert "pysyncobj" not in _reachable(module)


def test_status_of_a_leader_with_one_voter_unreachable() -> None:
    raw = {
        "state": 2,
        "raft_term": 7,
        "commit_idx": 41,
        "last_applied": 40,
        "log_len": 12,
        "partner_node_status_server_127.0.0.1:9003": 0,
        "partner_node_status_server_127.0.0.1:9002": 2,
        "readonly_nodes_count": 3,
        "has_quorum": True,
    }
    status = consensus_status(raw, wire_formats=(("127.0.0.1:9002", 2),), down_since={"127.0.0.1:9003": 5.0})
    assert (status.role, status.term, status.commit_index, status.last_applied, status.log_length) == ("leader", 7, 41, 40, 12)
    assert status.other_voters == (("127.0.0.1:9002", True), ("127.0.0.1:9003", False))
    assert (status.readonly_members, status.has_quorum) == (3, True)
    assert status.wire_formats == (("127.0.0.1:9002", 2),)
    assert status.down_since == {"127.0.0.1:9003": 5.0}


def test_status_of_a_member_that_knows_nothing_yet() -> None:
    """PySyncObj's status read may fail (a racing tick) and come back empty."""
    status = consensus_status({}, wire_formats=(), down_since={})
    assert (status.role, status.term, status.other_voters, status.has_quorum) == ("follower", 0, (), False)

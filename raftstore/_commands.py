"""Versioned log commands: JSON text, so the log never carries pickled objects of ours.

Every command is `{"v": 1, "op": ..., ...}`. Values travel as canonical JSON text so the state
machine compares and stores them without re-encoding. Writes carry a request id (`rid`) that
the state machine deduplicates, which makes client retries after a leader change exactly-once.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from typing import Any

from ._errors import InvalidValueError
from ._keys import validate_key, validate_prefix
from ._types import Compare, Delete, DeletePrefix, Op, Put

COMMAND_VERSION = 1
MAX_VALUE_BYTES = 4 * 1024 * 1024
# Built once: json.dumps with non-default options constructs an encoder per call (~2 µs, ten
# times per 10-key transaction).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def canonical_json(value: Any, *, key: str = "?") -> str:
    """Encode `value` the one way the store compares and persists it."""
    try:
        text = _CANONICAL.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"value for {key!r} is not JSON-serialisable: {exc}") from None
    if len(text) > MAX_VALUE_BYTES:
        raise InvalidValueError(f"value for {key!r} is {len(text)} bytes of JSON; the limit is {MAX_VALUE_BYTES}")
    return text


class _RequestIds:
    """Ids that make a retried proposal idempotent: unique per process by a random prefix
    (drawn again in a forked child), then a counter. A uuid4 per write cost a getrandom
    syscall and a UUID object on every proposal's path; this is the same 32 hex digits."""

    def __init__(self) -> None:
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._prefix, self._counter = os.urandom(8).hex(), itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"


_REQUEST_IDS = _RequestIds()


def new_request_id() -> str:
    return _REQUEST_IDS.next()


def encode(command: dict[str, Any]) -> str:
    return _COMPACT.encode({"v": COMMAND_VERSION, **command})


def encode_batch(encoded: list[str]) -> str:
    """One log entry carrying several encoded commands, applied in order (group commit)."""
    return f'{{"v":{COMMAND_VERSION},"op":"batch","cmds":[{",".join(encoded)}]}}'


def _encode_compare(compare: Compare) -> dict[str, Any]:
    validate_key(compare.key)
    if compare.check == "absent":
        return {"key": compare.key, "check": "absent"}
    if compare.check == "mod_revision":
        return {"key": compare.key, "check": "mod_revision", "value": int(compare.value)}
    if compare.check == "value":
        return {"key": compare.key, "check": "value", "value": canonical_json(compare.value, key=compare.key)}
    raise InvalidValueError(f"unknown compare check {compare.check!r}")


def _encode_op(op: Op) -> dict[str, Any]:
    if isinstance(op, Put):
        validate_key(op.key)
        return {"op": "put", "key": op.key, "value": canonical_json(op.value, key=op.key), "lease": op.lease}
    if isinstance(op, Delete):
        return {"op": "delete", "key": validate_key(op.key)}
    if isinstance(op, DeletePrefix):
        return {"op": "delete_prefix", "prefix": validate_prefix(op.prefix)}
    raise InvalidValueError(f"transaction op must be Put, Delete or DeletePrefix, got {type(op).__name__}")


def txn_command(compares: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op]) -> dict[str, Any]:
    """Validate and encode a transaction; raises before anything is proposed."""
    return {
        "op": "txn",
        "rid": new_request_id(),
        "if": [_encode_compare(c) for c in compares],
        "then": [_encode_op(o) for o in success],
        "else": [_encode_op(o) for o in failure],
    }

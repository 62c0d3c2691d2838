"""Key hierarchy rules, checked before anything is proposed so bad keys never reach the log."""

from __future__ import annotations

import re

from ._errors import InvalidKeyError

MAX_KEY_BYTES = 1024
_ALLOWED = frozenset(chr(c) for c in range(0x21, 0x7F)) - {"/"}
# The same rules as one regex (printable ASCII but '/', non-empty segments): every key of every
# write passes here, and the segment-by-segment check below costs ~3 µs a key. Only a key the
# regex refuses takes the slow path, which names the problem.
_VALID_KEY = re.compile(r"(?:/[!-.0-~]+)+")


def _check_segments(text: str, what: str, segments: list[str]) -> None:
    for segment in segments:
        if not segment:
            raise InvalidKeyError(f"{what} {text!r} has an empty path segment ('//' or a trailing '/')")
        bad = set(segment) - _ALLOWED
        if bad:
            raise InvalidKeyError(f"{what} {text!r} contains {''.join(sorted(bad))!r}: only printable ASCII without spaces is allowed")


def validate_key(key: object) -> str:
    """Return `key` if it is a valid `/a/b/c` key, else raise InvalidKeyError naming the problem."""
    if type(key) is str and len(key) <= MAX_KEY_BYTES and _VALID_KEY.fullmatch(key):
        return key
    if not isinstance(key, str):
        raise InvalidKeyError(f"key must be a string, got {type(key).__name__}")
    if not key.startswith("/") or key == "/":
        raise InvalidKeyError(f"key {key!r} must start with '/' and name at least one segment, e.g. '/contiv.io/state/nw/x'")
    if len(key.encode()) > MAX_KEY_BYTES:
        raise InvalidKeyError(f"key {key[:40]!r}… is longer than {MAX_KEY_BYTES} bytes")
    _check_segments(key, "key", key[1:].split("/"))
    return key


def validate_prefix(prefix: object) -> str:
    """Return `prefix` if valid: '/' (everything) or a key, optionally ending in '/'.

    A prefix matches by string prefix, so '/a/b' also matches '/a/bc'; pass '/a/b/' to mean
    the children of '/a/b' only.
    """
    if not isinstance(prefix, str):
        raise InvalidKeyError(f"prefix must be a string, got {type(prefix).__name__}")
    if prefix == "/":
        return prefix
    validate_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix

"""Bad keys, values and configurations fail before anything reaches the log."""

from __future__ import annotations

import math

import pytest

from raftstore import InvalidKeyError, InvalidValueError, Put, StoreConfig, StoreConfigError
from raftstore._commands import txn_command
from raftstore._keys import validate_key, validate_prefix


@pytest.mark.parametrize(
    "key, problem",
    [
        ("contiv.io/x", "must start with '/'"),
        ("/", "must start with '/'"),
        ("/a//b", "empty path segment"),
        ("/a/b/", "empty path segment"),
        ("/a b", "printable ASCII"),
        ("/é", "printable ASCII"),
        ("/" + "x" * 2000, "longer than"),
        (42, "must be a string"),
    ],
)
def test_invalid_keys_name_the_problem(key: object, problem: str) -> None:
    with pytest.raises(InvalidKeyError, match=problem):
        validate_key(key)


def test_valid_keys_and_prefixes() -> None:
    assert validate_key("/contiv.io/state/nw/default:net1") == "/contiv.io/state/nw/default:net1"
    assert validate_prefix("/") == "/" and validate_prefix("/contiv.io/state/") == "/contiv.io/state/"
    with pytest.raises(InvalidKeyError):
        validate_prefix("/a//")


@pytest.mark.parametrize("value", [object(), {1, 2}, math.nan, b"bytes"])
def test_non_json_values_are_refused(value: object) -> None:
    with pytest.raises(InvalidValueError, match="not JSON-serialisable"):
        txn_command([], [Put("/ok", value)], [])


def test_oversized_values_are_refused() -> None:
    with pytest.raises(InvalidValueError, match="limit"):
        txn_command([], [Put("/big", "x" * (5 * 1024 * 1024))], [])


@pytest.mark.parametrize(
    "kwargs, problem",
    [
        ({"listen": "0.0.0.0:9002"}, "without a cluster secret"),
        ({"listen": "127.0.0.1:9002", "peers": ("198.18.0.2:9002",)}, "without a cluster secret"),
        ({"listen": "127.0.0.1:99999"}, "port from 1 to 65535"),
        ({"listen": "nocolon"}, "host:port"),
        ({"listen": "127.0.0.1:9002", "peers": ("127.0.0.1:9002",)}, "listed twice"),
        ({"listen": None}, "read-only member"),
        ({"listen": "0.0.0.0:9002", "secret": "short"}, "at least 8"),
        ({"request_timeout": 0}, "positive"),
    ],
)
def test_unsafe_or_broken_configs_are_refused(kwargs: dict, problem: str) -> None:
    with pytest.raises(StoreConfigError, match=problem):
        StoreConfig(**kwargs)


def test_non_loopback_with_secret_is_allowed() -> None:
    config = StoreConfig(listen="0.0.0.0:9002", peers=("198.18.0.2:9002",), secret="long-enough-secret")
    assert not config.readonly

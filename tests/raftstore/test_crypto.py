"""The frame sealer: what the wire format relies on before msgpack sees a byte."""

from __future__ import annotations

import pytest
from cryptography.exceptions import InvalidTag

from raftstore._crypto import AeadSealer


@pytest.fixture(scope="module")
def pair() -> tuple[AeadSealer, AeadSealer]:
    return AeadSealer("cluster-secret-1"), AeadSealer("cluster-secret-1")


def test_round_trip_between_members_sharing_the_secret(pair: tuple[AeadSealer, AeadSealer]) -> None:
    sender, receiver = pair
    assert receiver.open(sender.seal(b"payload", b"ad"), b"ad") == b"payload"


def test_nonces_never_repeat(pair: tuple[AeadSealer, AeadSealer]) -> None:
    sender, _ = pair
    nonces = {sender.seal(b"same", b"")[:12] for _ in range(1000)}
    assert len(nonces) == 1000


@pytest.mark.parametrize("position", [0, 11, 12, -1])
def test_any_flipped_bit_is_rejected(pair: tuple[AeadSealer, AeadSealer], position: int) -> None:
    sender, receiver = pair
    token = bytearray(sender.seal(b"payload", b"ad"))
    token[position] ^= 0x01
    with pytest.raises(InvalidTag):
        receiver.open(bytes(token), b"ad")


def test_other_associated_data_wrong_secret_and_garbage_are_rejected(pair: tuple[AeadSealer, AeadSealer]) -> None:
    sender, receiver = pair
    with pytest.raises(InvalidTag):
        receiver.open(sender.seal(b"payload", b"connection-1"), b"connection-2")
    with pytest.raises(InvalidTag):
        AeadSealer("another-secret").open(sender.seal(b"payload", b""), b"")
    with pytest.raises(ValueError):
        receiver.open(b"short", b"")

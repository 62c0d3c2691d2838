"""The Raft encryptor: what PySyncObj relies on before it unpickles a byte."""

from __future__ import annotations

import pytest
from cryptography.exceptions import InvalidTag

from raftstore._crypto import AeadEncryptor


@pytest.fixture(scope="module")
def pair() -> tuple[AeadEncryptor, AeadEncryptor]:
    return AeadEncryptor("cluster-secret-1"), AeadEncryptor("cluster-secret-1")


def test_round_trip_between_members_sharing_the_secret(pair: tuple[AeadEncryptor, AeadEncryptor]) -> None:
    sender, receiver = pair
    token = sender.encrypt_at_time(b"payload", 1234)
    assert receiver.extract_timestamp(token) == 1234
    assert receiver.decrypt(token) == b"payload"


def test_nonces_never_repeat(pair: tuple[AeadEncryptor, AeadEncryptor]) -> None:
    sender, _ = pair
    nonces = {sender.encrypt_at_time(b"same", 1)[8:20] for _ in range(1000)}
    assert len(nonces) == 1000


@pytest.mark.parametrize("position", [0, 7, 8, 19, 20, -1])
def test_any_flipped_bit_is_rejected(pair: tuple[AeadEncryptor, AeadEncryptor], position: int) -> None:
    sender, receiver = pair
    token = bytearray(sender.encrypt_at_time(b"payload", 99))
    token[position] ^= 0x01
    with pytest.raises(InvalidTag):
        receiver.decrypt(bytes(token))


def test_wrong_secret_and_garbage_are_rejected(pair: tuple[AeadEncryptor, AeadEncryptor]) -> None:
    sender, _ = pair
    with pytest.raises(InvalidTag):
        AeadEncryptor("another-secret").decrypt(sender.encrypt_at_time(b"payload", 1))
    with pytest.raises(ValueError):
        AeadEncryptor("another-secret").extract_timestamp(b"short")

"""Authenticated encryption of Raft traffic, plugged into PySyncObj's encryptor slot.

PySyncObj's own `password` uses Fernet (AES-CBC + HMAC + base64), about 30 µs per message
each way here, which dominated a replicated write. This is the same contract with AES-256-GCM
(about 1 µs): PySyncObj reads the timestamp, then `decrypt` authenticates timestamp and
payload together before its unpickler sees a byte; any failure raises and PySyncObj drops the
connection. Nonces are a random 64-bit instance prefix plus a 32-bit counter, never reused.
"""

from __future__ import annotations

import os
import struct
import threading

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

_SALT = b"contivd-raftstore-v1"
_KDF_ITERATIONS = 200_000
_HEADER = struct.Struct(">Q")  # the sender's monotonic timestamp, authenticated as associated data
_NONCE_BYTES = 12
_TAG_BYTES = 16


def derive_key(secret: str) -> bytes:
    """Stretch the cluster secret (an operator-chosen string) into a 256-bit key."""
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=_SALT, iterations=_KDF_ITERATIONS)
    return kdf.derive(secret.encode())


class AeadEncryptor:
    """PySyncObj's encryptor interface: encrypt_at_time, extract_timestamp, decrypt."""

    def __init__(self, secret: str):
        self._aead = AESGCM(derive_key(secret))
        self._lock = threading.Lock()
        self._prefix = os.urandom(8)
        self._counter = 0

    def _nonce(self) -> bytes:
        with self._lock:
            if self._counter >= 2**32:
                self._prefix, self._counter = os.urandom(8), 0
            counter, self._counter = self._counter, self._counter + 1
            return self._prefix + counter.to_bytes(4, "big")

    def encrypt_at_time(self, data: bytes, timestamp: int) -> bytes:
        header = _HEADER.pack(timestamp)
        nonce = self._nonce()
        return header + nonce + self._aead.encrypt(nonce, data, header)

    def extract_timestamp(self, token: bytes) -> int:
        if len(token) < _HEADER.size + _NONCE_BYTES + _TAG_BYTES:
            raise ValueError("raft message too short to be authentic")
        return int(_HEADER.unpack_from(token)[0])

    def decrypt(self, token: bytes) -> bytes:
        """Authenticate and decrypt; raises cryptography's InvalidTag for anything forged."""
        header, nonce = token[: _HEADER.size], token[_HEADER.size : _HEADER.size + _NONCE_BYTES]
        return self._aead.decrypt(nonce, token[_HEADER.size + _NONCE_BYTES :], header)

"""The `contiv` CNI plugin: reads the runtime's call, asks contivd over its unix socket, prints the answer.

It does no networking itself and imports only the standard library, so a container runtime
pays the interpreter start and one socket round trip per call. VERSION is answered locally;
everything else goes to contivd (socket from the network config key `socket`, else
/run/contiv/contiv-cni.sock). Errors are printed as CNI error objects with exit status 1.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Mapping

from cni.protocol import (
    DEFAULT_SOCKET,
    IO_FAILURE,
    MAX_MESSAGE_BYTES,
    SUPPORTED_VERSIONS,
    TRY_AGAIN_LATER,
    CniError,
    Request,
    parse_answer,
    request_from_environment,
    version_result,
)

TIMEOUT_SECONDS = 120.0  # an ADD waits for the leader and the datapath; the runtime has its own deadline


def exchange(path: str, request: Request) -> dict[str, object]:
    """Send the request line, read the answer line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT_SECONDS)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise CniError(TRY_AGAIN_LATER, f"contivd is not running: cannot connect to {path}", exc.strerror or "") from None
        except OSError as exc:
            raise CniError(IO_FAILURE, f"cannot connect to contivd at {path}: {exc.strerror}") from None
        try:
            sock.sendall(request.to_line())
            chunks: list[bytes] = []
            size = 0
            while not chunks or not chunks[-1].endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_MESSAGE_BYTES:
                    raise CniError(IO_FAILURE, "contivd's answer is too large")
        except OSError as exc:
            raise CniError(IO_FAILURE, f"talking to contivd at {path} failed: {exc}") from None
    if not chunks:
        raise CniError(IO_FAILURE, "contivd closed the connection without answering")
    return parse_answer(b"".join(chunks))


def run(environ: Mapping[str, str], stdin: bytes) -> tuple[int, str]:
    """One invocation → (exit status, what to print on stdout)."""
    version = SUPPORTED_VERSIONS[-1]
    try:
        request = request_from_environment(environ, stdin)
        version = request.cni_version
        if request.command == "VERSION":
            requested = _requested_version(stdin)
            return 0, json.dumps(version_result(requested))
        result = exchange(str(request.config.get("socket") or DEFAULT_SOCKET), request)
        return 0, json.dumps(result) if result else ""
    except CniError as exc:
        return 1, json.dumps(exc.to_json(version))


def _requested_version(stdin: bytes) -> str:
    """VERSION may come with `{"cniVersion": ...}` on stdin; anything else means the newest."""
    try:
        value = json.loads(stdin or b"{}").get("cniVersion", "")
    except (ValueError, AttributeError):
        value = ""
    return value if isinstance(value, str) and value else SUPPORTED_VERSIONS[-1]


def main() -> int:
    stdin = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    status, output = run(os.environ, stdin)
    if output:
        sys.stdout.write(output + "\n")
    return status

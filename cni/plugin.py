"""The `contiv` CNI plugin: reads the runtime's call, asks contivd over its unix socket, prints the answer.

It does no networking itself, so a container runtime pays the interpreter start and one socket
round trip per call. VERSION is answered locally, without contacting contivd; everything else
goes to contivd (socket from the network config key `socket`, else /run/contiv/contiv-cni.sock).
Errors are printed as CNI error objects with exit status 1. Installed as a plain script run by
`python3 -I -S` (packaging/build-cni-plugin.sh), it imports nothing that `python3 -I -S` has not
loaded already but this package and two C modules: `_socket` rather than socket (which imports
enum and selectors, ~7 ms) and, through cni.protocol, `_json`; the environment comes from
`posix.environ` rather than os.environ (os imports stat, posixpath and collections.abc, ~1 ms).
"""

from __future__ import annotations

import posix
import sys
from _socket import AF_UNIX, SOCK_STREAM, socket

from cni.protocol import (
    DEFAULT_SOCKET,
    IO_FAILURE,
    MAX_MESSAGE_BYTES,
    SUPPORTED_VERSIONS,
    TRY_AGAIN_LATER,
    CniError,
    Request,
    decode_json,
    encode_json,
    parse_answer,
    request_from_environment,
    version_result,
)

TYPE_CHECKING = False  # see cni.protocol
if TYPE_CHECKING:
    from collections.abc import Mapping

TIMEOUT_SECONDS = 120.0  # an ADD waits for the leader and the datapath; the runtime has its own deadline


def exchange(path: str, request: Request) -> dict[str, object]:
    """Send the request line, read the answer line."""
    sock = socket(AF_UNIX, SOCK_STREAM)
    try:
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
    finally:
        sock.close()
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
            return 0, encode_json(version_result(_requested_version(stdin)))
        result = exchange(str(request.config.get("socket") or DEFAULT_SOCKET), request)
        return 0, encode_json(result) if result else ""
    except CniError as exc:
        return 1, encode_json(exc.to_json(version))


def _requested_version(stdin: bytes) -> str:
    """VERSION may come with `{"cniVersion": ...}` on stdin; anything else means the newest."""
    try:
        value = decode_json(stdin or b"{}").get("cniVersion", "")
    except (ValueError, AttributeError):
        value = ""
    return value if isinstance(value, str) and value else SUPPORTED_VERSIONS[-1]


def environment(raw: Mapping[bytes, bytes]) -> dict[str, str]:
    """The process environment as os.environ decodes it (file system encoding, surrogateescape)."""
    return {key.decode("utf-8", "surrogateescape"): value.decode("utf-8", "surrogateescape") for key, value in raw.items()}


def main() -> int:
    stdin = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    status, output = run(environment(posix.environ), stdin)
    if output:
        sys.stdout.write(output + "\n")
    return status

"""The HTTP side of `contivd ctl`: a small synchronous client with one error type.

It owns one httpx.Client for the duration of a command (close it, or use it as a context
manager), sends an operator token as a bearer token when one is given, and turns every
failure — unreachable server, timeout, non-2xx answer, unreadable body — into `CtlError`
carrying the text to show the user: the server's own `{"error": ...}` message when there is
one. It does not retry: a 503 (no leader yet) is reported as the server words it, and the
user re-runs. A server `unix:/path` is the node's root-only API socket, where root needs no
token (loopback TCP without a token only reads).
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from .trust import untrusted_message

DEFAULT_SERVER = "http://127.0.0.1:9999"
DEFAULT_SOCKET = Path("/run/contivd/api.sock")  # contivd's default --api-socket
UNIX_SCHEME = "unix:"
UNIX_BASE_URL = "http://contivd"  # the Host of requests over a unix socket (never resolved)
REQUEST_TIMEOUT_SECONDS = 30.0  # longer than a raft election, so writes during one still answer


def default_server(euid: int, socket: Path = DEFAULT_SOCKET) -> str:
    """The server when neither a flag, the environment nor ctl.toml names one: root on a node
    talks to the API socket (admin without a token), everyone else to loopback TCP."""
    return f"{UNIX_SCHEME}{socket}" if euid == 0 and socket.exists() else DEFAULT_SERVER


def socket_path(server: str) -> Path | None:
    """The socket of a `unix:/path` server; None for http(s) URLs."""
    return Path(server.removeprefix(UNIX_SCHEME)) if server.startswith(UNIX_SCHEME) else None


def http_target(server: str) -> tuple[str, httpx.HTTPTransport | None]:
    """The base URL and transport an httpx client reaches `server` with (an http(s) URL or
    `unix:/path`)."""
    path = socket_path(server)
    if path is None:
        return server.rstrip("/"), None
    return UNIX_BASE_URL, httpx.HTTPTransport(uds=str(path))


def unreachable_socket(path: Path) -> str | None:
    """Why the API socket at `path` cannot be used by this process, or None if it may be."""
    denied = f"permission denied on {path}: the API socket is root's; run as root, or use --server URL with --token"
    try:
        path.stat()
    except PermissionError:  # its directory (0700 root) keeps others out
        return denied
    except OSError:
        return f"no contivd API socket at {path}: is contivd running on this node (its --api-socket)? Else use --server URL"
    return None if os.access(path, os.R_OK | os.W_OK) else denied


class CtlError(Exception):
    """A command failed; `message` is what to print, `status` the HTTP status if the server answered."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status


def _server_message(answer: httpx.Response) -> str:
    """contivd answers `{"error": msg}`; Contiv (and contivd's compat mode) plain text."""
    try:
        body = answer.json()
    except ValueError:
        body = None
    message = body.get("error") if isinstance(body, dict) else None
    if isinstance(message, str):
        return message
    return answer.text.strip() or f"HTTP {answer.status_code} {answer.reason_phrase}"


class Client:
    """JSON requests to one contivd API server."""

    def __init__(self, server: str, token: str | None = None, transport: httpx.BaseTransport | None = None, *, verify: bool | ssl.SSLContext = True):
        self.server = server.rstrip("/")
        self.verify = verify  # what other HTTP clients of a ctl command (snapshot save) verify the server with
        base_url, own_transport = http_target(self.server)
        # Accept: application/json chooses contivd's typed errors (4xx + JSON) over Contiv's 500 + text.
        headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
        self._http = httpx.Client(
            base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS, transport=transport or own_transport, verify=verify
        )

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request and return the decoded JSON answer, or raise CtlError."""
        try:
            answer = self._http.request(method, path, json=body)
        except httpx.ConnectError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise CtlError(untrusted_message(self.server, str(exc))) from None
            socket = socket_path(self.server)
            why = unreachable_socket(socket) if socket is not None else None
            if why is not None:
                raise CtlError(why) from None
            raise CtlError(
                f"cannot connect to contivd at {self.server}: {exc}. Is it running there? Choose the server with --server URL or CONTIVD_SERVER."
            ) from None
        except httpx.TimeoutException:
            raise CtlError(f"contivd at {self.server} did not answer {method} {path} within {REQUEST_TIMEOUT_SECONDS:g} s") from None
        except httpx.RemoteProtocolError as exc:
            if socket_path(self.server) is not None:  # contivd cuts a non-root caller at accept
                raise CtlError(f"contivd at {self.server} closed the connection: the API socket serves root only ({exc})") from None
            raise CtlError(f"{method} {self.server}{path} failed: {exc}") from None
        except httpx.HTTPError as exc:
            raise CtlError(f"{method} {self.server}{path} failed: {exc}") from None
        if answer.is_error:
            raise CtlError(_server_message(answer), answer.status_code)
        try:
            return answer.json()
        except ValueError:
            raise CtlError(f"contivd at {self.server} answered {method} {path} with a body that is not JSON") from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

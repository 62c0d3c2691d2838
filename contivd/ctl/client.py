"""The HTTP side of `contivd ctl`: a small synchronous client with one error type.

It owns one httpx.Client for the duration of a command (close it, or use it as a context
manager), sends an operator token as a bearer token when one is given (needed only from
other hosts: contivd trusts loopback callers), and turns every failure — unreachable
server, timeout, non-2xx answer, unreadable body — into `CtlError` carrying the text to
show the user: the server's own `{"error": ...}` message when there is one. It does not
retry: a 503 (no leader yet) is reported as the server words it, and the user re-runs.
"""

from __future__ import annotations

import ssl
from types import TracebackType
from typing import Any, Self

import httpx

from .trust import untrusted_message

DEFAULT_SERVER = "http://127.0.0.1:9999"
REQUEST_TIMEOUT_SECONDS = 30.0  # longer than a raft election, so writes during one still answer


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
        # Accept: application/json chooses contivd's typed errors (4xx + JSON) over Contiv's 500 + text.
        headers = {"Accept": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
        self._http = httpx.Client(base_url=self.server, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS, transport=transport, verify=verify)

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
            raise CtlError(
                f"cannot connect to contivd at {self.server}: {exc}. Is it running there? Choose the server with --server URL or CONTIVD_SERVER."
            ) from None
        except httpx.TimeoutException:
            raise CtlError(f"contivd at {self.server} did not answer {method} {path} within {REQUEST_TIMEOUT_SECONDS:g} s") from None
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

"""One mapping from exceptions to HTTP answers, on the contract the client chose (contiv-api.md, Decision 1).

Two contracts: a client that sends `Accept: application/json` (`contivd ctl`, new scripts) gets
the typed one, 400/404/409/503 with `{"error": message}`; any other client (the original
netctl, curl scripts) gets Contiv's, 500 and `text/plain` with Contiv's own text as the first
line (`ModelError.contiv`) and contivd's detail after it. `--contiv-error-compat` forces Contiv's
contract for every client; a node's own forwarded call (`X-Contivd-Errors: typed`) always gets
the typed one, since it turns the status back into an exception.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from raftstore import InvalidKeyError, InvalidValueError, StoreError, UnavailableError

from ..model import ConflictError, ModelError, NotFoundError, ValidationError

log = logging.getLogger("contivd.api")
TYPED_ERRORS_HEADER = "X-Contivd-Errors"  # "typed": JSON errors with their 4xx status even under --contiv-error-compat
CONTIV_NO_ROUTE = "404 page not found"  # gorilla/mux's answer to an unknown path or method


class BadRequestError(ModelError):
    """The request itself is malformed (not JSON, wrong shape)."""


class NoRouteError(NotFoundError):
    """No route serves the path (an unknown collection): Contiv's mux answered 404 itself."""


class UnauthorizedError(Exception):
    """A call without a valid node signature or token (401, with the reason)."""


class ForbiddenError(Exception):
    """An authenticated caller whose role lacks the right (403, naming the role needed)."""


@dataclass(frozen=True)
class ErrorAnswer:
    status: int
    message: str
    retry_after: int | None = None
    contiv_text: str = ""  # Contiv's first line, then the detail; the message when Contiv had none


def answer_for(exc: BaseException) -> ErrorAnswer:
    contiv = exc.contiv_text() if isinstance(exc, ModelError) else str(exc)
    if isinstance(exc, (ValidationError, BadRequestError, InvalidKeyError, InvalidValueError)):
        return ErrorAnswer(400, str(exc), contiv_text=contiv)
    if isinstance(exc, UnauthorizedError):
        return ErrorAnswer(401, str(exc) or "unauthorized", contiv_text=str(exc) or "unauthorized")
    if isinstance(exc, ForbiddenError):
        return ErrorAnswer(403, str(exc), contiv_text=str(exc))
    if isinstance(exc, NotFoundError):
        return ErrorAnswer(404, str(exc), contiv_text=contiv)
    if isinstance(exc, ConflictError):
        return ErrorAnswer(409, str(exc), contiv_text=contiv)
    if isinstance(exc, UnavailableError):
        return ErrorAnswer(503, str(exc), retry_after=1, contiv_text=str(exc))
    if isinstance(exc, StoreError):
        return ErrorAnswer(503, f"store error: {exc}", retry_after=1, contiv_text=f"store error: {exc}")
    if isinstance(exc, ModelError):
        return ErrorAnswer(500, str(exc), contiv_text=contiv)
    log.exception("unexpected error serving a request", exc_info=exc)
    return ErrorAnswer(500, f"internal error: {type(exc).__name__}", contiv_text=f"internal error: {type(exc).__name__}")


def accepts_json(accept: str) -> bool:
    """Whether an Accept header names `application/json` (parameters and q-values aside)."""
    return any(item.split(";")[0].strip().lower() == "application/json" for item in accept.split(","))


def wants_contiv_errors(headers: Mapping[str, str], contiv_error_compat: bool) -> bool:
    """Contiv's contract for this request? `headers` has lower-case names."""
    if headers.get(TYPED_ERRORS_HEADER.lower()) == "typed":
        return False
    return contiv_error_compat or not accepts_json(headers.get("accept", ""))

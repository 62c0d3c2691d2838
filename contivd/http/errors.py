"""One mapping from exceptions to HTTP answers (contiv-api.md, Decision 1)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from raftstore import InvalidKeyError, InvalidValueError, StoreError, UnavailableError

from ..model import ConflictError, NotFoundError, ValidationError

log = logging.getLogger("contivd.api")


class BadRequestError(Exception):
    """The request itself is malformed (not JSON, wrong shape)."""


class UnauthorizedError(Exception):
    """A node-to-node call without a valid signature or token."""


@dataclass(frozen=True)
class ErrorAnswer:
    status: int
    message: str
    retry_after: int | None = None


def answer_for(exc: BaseException) -> ErrorAnswer:
    if isinstance(exc, (ValidationError, BadRequestError, InvalidKeyError, InvalidValueError)):
        return ErrorAnswer(400, str(exc))
    if isinstance(exc, UnauthorizedError):
        return ErrorAnswer(401, str(exc) or "unauthorized")
    if isinstance(exc, NotFoundError):
        return ErrorAnswer(404, str(exc))
    if isinstance(exc, ConflictError):
        return ErrorAnswer(409, str(exc))
    if isinstance(exc, UnavailableError):
        return ErrorAnswer(503, str(exc), retry_after=1)
    if isinstance(exc, StoreError):
        return ErrorAnswer(503, f"store error: {exc}", retry_after=1)
    log.exception("unexpected error serving a request", exc_info=exc)
    return ErrorAnswer(500, f"internal error: {type(exc).__name__}")

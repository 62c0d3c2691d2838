"""The one exception family of the control-plane model: the REST layer maps each class to a status.

`ValidationError` → 400 (the request itself is wrong), `NotFoundError` → 404 (an object it names
does not exist), `ConflictError` → 409 (valid on its own, refused by what is already stored).
`message` is contivd's own wording, naming the object or value at fault (what JSON clients get);
`contiv` is Contiv's exact text for the same case, from the catalogue in `contiv_messages`, which
clients on Contiv's contract get as the first line (contiv-api.md, Decision 1).
"""

from __future__ import annotations


class ModelError(Exception):
    """Base of every error the model raises on purpose; `str(err)` is the user-facing message."""

    def __init__(self, message: str, *, contiv: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.contiv = contiv

    def contiv_text(self) -> str:
        """Contiv's line first, then contivd's detail when it says more."""
        if self.contiv is None or self.contiv == self.message:
            return self.message
        return f"{self.contiv}\n{self.message}"


class ValidationError(ModelError, ValueError):
    """The request body is invalid on its own, or against an object it references.

    `field` is the JSON name of the offending field (`"key"` for a key mismatch, `"body"` when the
    body is not a JSON object at all); the message names it too, with the offending value.
    """

    def __init__(self, field: str, message: str, *, contiv: str | None = None) -> None:
        super().__init__(message, contiv=contiv)
        self.field = field


class NotFoundError(ModelError, LookupError):
    """The object addressed, or one the request references, does not exist."""


class ConflictError(ModelError):
    """The request clashes with stored state: in use, overlapping, already taken, immutable."""

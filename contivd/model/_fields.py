"""One declared field of a Contiv object, and the generic validation every field goes through.

A `Field` says everything Contiv's generated `ValidateX` code knows about a property: JSON name,
JSON type, default, byte length limit, format and integer bounds, plus an optional parser for what
a regex cannot express (a subnet's prefix, a tag range). `decode` enforces the JSON type (Go's
decoder rejects the body on a type mismatch, before any other check); `check` then applies, in
Contiv's order, default → length → format → bounds → parser. Messages start with Contiv's own
text (`"subnet string invalid format"`) and add the offending value and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ._formats import Format
from .contiv_messages import contiv_line
from .errors import ValidationError

JsonType = Literal["string", "integer", "list"]
Value = str | int | list[str]
Parser = Callable[[str], object]
"""Parses one string (a list field: one item); raises `ValueError` with a problem text."""


class ParseError(ValueError):
    """A parser's refusal that Contiv words in its own way (`contiv`), not as a format error."""

    def __init__(self, message: str, contiv: str):
        super().__init__(message)
        self.contiv = contiv


ZERO: Mapping[JsonType, Value] = {"string": "", "integer": 0, "list": []}


@dataclass(frozen=True)
class Field:
    """A property of a Contiv object as data; `bounds` is the inclusive range of an integer."""

    name: str
    type: JsonType = "string"
    max_len: int | None = None
    fmt: Format | None = None
    bounds: tuple[int, int] | None = None
    default: str | int | None = None
    parse: Parser | None = None

    def decode(self, raw: object) -> Value:
        """Check the JSON type; `null` or absent means the zero value, as in Go."""
        if raw is None:
            raw = ZERO[self.type]  # copied below, so the shared zero list is never handed out
        if self.type == "string" and isinstance(raw, str):
            return raw
        # bool is an int in Python but never in JSON.
        if self.type == "integer" and isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if self.type == "list" and isinstance(raw, list) and all(isinstance(item, str) for item in raw):
            return list(raw)
        wanted = {"string": "a string", "integer": "an integer", "list": "a list of strings"}[self.type]
        raise ValidationError(self.name, f"{self.name} must be {wanted}, got {show(raw)}")

    def check(self, value: Value) -> Value:
        """Validate a decoded value; returns it with the default applied."""
        if self.default is not None and value == ZERO[self.type]:
            value = self.default
        if isinstance(value, list):
            for index, item in enumerate(value):
                self._check_string(f"{self.name}[{index}]", item)
        elif isinstance(value, str):
            self._check_string(self.name, value)
        else:
            self._check_integer(value)
        return value

    def _check_string(self, label: str, value: str) -> None:
        size = len(value.encode())
        if self.max_len is not None and size > self.max_len:
            message = f"{label} string too long: {size} bytes (max {self.max_len}): {show(value)}"
            raise ValidationError(self.name, message, contiv=contiv_line("string-too-long", field=self.name))
        if self.fmt is not None and not self.fmt.matches(value):
            message = f"{label} string invalid format: {show(value)} (expected {self.fmt.expected})"
            raise ValidationError(self.name, message, contiv=contiv_line("string-invalid-format", field=self.name))
        if self.parse is not None and value:
            try:
                self.parse(value)
            except ParseError as err:
                raise ValidationError(self.name, f"{label} {show(value)}: {err}", contiv=err.contiv) from None
            except ValueError as err:
                raise ValidationError(
                    self.name, f"{label} {show(value)}: {err}", contiv=contiv_line("string-invalid-format", field=self.name)
                ) from None

    def _check_integer(self, value: int) -> None:
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
            low, high = self.bounds
            message = f"{self.name} Value Out of bound: {value} (allowed {low}-{high})"
            raise ValidationError(self.name, message, contiv=contiv_line("value-out-of-bound", field=self.name))


def show(value: object) -> str:
    """A value the way the client sent it (JSON), cut short so a huge body cannot flood a log."""
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."

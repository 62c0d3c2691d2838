"""Generic text renderers for `contivd ctl`: tables, `Label: value` lines and JSON.

Pure functions from plain data to the exact text to print, so tests compare strings and
nothing here touches a terminal or the network. The layout copies netctl, whose output
scripts already parse: Go's tabwriter with 2 spaces of padding, a header row, a dashed row
under it, left-aligned cells; we also drop trailing blanks. Renderers that know contivd's
answers (cluster status, version) live in views.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

COLUMN_PADDING = 2  # spaces between columns, as netctl's tabwriter


def cell(value: Any) -> str:
    """One JSON value as table text: absent values empty, lists comma-joined (netctl's group ls)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(cell(item) for item in value)
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A header row, a dashed row and one row per entry, columns padded to their widest cell.

    Cells are already text (see `cell`); rows shorter than the header are padded with
    empty cells rather than refused, since they come from our own column declarations.
    """
    lines = [list(headers), ["-" * len(header) for header in headers]]
    lines += [[*row, *[""] * (len(headers) - len(row))] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "".join("".join(text.ljust(width + COLUMN_PADDING) for text, width in zip(line, widths, strict=False)).rstrip() + "\n" for line in lines)


def fields(pairs: Iterable[tuple[str, Any]]) -> str:
    """`Label: value` lines in the given order, as netctl's `global info` prints them."""
    return "".join(f"{label}: {cell(value)}".rstrip() + "\n" for label, value in pairs)


def as_json(value: Any) -> str:
    """Indented JSON, as netctl's `inspect` and `--json` print it (two spaces, trailing newline)."""
    return json.dumps(value, indent=2) + "\n"

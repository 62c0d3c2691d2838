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


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def tabwriter(text: str, padding: int = COLUMN_PADDING, *, tab_width: int | None = None) -> str:
    """Align `text` as Go's text/tabwriter does with netctl's settings (no minimum width,
    `padding` spaces, space padding, no flags), so tables match netctl byte for byte; with
    `tab_width`, padded with tabs as Go's padchar '\t' does (codegangsta/cli's help): each
    column's width rounded up to a multiple of `tab_width`, then as many tabs as reach it.

    A cell is the text before a tab; the text after a line's last tab is not a cell and is
    never padded. A column's width is set per block of consecutive lines that have a cell
    in it, so a line with fewer cells (a title such as "Incoming Rules:") starts new blocks.
    """
    lines = [line.split("\t") for line in text.split("\n")]
    widths: list[int] = []
    out: list[str] = []

    def pad(cell: str, width: int) -> str:
        if tab_width is None:
            return cell.ljust(width)
        column = _round_up(width, tab_width)
        return cell + "\t" * (_round_up(column - len(cell), tab_width) // tab_width)

    def write(start: int, stop: int) -> None:
        for cells in lines[start:stop]:
            out.append("".join(pad(cell, widths[j]) if j < len(widths) else cell for j, cell in enumerate(cells)))

    def align(start: int, stop: int) -> None:
        """Go's Writer.format: find the blocks of column len(widths) in [start, stop), recurse."""
        column = len(widths)
        line = start
        while line < stop:
            if column >= len(lines[line]) - 1:
                line += 1
                continue
            write(start, line)
            start = line
            width = 0
            while line < stop and column < len(lines[line]) - 1:
                width = max(width, len(lines[line][column]) + padding)
                line += 1
            widths.append(width)
            align(start, line)
            widths.pop()
            start = line
        write(start, stop)

    align(0, len(lines))
    return "\n".join(out)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A header row, a dashed row and one row per entry, aligned by `tabwriter`, without
    trailing blanks (contivd's own pages; netctl's tables are declared in commands.py)."""
    lines = [list(headers), ["-" * len(header) for header in headers], *rows]
    aligned = tabwriter("".join("\t".join([*line, *[""] * (len(headers) - len(line))]) + "\n" for line in lines))
    return "".join(line.rstrip() + "\n" for line in aligned.splitlines())


def fields(pairs: Iterable[tuple[str, Any]]) -> str:
    """`Label: value` lines in the given order, as netctl's `global info` prints them (an
    empty value keeps the blank after the colon, as Go's `%v` leaves it)."""
    return "".join(f"{label}: {cell(value)}\n" for label, value in pairs)


_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""What Go's encoding/json escapes besides what JSON must (HTML-safe by default); these
characters occur only inside strings, so the text can be translated after encoding."""


def as_json(value: Any) -> str:
    """Indented JSON, as netctl's `inspect` and `--json` print it with Go's `json.MarshalIndent`:
    two spaces, members in the order given, other scripts' characters as they are, `<`, `>` and
    `&` escaped, and a trailing newline."""
    return json.dumps(value, indent=2, ensure_ascii=False).translate(_GO_ESCAPES) + "\n"

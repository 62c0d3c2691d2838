"""What each kind of declared command does over HTTP; each returns the text to print.

The functions take a Client, a record from commands.py and the parsed values (key fields
by JSON name, flags by parameter name), make the requests netctl makes and render the
answer. They never print or exit: main.py does, so any failure reaches the user as one
CtlError carrying the server's message. Unlike netctl, which printed "Creating network …"
before sending, the confirmation is returned only once the server has accepted the change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

from . import output
from .client import Client, CtlError
from .commands import Resource, Setter, Show, Table, encode_options, parents

ListFormat = Literal["table", "json", "quiet"]


def object_path(collection: str, key: str, *, inspect: bool = False) -> str:
    """`/api/v1[/inspect]/<collection>/<key>/`, the key escaped except for its `:` separators."""
    return f"/api/v1/{'inspect/' if inspect else ''}{collection}/{quote(key, safe=':')}/"


def create(client: Client, resource: Resource, fields: Mapping[str, Any], flags: Mapping[str, Any], *, update: bool = False) -> str:
    """POST the object (contivd creates, updates or, for an identical body, does nothing)."""
    key = resource.key_of(fields)
    client.post(object_path(resource.collection, key), resource.body(fields, flags))
    return f"{'Updating' if update else 'Creating'} {resource.label} {key}\n"


def remove(client: Client, resource: Resource, fields: Mapping[str, Any]) -> str:
    key = resource.key_of(fields)
    client.delete(object_path(resource.collection, key))
    return f"Deleting {resource.label} {key}\n"


def inspect(client: Client, resource: Resource, fields: Mapping[str, Any]) -> str:
    return output.as_json(client.get(object_path(resource.collection, resource.key_of(fields), inspect=True)))


def _rows(table: Table, objects: list[dict[str, Any]]) -> list[list[str]]:
    kept = [obj for obj in objects if all(obj.get(name) == value for name, value in table.where)]
    if table.order_by:
        kept.sort(key=lambda obj: obj.get(table.order_by or "") or 0)
    return [[column.cell(obj.get(column.field)) for column in table.columns] for obj in kept]


def render_list(resource: Resource, objects: list[dict[str, Any]], fmt: ListFormat) -> str:
    """An `ls` answer: raw JSON, names one a line (`-q`), or the declared tables."""
    if fmt == "json":
        return output.as_json(objects)
    if fmt == "quiet":
        return "".join(f"{obj.get(resource.key[-1], '')}\n" for obj in objects)
    return "\n".join(
        (f"{table.title}\n" if table.title else "") + output.table([column.header for column in table.columns], _rows(table, objects))
        for table in resource.tables
    )


def list_objects(client: Client, resource: Resource, scope: Mapping[str, Any], fmt: ListFormat) -> str:
    """GET the collection and keep the objects in `scope` (tenant, policy …; empty with `--all`).

    As netctl does, the enclosing objects are fetched first, so an unknown tenant or policy
    is reported as the server words it instead of printing an empty table.
    """
    for parent in parents(resource):
        if all(name in scope for name in parent.key):
            client.get(object_path(parent.collection, parent.key_of(scope)))
    objects = [obj for obj in client.get(f"/api/v1/{resource.collection}/") if all(obj.get(k) == v for k, v in scope.items())]
    text = render_list(resource, objects, fmt)
    if resource.beside is not None and fmt == "table":
        beside = resource.beside.table
        rows = _rows(beside, client.get(resource.beside.path))
        if rows:
            text += f"\n{beside.title}\n" + output.table([column.header for column in beside.columns], rows)
    return text


def show(client: Client, command: Show, values: Mapping[str, str], *, raw: bool) -> str:
    """GET the declared path (arguments substituted, escaped) and render it, or print it raw."""
    answer = client.get(command.path.format(**{name: quote(value, safe=":") for name, value in values.items()}))
    return output.as_json(answer) if raw else command.render(answer)


def set_singleton(client: Client, setter: Setter, flags: Mapping[str, Any]) -> str:
    """Read the singleton, overlay the flags given and write it back (prints nothing, as netctl)."""
    try:
        current = client.get(setter.path)
    except CtlError as exc:
        if exc.status != 404:
            raise
        current = dict(setter.initial)
    client.post(setter.path, {**current, **encode_options(setter.options, flags)})
    return ""

"""What each kind of declared command does over HTTP; each returns the text to print.

The functions take a Client, a record from commands.py and the parsed values (key fields
by JSON name, flags by parameter name), make the requests netctl makes and render the
answer. They never print or exit: main.py does, so any failure reaches the user as one
CtlError carrying the server's message. Unlike netctl, which printed "Deleting network …"
before sending, the confirmation is returned only once the server has accepted the change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

from . import fieldorder, output
from .client import Client, CtlError
from .commands import Resource, Setter, Show, parents

ListFormat = Literal["table", "json", "quiet"]


def object_path(collection: str, key: str, *, inspect: bool = False) -> str:
    """`/api/v1[/inspect]/<collection>/<key>/`, the key escaped except for its `:` separators."""
    return f"/api/v1/{'inspect/' if inspect else ''}{collection}/{quote(key, safe=':')}/"


def create(client: Client, resource: Resource, fields: Mapping[str, Any], flags: Mapping[str, Any], *, update: bool = False) -> str:
    """POST the object (contivd creates, updates or, for an identical body, does nothing)."""
    client.post(object_path(resource.collection, resource.key_of(fields)), resource.body(fields, flags))
    return resource.message("update" if update else "create", fields)


def remove(client: Client, resource: Resource, fields: Mapping[str, Any]) -> str:
    client.delete(object_path(resource.collection, resource.key_of(fields)))
    return resource.message("rm", fields)


def inspect(client: Client, resource: Resource, fields: Mapping[str, Any]) -> str:
    """The object's `{"Config": …, "Oper": …}` as netctl prints it: in its Go structs' field order."""
    answer = client.get(object_path(resource.collection, resource.key_of(fields), inspect=True))
    return output.as_json(fieldorder.ordered(answer, f"{resource.model}Inspect"))


def render_list(resource: Resource, objects: list[dict[str, Any]], fmt: ListFormat, *, counted: bool = False) -> str:
    """An `ls` answer: raw JSON, names one a line (`-q`), or the declared tables (through
    Go's tabwriter layout, each table after the previous one as netctl writes them); `counted`
    adds the packets and bytes columns."""
    if resource.order_by:
        objects = sorted(objects, key=lambda obj: obj.get(resource.order_by or "") or 0)
    if fmt == "json":
        return output.as_json(fieldorder.ordered(objects, f"[]{resource.model}"))
    if fmt == "quiet":
        return "".join(f"{obj.get(resource.key[-1], '')}\n" for obj in objects)
    tables = [table.counted() for table in resource.tables] if counted else resource.tables
    return output.tabwriter("".join(table.text(objects) for table in tables))


def _scoped_objects(client: Client, resource: Resource, scope: Mapping[str, Any], all_tenants: bool) -> list[dict[str, Any]]:
    for parent in parents(resource):
        if all(name in scope for name in parent.key):
            client.get(object_path(parent.collection, parent.key_of(scope)))
    kept = {k: v for k, v in scope.items() if not (all_tenants and k == "tenantName")}
    return [obj for obj in client.get(f"/api/v1/{resource.collection}/") if all(obj.get(k) == v for k, v in kept.items())]


def list_objects(client: Client, resource: Resource, scope: Mapping[str, Any], fmt: ListFormat, *, all_tenants: bool = False) -> str:
    """GET the collection and keep the objects in `scope` (tenant, policy …), or in every
    tenant with `all_tenants`.

    As netctl does, the enclosing objects named by `scope` are fetched first (even with
    `all_tenants`), so an unknown tenant or policy is reported as the server words it
    instead of printing an empty table.
    """
    text = render_list(resource, _scoped_objects(client, resource, scope, all_tenants), fmt)
    if resource.beside is not None and fmt == "table":
        rows = client.get(resource.beside.path)
        if rows:
            text += "\n" + output.tabwriter(resource.beside.table.text(rows))
    return text


def list_counted(client: Client, resource: Resource, scope: Mapping[str, Any], fmt: ListFormat) -> tuple[str, list[str]]:
    """`list_objects` with each object's packets and bytes (`ls --hits`, resources that declare
    `counters`), and the nodes that did not answer (their packets are missing)."""
    counters = resource.counters
    if counters is None:
        raise CtlError(f"{resource.name} objects have no hit counters")
    objects = _scoped_objects(client, resource, scope, False)
    answer = client.get(counters.path.format(**{name: quote(str(value), safe="") for name, value in scope.items()}))
    found = answer.get(counters.section) or {}
    zero = {"packets": 0, "bytes": 0}
    counted = [{**obj, **found.get(counters.key.format(**obj), zero)} for obj in objects]
    return render_list(resource, counted, fmt, counted=True), [str(name) for name in answer.get("unanswered") or []]


def show(client: Client, command: Show, values: Mapping[str, str], *, raw: bool) -> tuple[str, str | None]:
    """GET the declared path (arguments substituted, escaped) and render it, or print it raw;
    with what makes the answer a failure (`Show.failure`), if anything does."""
    answer = fieldorder.ordered(client.get(command.path.format(**{name: quote(value, safe=":") for name, value in values.items()})), command.model)
    return (output.as_json(answer) if raw else command.render(answer)), (command.failure(answer) if command.failure else None)


def set_singleton(client: Client, setter: Setter, flags: Mapping[str, Any]) -> str:
    """Read the singleton, overlay the flags given and write it back; prints nothing, as
    netctl. An empty value clears the setting: it is left out, as Go's omitempty leaves it."""
    try:
        current = client.get(setter.path)
    except CtlError as exc:
        if exc.status != 404:
            raise
        current = dict(setter.initial)
    given = {option.field: flags[option.param] for option in setter.options if flags.get(option.param) is not None}
    client.post(setter.path, {name: value for name, value in {**current, **given}.items() if value != ""})
    return ""

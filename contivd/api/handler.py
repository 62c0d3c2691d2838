"""What a route's handler is: a function of one area's context, the request body and the route's
path parameters, paired with the type of that context.

Each area module (objects, plugin, cluster, debug, kubernetes, operators) declares a small
context holding only the collaborators its routes use, and marks its handlers with
`@handles(Context)`; mypy checks that a handler's first parameter is that context. The route
table (routes.py) names each route's `Handler`, and the app binds every one to the context the
composition root built, once at start (`Handler.bind`): a request then calls its route's bound
function directly, with nothing looked up by name.

Not responsible for: authentication, leader forwarding, error mapping (app.Dispatcher).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

A = TypeVar("A")
P = ParamSpec("P")
Run = Callable[..., Awaitable[Any]]  # a bound handler: run(body, **path_params)


@dataclass(frozen=True)
class AtRevision:
    """A handler's answer to a write, with the store revision that holds it: sent as a header
    so a forwarding node can wait for its own state to reach it instead of syncing the log."""

    value: Any
    revision: int


@dataclass(frozen=True)
class Handler(Generic[A]):
    """`call(context, body, **path_params)` for routes of the area whose context is an `area`."""

    area: type[A]
    call: Callable[..., Awaitable[Any]]

    @property
    def name(self) -> str:
        return self.call.__name__

    def bind(self, contexts: Mapping[type, object]) -> Run:
        """The handler with its area's context from `contexts` (by type); LookupError naming
        both when the composition root built no such context."""
        context = contexts.get(self.area)
        if context is None:
            raise LookupError(f"handler {self.name} needs a {self.area.__name__}, and none was given")
        return partial(self.call, context)


def handles(area: type[A]) -> Callable[[Callable[Concatenate[A, P], Awaitable[Any]]], Handler[A]]:
    """Decorator: the function becomes the `Handler` of routes in `area`'s context."""

    def wrap(call: Callable[Concatenate[A, P], Awaitable[Any]]) -> Handler[A]:
        return Handler(area, call)

    return wrap


def contexts_by_type(contexts: tuple[object, ...]) -> dict[type, object]:
    """The areas' contexts keyed by their type, for `Handler.bind`; ValueError for two of one type."""
    by_type = {type(context): context for context in contexts}
    if len(by_type) != len(contexts):
        raise ValueError("two handler contexts of one type: each area has one")
    return by_type

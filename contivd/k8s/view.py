"""The leader's view of the cluster's Services and EndpointSlices, as the watches report them.

Pure bookkeeping: it replaces a kind's objects on a (re)list, applies watch events, and says
which Services an event touched (a slice moving from one Service to another touches both), so
the syncer re-resolves only those.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from .resolve import Resolution, object_key, owning_service, resolve_service

SERVICES, ENDPOINT_SLICES = "services", "endpointslices"
NETWORK_POLICIES, PODS, NAMESPACES = "networkpolicies", "pods", "namespaces"


class ClusterView:
    def __init__(self, service_cidr: ipaddress.IPv4Network):
        self.service_cidr = service_cidr
        self.services: dict[str, Mapping[str, Any]] = {}
        self.slices: dict[str, Mapping[str, Any]] = {}
        self.slices_of: dict[str, set[str]] = {}  # service key -> slice keys

    def replace(self, kind: str, objects: Iterable[Mapping[str, Any]]) -> set[str]:
        """A (re)list of `kind`: the table becomes exactly `objects`. Returns the Services touched."""
        touched: set[str] = set()
        table = self.services if kind == SERVICES else self.slices
        for key in list(table):
            touched |= self.apply(kind, "DELETED", table[key])
        for obj in objects:
            touched |= self.apply(kind, "ADDED", obj)
        return touched

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> set[str]:
        """One watch event (ADDED, MODIFIED, DELETED) of `kind`. Returns the Services touched."""
        key = object_key(obj)
        if kind == SERVICES:
            if event == "DELETED":
                self.services.pop(key, None)
            else:
                self.services[key] = obj
            return {key}
        touched: set[str] = set()
        old = self.slices.pop(key, None)
        if old is not None and (owner := owning_service(old)) is not None:
            self.slices_of.get(owner, set()).discard(key)
            touched.add(owner)
        if event != "DELETED":
            self.slices[key] = obj
            if (owner := owning_service(obj)) is not None:
                self.slices_of.setdefault(owner, set()).add(key)
                touched.add(owner)
        return touched

    def resolve(self, service_key: str) -> Resolution:
        """The Service's record now (None also when the Service does not exist)."""
        service = self.services.get(service_key)
        if service is None:
            return None
        return resolve_service(service, [self.slices[k] for k in sorted(self.slices_of.get(service_key, ()))], self.service_cidr)

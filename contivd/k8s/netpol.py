"""The leader's NetworkPolicy duty: keep `/contiv.io/k8s/netpol/` equal to the compiled
NetworkPolicies, one record per pod with rules (docs/policy.md).

It reflects NetworkPolicies, Pods and Namespaces (the reflector of the Service watch), and once
all three are listed recompiles everything (`contivd.model.netpolicy`, pure) after each batch of
events — the events waiting in the channel are applied first, so a burst costs one compile —
and writes only the pods whose rules changed. On becoming leader it reads what the store holds
first, so a new leader writes the difference, deleting stale records. Pod addresses are the
pods' `status.podIP` (the kubelet reports the address contivd's CNI gave).

A policy the compiler refuses (a selector operator it does not know, an ipBlock that is not
IPv4, ...) is logged once per change and left out; what it cannot express (SCTP ports) is
logged the same way. Not responsible for programming flows (every node's agent does that).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio

from openflow.inputs import NetpolPod, NetpolRule
from raftstore import KeyValueStore, Op, StoreError

from ..model import ValidationError
from ..model.netpolicy import Compiled, Compiler, Namespace, Pod, Policy, parse_namespace, parse_pod, parse_policy
from ..state import RecordError
from ..state.families import NETPOL_PODS
from .client import KubeApi
from .reflector import Listed, Relisting, Update
from .resolve import object_key
from .status import KubeHealth
from .view import NAMESPACES, NETWORK_POLICIES, PODS

log = logging.getLogger("contivd.k8s")
KINDS = (NETWORK_POLICIES, PODS, NAMESPACES)
TXN_OPS = 100  # records per store transaction (bounded Raft entries)
RETRY_SECONDS = 1.0


class ObjectsCompiler:
    """The API's objects → the records every pod with rules should have, remembering what it
    parsed (per object, while the object is the same one) and compiled (per policy, while the
    pods and namespaces are the same), so that one changed policy costs its own compile."""

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str], tuple[Mapping[str, Any], Any]] = {}
        self._compiler: Compiler | None = None
        self._world: tuple[tuple[Pod, ...], tuple[Namespace, ...]] = ((), ())

    def _parse(self, kind: str, objects: Mapping[str, Mapping[str, Any]], parse: Callable[[Mapping[str, Any]], Any]) -> list[Any]:
        out = []
        for key, obj in objects.items():
            held = self._parsed.get((kind, key))
            if held is None or held[0] is not obj:
                try:
                    held = (obj, parse(obj))
                except ValidationError as exc:
                    held = (obj, exc)
                self._parsed[(kind, key)] = held
            out.append(held[1])
        return out

    def compile(self, objects: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> tuple[dict[str, NetpolPod], Compiled, list[str]]:
        """The records by pod, the compilation and the policies refused (each with its reason)."""
        live = {(kind, key) for kind in KINDS for key in objects.get(kind, {})}
        self._parsed = {k: v for k, v in self._parsed.items() if k in live}
        parsed = self._parse(NETWORK_POLICIES, objects.get(NETWORK_POLICIES, {}), parse_policy)
        pods: tuple[Pod, ...] = tuple(self._parse(PODS, objects.get(PODS, {}), parse_pod))
        namespaces: tuple[Namespace, ...] = tuple(self._parse(NAMESPACES, objects.get(NAMESPACES, {}), parse_namespace))
        if self._compiler is None or (pods, namespaces) != self._world:
            self._compiler, self._world = Compiler(pods, namespaces), (pods, namespaces)
        compiled = self._compiler.compile(p for p in parsed if isinstance(p, Policy))
        owner: dict[int, str] = {}
        for pod in sorted(pods, key=lambda p: p.key):
            owner.setdefault(pod.ip, pod.key)  # two pods on one address (a finished one): the first
        by_pod: dict[str, list[NetpolRule]] = {}
        for rule in compiled.rules:
            by_pod.setdefault(owner[rule.pod_ip], []).append(rule)
        refused = sorted(str(p) for p in parsed if isinstance(p, ValidationError))
        return {pod: NetpolPod(pod, tuple(rules)) for pod, rules in by_pod.items()}, compiled, refused


def compile_objects(objects: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> tuple[dict[str, NetpolPod], Compiled, list[str]]:
    """`ObjectsCompiler.compile` once, with nothing remembered."""
    return ObjectsCompiler().compile(objects)


class NetpolSync:
    """One leadership term's NetworkPolicy watch and writes."""

    def __init__(self, store: KeyValueStore, api: KubeApi, health: KubeHealth):
        self.store, self.api, self.health = store, api, health
        self.objects: dict[str, dict[str, Mapping[str, Any]]] = {kind: {} for kind in KINDS}
        self.written: dict[str, NetpolPod] | None = None  # what the store holds; None: not read yet
        self.reported: set[str] = set()
        self.compiler = ObjectsCompiler()

    KINDS = KINDS

    def apply(self, update: Update) -> None:
        if isinstance(update, Listed):
            self.objects[update.kind] = {object_key(o): o for o in update.objects}
        elif isinstance(update, Relisting):
            return  # the kind's objects stay as they were until its Listed replaces them
        elif update.event == "DELETED":
            self.objects[update.kind].pop(object_key(update.object), None)
        else:
            self.objects[update.kind][object_key(update.object)] = update.object

    async def consume(self, receive: trio.MemoryReceiveChannel[Update]) -> None:
        """Compile and write on every batch of updates until cancelled (leadership lost)."""
        listed: set[str] = set()
        async for update in receive:
            while True:  # the whole waiting batch, then one compile
                self.apply(update)
                if isinstance(update, Listed):
                    listed.add(update.kind)
                elif isinstance(update, Relisting):  # stale until relisted: compiling now could drop pods' rules
                    listed.discard(update.kind)
                try:
                    update = receive.receive_nowait()
                except trio.WouldBlock:
                    break
            if listed == set(KINDS):
                await self._retrying()

    async def _retrying(self) -> None:
        while True:
            try:
                await self.sync()
                return
            except StoreError as exc:
                log.warning("writing NetworkPolicy rules to the store failed, retrying: %s", exc)
                await trio.sleep(RETRY_SECONDS)

    async def sync(self) -> None:
        """Compile and write the pods whose rules changed (reading the store first in a term)."""
        desired, compiled, refused = self.compiler.compile(self.objects)
        for problem in sorted({*refused, *compiled.problems} - self.reported):
            log.warning("NetworkPolicy: %s", problem)
        self.reported = {*refused, *compiled.problems}
        if self.written is None:
            self.written = await self._stored()
        ops: list[Op] = [NETPOL_PODS.delete(pod) for pod in sorted(self.written) if pod not in desired]
        ops += [NETPOL_PODS.put(pod, record) for pod, record in sorted(desired.items()) if self.written.get(pod) != record]
        for start in range(0, len(ops), TXN_OPS):
            await self.store.txn(success=ops[start : start + TXN_OPS])
        self.written = desired
        if ops:
            log.info("NetworkPolicy rules: %d pods with rules, %d records written or deleted", len(desired), len(ops))

    async def _stored(self) -> dict[str, NetpolPod]:
        # an unreadable record counts as a pod without rules: rewritten or deleted below
        return {pod: NetpolPod(pod, ()) if isinstance(record, RecordError) else record for pod, record in await NETPOL_PODS.each(self.store)}

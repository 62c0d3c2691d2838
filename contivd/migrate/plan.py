"""What contivd's store will hold after importing a Contiv tree: computed, never guessed.

Every configuration object is replayed through the netmaster itself (`Netmaster.put_object`
on an in-memory store): contivd's validation and integrity checks judge each object, and the
netmaster's effects write the derived state in contivd's own shapes. Each network is replayed
with the VLAN or VNI Contiv allocated, each service with Contiv's VIP. Contiv's remaining
allocations are then laid over that state: address bitmaps (converted from Go's bitset),
IPv6 maps, local VLANs, EPG ids, counters and the endpoints themselves; finally the policy
and service states are recomputed from the result, as the netmaster does after any change.

Not responsible for: reading the source (contivd.migrate.source) or writing the cluster
(contivd.migrate.commit). Nothing here touches anything but the in-memory store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv6Address
from typing import Any

from raftstore import MemoryStore

from ..model import SPECS, ModelError, validate
from ..netmaster import effects, resources, services
from ..netmaster.service import Netmaster
from ..netmaster.view import Writes
from ..state import EndpointState, RecordError, TagsState, tables
from ..state.tree import PlannedTree, network_states
from .gobitset import to_fastpath
from .source import ContivTree, MigrationError

# Dependency order: whatever an object refers to is replayed before it.
REPLAY_ORDER = (
    "global",
    "tenant",
    "netprofile",
    "policy",
    "extContractsGroup",
    "network",
    "endpointGroup",
    "rule",
    "serviceLB",
    "appProfile",
    "Bgp",
    "aciGw",
)
COLLECTIONS = {spec.kind: spec.collection for spec in SPECS.values()}
SERVER_FIELDS = frozenset({"links", "link-sets"})  # Contiv stores them with each object; contivd derives its own
State = dict[str, Any]


@dataclass(frozen=True)
class ImportPlan:
    """The store contents to commit (`key → value` under /contiv.io/, the configuration version
    aside) and how many objects of each type they hold (`endpoint` for endpoints)."""

    entries: Mapping[str, Any]
    counts: Mapping[str, int]

    def describe(self) -> list[str]:
        """One line per object type and one per network: what an operator checks before importing."""
        lines = [f"{count:6d} {kind}" for kind, count in sorted(self.counts.items())]
        for value in network_states(self.entries):
            tag = f"vlan {value['pktTag']}" if value["pktTagType"] == "vlan" else f"vxlan {value['extPktTag']} (local vlan {value['pktTag']})"
            lines.append(f"  network {value['tenant']}:{value['networkName']}: {tag}, {value['epCount']} endpoints")
        return lines


async def plan_import(tree: ContivTree) -> ImportPlan:
    """The contivd store contents for `tree`; MigrationError names the first object contivd refuses."""
    unknown = sorted({kind for kind, _ in tree.objects} - set(COLLECTIONS))
    if unknown:
        raise MigrationError(f"Contiv objects of type {', '.join(unknown)} have no contivd equivalent (contiv-api.md Decisions 3, 6)")
    store = MemoryStore()
    netmaster = Netmaster(store, "import")
    for kind in REPLAY_ORDER:
        for (obj_kind, key), obj in sorted(tree.objects.items()):
            if obj_kind == kind:
                try:
                    await netmaster.put_object(COLLECTIONS[kind], key, _replay_body(tree, kind, key, obj))
                except ModelError as exc:
                    raise MigrationError(f"{kind} {key}: contivd refuses it: {exc}") from None
    planned = PlannedTree.read_nowait(store)
    for (kind, key), obj in tree.objects.items():
        if kind in ("network", "serviceLB"):  # the configuration as the user wrote it, without the replay's pinned tag or VIP
            planned.set_object(kind, key, validate(COLLECTIONS[kind], _user_fields(obj), key))
    _overlay(tree, planned)
    await store.txn([], planned.puts())
    view = await netmaster.view()
    writes = Writes(view)
    for tenant in sorted({key for kind, key in tree.objects if kind == "tenant"}):
        effects.refresh_policies(view, writes, tenant)
        tenant_services = [s for s in view.items("serviceLB") if s["tenantName"] == tenant]
        tenant_endpoints = [
            EndpointState.from_json(ep)
            for ep in planned.entries.values()
            if isinstance(ep, dict) and "netID" in ep and ep["netID"].rpartition(".")[2] == tenant
        ]
        services.refresh(view, writes, tenant, tenant_services, tenant_endpoints)
    await store.txn([], writes.ops())
    entries = PlannedTree.read_nowait(store).entries
    counts = Counter(kind for kind, _ in tree.objects)
    counts["endpoint"] = len(tree.endpoints)
    return ImportPlan(entries, dict(counts))


def _replay_body(tree: ContivTree, kind: str, key: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object to replay: a network pinned to Contiv's VLAN/VNI, a service to Contiv's VIP."""
    body = _user_fields(obj)
    if kind == "network":
        state = _network_state(tree, key)
        body["pktTag"] = state.get("pktTag", 0) if state.get("pktTagType") == "vlan" else state.get("extPktTag", 0)
    elif kind == "serviceLB":
        tenant, _, name = key.partition(":")
        vip = tree.services.get(f"{name}:{tenant}", {}).get("ipaddress", "")
        if vip:
            body["ipAddress"] = vip
    return body


def _user_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in SERVER_FIELDS}


def _network_state(tree: ContivTree, key: str) -> Mapping[str, Any]:
    tenant, _, name = key.partition(":")
    state = tree.networks.get(tables.network_id(tenant, name))
    if state is None:
        raise MigrationError(f"network {key}: Contiv's tree has no state for it (/contiv.io/state/nets/{tables.network_id(tenant, name)})")
    return state


def _overlay(tree: ContivTree, planned: PlannedTree) -> None:
    """Lay Contiv's allocations over the replayed state in `planned` (mutated)."""
    tags = TagsState.from_json(planned.tags())
    wanted: list[tuple[resources.TagKind, int, str]] = []
    networks: dict[str, State] = {}
    for (kind, key), _ in sorted(tree.objects.items()):
        if kind != "network":
            continue
        tenant, _, name = key.partition(":")
        ours: State = planned.network(tenant, name)
        _overlay_network(f"network {key}", _network_state(tree, key), ours)
        if ours["pktTagType"] != "vlan":
            tags = resources.release(tags, "localVlan", ours["pktTag"])
            wanted.append(("localVlan", int(_network_state(tree, key)["pktTag"]), f"network {key}"))
            ours["pktTag"] = int(_network_state(tree, key)["pktTag"])
        networks[tables.network_id(tenant, name)] = ours
    group_ids: dict[str, int] = {}
    for (kind, key), _ in sorted(tree.objects.items()):
        if kind != "endpointGroup":
            continue
        tenant, _, name = key.partition(":")
        ours = planned.group(tenant, name)
        theirs = tree.groups.get(f"{name}:{tenant}")
        if theirs is None:
            raise MigrationError(f"endpointGroup {key}: Contiv's tree has no state for it (/contiv.io/state/endpointGroups/{name}:{tenant})")
        network = networks[tables.network_id(tenant, ours["networkName"])]
        tags = resources.release(tags, "epgId", ours["endpointGroupId"])
        group_ids[f"{name}:{tenant}"] = ours["endpointGroupId"] = int(theirs.get("endpointGroupId", 0))
        wanted.append(("epgId", ours["endpointGroupId"], f"endpointGroup {key}"))
        ours.update(pktTag=network["pktTag"], extPktTag=network["extPktTag"], epCount=int(theirs.get("epCount", 0)))
        if ours.get("IPPool"):
            ours["epgIpAllocMap"] = _bitmap(f"endpointGroup {key} epgIpAllocMap", theirs.get("epgIpAllocMap", ""), network)
    for kind, tag, owner in wanted:
        try:
            tags, _ = resources.allocate(tags, kind, requested=tag)
        except ModelError as exc:
            raise MigrationError(f"{owner}: Contiv's {kind} {tag} cannot be kept: {exc} (two objects share it in Contiv)") from None
    planned.tags().update(tags.to_json())
    for endpoint_id, value in sorted(tree.endpoints.items()):
        planned.set_endpoint(endpoint_id, _endpoint(endpoint_id, value, networks, group_ids))


def _overlay_network(label: str, theirs: Mapping[str, Any], ours: State) -> None:
    if (theirs.get("subnetIP"), int(theirs.get("subnetLen", 0))) != (ours["subnetIP"], ours["subnetLen"]):
        raise MigrationError(
            f"{label}: Contiv's state has subnet {theirs.get('subnetIP')}/{theirs.get('subnetLen')}, its configuration {ours['subnetIP']}/{ours['subnetLen']}"
        )
    ours["ipAllocMap"] = _bitmap(f"{label} ipAllocMap", theirs.get("ipAllocMap", ""), ours)
    ours["epCount"] = int(theirs.get("epCount", 0))
    ours["epAddrCount"] = int(theirs.get("epAddrCount", 0))
    ours["networkTag"] = theirs.get("networkTag") or ours["networkTag"]
    if "ipv6SubnetIP" in ours:
        try:
            used = {str(int(IPv6Address(host))): True for host, taken in (theirs.get("ipv6AllocMap") or {}).items() if taken}
            last = int(IPv6Address(theirs.get("ipv6LastHost") or "::"))
        except ValueError as exc:
            raise MigrationError(f"{label}: Contiv's IPv6 allocation map is unreadable: {exc}") from None
        ours.update(ipv6AllocMap={**ours["ipv6AllocMap"], **used}, ipv6LastHost=last)


def _bitmap(label: str, encoded: Any, network: Mapping[str, Any]) -> str:
    try:
        return to_fastpath(str(encoded), 1 << (32 - int(network["subnetLen"])))
    except ValueError as exc:
        raise MigrationError(f"{label}: not a Go bitset Contiv writes: {exc}") from None


def _endpoint(endpoint_id: str, value: Mapping[str, Any], networks: Mapping[str, State], group_ids: Mapping[str, int]) -> dict[str, Any]:
    """Contiv's endpoint state, read and written back through contivd's record (same fields)."""
    try:
        state = EndpointState.from_json(value)
    except RecordError as exc:
        raise MigrationError(f"endpoint {endpoint_id}: {exc}") from None
    if state.id != endpoint_id:
        raise MigrationError(f"endpoint {endpoint_id}: its state says id {state.id!r}")
    if state.net_id not in networks:
        raise MigrationError(f"endpoint {endpoint_id}: its network {state.net_id} is not in Contiv's configuration")
    if state.endpoint_group_key and group_ids.get(state.endpoint_group_key) != state.endpoint_group_id:
        raise MigrationError(
            f"endpoint {endpoint_id}: endpoint group {state.endpoint_group_key} (id {group_ids.get(state.endpoint_group_key)}) "
            f"does not match its endpointGroupId {state.endpoint_group_id}"
        )
    return state.to_json()

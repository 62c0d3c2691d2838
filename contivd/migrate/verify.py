"""After an import: does contivd answer what the Contiv tree held? Counts and a per-object diff.

The check reads contivd only through its REST API, as any client would, and compares with the
source values themselves (Contiv's objects, its state, its Go bitsets decoded here), not with
the plan, so a mistake in the conversion shows up as a difference. Every difference is one
line naming the object, the field, Contiv's value and contivd's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address
from typing import Any

import httpx

from ..model import SPECS
from .gobitset import go_bitset_indices
from .plan import SERVER_FIELDS
from .source import ContivTree

COLLECTIONS = {spec.kind: spec.collection for spec in SPECS.values()}
ENDPOINT_ADDRESSES = (("ipAddress", 0), ("ipv6Address", 1))  # Contiv field → index in the inspect `ipAddress` pair


def verification_plan(tree: ContivTree) -> list[str]:
    """What verify_import will compare, for --dry-run."""
    kinds = sorted({kind for kind, _ in tree.objects})
    return [
        f"count of every object type ({', '.join(kinds)}) and of endpoints",
        f"configuration of each of the {len(tree.objects)} objects, field by field",
        f"each of the {len(tree.networks)} networks: VLAN / VXLAN / local VLAN, endpoint count, allocated IPv4 addresses"
        " (those a network can hand out: Contiv also marks the subnet's network and broadcast addresses, which are never handed out)",
        f"each of the {len(tree.groups)} endpoint groups: endpoint count, allocated pool addresses",
        f"each of the {len(tree.endpoints)} endpoints: IPv4, IPv6, MAC, endpoint group id and key, host",
        f"each of the {len(tree.services)} service load balancers: VIP and providers",
    ]


def _absent(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value == [] or value == {}


def _config(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The user's fields of an object: Go's omitempty makes a zero value and an absent one equal."""
    return {k: v for k, v in obj.items() if k not in SERVER_FIELDS and k != "key" and not _absent(v)}


def _as_contivd_stores(kind: str, obj: Mapping[str, Any], tree: ContivTree) -> Mapping[str, Any]:
    """A rule naming a network carries that network's subnet as its address in contivd; Contiv
    filled it in only once the policy was applied to a group (Decision 7), so an empty one in the
    source is expected to come back as the subnet."""
    if kind != "rule":
        return obj
    derived = dict(obj)
    for side in ("from", "to"):
        network = tree.objects.get(("network", f"{obj.get('tenantName')}:{obj.get(f'{side}Network')}"))
        if obj.get(f"{side}Network") and _absent(obj.get(f"{side}IpAddress")) and network is not None:
            derived[f"{side}IpAddress"] = network.get("subnet")
    return derived


def _ranges(text: str) -> set[int]:
    """Contiv's `a.b.c.d-a.b.c.e, a.b.c.f` address runs as integers."""
    found: set[int] = set()
    for run in filter(None, (part.strip() for part in (text or "").split(","))):
        first, _, last = run.partition("-")
        found.update(range(int(IPv4Address(first)), int(IPv4Address(last or first)) + 1))
    return found


def _allocated(encoded: str, base: str, first: int, last: int) -> set[int]:
    """Addresses whose bit is set in a Contiv bitmap, between two addresses (inclusive)."""
    start = int(IPv4Address(base))
    return {start + i for i in go_bitset_indices(encoded)[1] if first <= start + i <= last}


def _host_range(network: Mapping[str, Any]) -> tuple[int, int]:
    """The addresses a network can hand out (first, last). Contiv's `ipAddrRange` spans the whole
    subnet and its bitset marks the network and broadcast addresses as taken; contivd's inspect
    lists the hosts only. Both mean "never handed out", so the check compares the hosts."""
    first, _, last = str(network.get("ipAddrRange", "")).partition("-")
    low, high = int(IPv4Address(first)), int(IPv4Address(last or first))
    length = int(network.get("subnetLen") or 32)
    if length <= 30:
        base = int(IPv4Address(str(network["subnetIP"])))
        low, high = max(low, base + 1), min(high, base + (1 << (32 - length)) - 2)
    return low, high


def _show(addresses: Iterable[int]) -> str:
    return ", ".join(str(IPv4Address(a)) for a in sorted(addresses)) or "none"


class _Diff:
    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.lines: list[str] = []

    def get(self, path: str) -> Any:
        answer = self.http.get(path, headers={"Accept": "application/json"})
        if answer.status_code != 200:
            self.lines.append(f"{path}: HTTP {answer.status_code} {answer.text.strip()[:200]}")
            return None
        return answer.json()

    def compare(self, what: str, field: str, theirs: Any, ours: Any) -> None:
        if theirs != ours and not (_absent(theirs) and _absent(ours)):
            self.lines.append(f"{what}: {field}: Contiv {theirs!r}, contivd {ours!r}")


def verify_import(tree: ContivTree, http: httpx.Client) -> tuple[list[str], list[str]]:
    """(count lines, differences) between `tree` and the contivd API `http` talks to."""
    diff = _Diff(http)
    counts = []
    for kind in sorted({kind for kind, _ in tree.objects}):
        listed = diff.get(f"/api/v1/{COLLECTIONS[kind]}/") or []
        counts.append(f"{kind}: Contiv {tree.count(kind)}, contivd {len(listed)}")
        diff.compare(f"{kind} count", "objects", tree.count(kind), len(listed))
    for (kind, key), obj in sorted(tree.objects.items()):
        ours = diff.get(f"/api/v1/{COLLECTIONS[kind]}/{key}/")
        if ours is not None:
            theirs_cfg, ours_cfg = _config(_as_contivd_stores(kind, obj, tree)), _config(ours)
            for field in sorted(set(theirs_cfg) | set(ours_cfg)):
                diff.compare(f"{kind} {key}", field, theirs_cfg.get(field), ours_cfg.get(field))
    seen_endpoints = 0
    for (kind, key), _ in sorted(tree.objects.items()):
        if kind == "network":
            seen_endpoints += _network(diff, tree, key)
        elif kind == "endpointGroup":
            _group(diff, tree, key)
        elif kind == "serviceLB":
            _service(diff, tree, key)
    counts.append(f"endpoint: Contiv {len(tree.endpoints)}, contivd {seen_endpoints}")
    diff.compare("endpoint count", "endpoints", len(tree.endpoints), seen_endpoints)
    return counts, diff.lines


def _network(diff: _Diff, tree: ContivTree, key: str) -> int:
    tenant, _, name = key.partition(":")
    net_id = f"{name}.{tenant}"
    theirs = tree.networks.get(net_id, {})
    oper = (diff.get(f"/api/v1/inspect/networks/{key}/") or {}).get("Oper", {})
    what = f"network {key}"
    diff.compare(what, "pktTag", theirs.get("pktTag", 0), oper.get("pktTag", 0))
    diff.compare(what, "externalPktTag", theirs.get("extPktTag", 0), oper.get("externalPktTag", 0))
    diff.compare(what, "numEndpoints", theirs.get("epCount", 0), oper.get("numEndpoints", 0))
    if theirs.get("ipAddrRange"):
        expected = _allocated(str(theirs.get("ipAllocMap", "")), str(theirs["subnetIP"]), *_host_range(theirs))
        got = _ranges(oper.get("allocatedIPAddresses", ""))
        if expected != got:
            diff.lines.append(f"{what}: allocated addresses: only in Contiv {_show(expected - got)}; only in contivd {_show(got - expected)}")
    listed = {ep.get("endpointID"): ep for ep in oper.get("endpoints") or ()}
    for endpoint_id, ep in sorted(tree.endpoints.items()):
        if ep.get("netID") != net_id:
            continue
        ours = listed.get(ep.get("endpointID"))
        if ours is None:
            diff.lines.append(f"endpoint {endpoint_id}: missing in contivd")
            continue
        addresses = list(ours.get("ipAddress") or ["", ""]) + ["", ""]
        for field, index in ENDPOINT_ADDRESSES:
            diff.compare(f"endpoint {endpoint_id}", field, ep.get(field, ""), addresses[index])
        for field in ("macAddress", "endpointGroupId", "endpointGroupKey", "homingHost"):
            diff.compare(f"endpoint {endpoint_id}", field, ep.get(field), ours.get(field))
    return len(listed)


def _group(diff: _Diff, tree: ContivTree, key: str) -> None:
    tenant, _, name = key.partition(":")
    theirs = tree.groups.get(f"{name}:{tenant}", {})
    oper = (diff.get(f"/api/v1/inspect/endpointGroups/{key}/") or {}).get("Oper", {})
    diff.compare(f"endpointGroup {key}", "numEndpoints", theirs.get("epCount", 0), oper.get("numEndpoints", 0))
    pool = str(theirs.get("IPPool", ""))
    network = tree.networks.get(f"{theirs.get('networkName')}.{tenant}", {})
    if pool and network:
        first, _, last = pool.partition("-")
        expected = _allocated(str(theirs.get("epgIpAllocMap", "")), str(network["subnetIP"]), int(IPv4Address(first)), int(IPv4Address(last)))
        got = _ranges(oper.get("allocatedIPAddresses", ""))
        if expected != got:
            diff.lines.append(f"endpointGroup {key}: pool addresses: only in Contiv {_show(expected - got)}; only in contivd {_show(got - expected)}")


def _service(diff: _Diff, tree: ContivTree, key: str) -> None:
    tenant, _, name = key.partition(":")
    theirs = tree.services.get(f"{name}:{tenant}", {})
    oper = (diff.get(f"/api/v1/inspect/serviceLBs/{key}/") or {}).get("Oper", {})
    diff.compare(f"serviceLB {key}", "serviceVip", theirs.get("ipaddress", ""), oper.get("serviceVip", ""))
    expected = sorted(str(p.get("IPAddress", "")) for p in (theirs.get("providers") or {}).values())
    got = sorted(str((p.get("ipAddress") or [""])[0]) for p in oper.get("providers") or ())
    diff.compare(f"serviceLB {key}", "providers", expected, got)

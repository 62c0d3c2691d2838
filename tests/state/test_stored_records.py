"""Every record family outside the netmaster's tree, stored through contivd.state: the same key
and the same JSON text as before they moved into state/ (the literals were written by the
previous code), read back equal, and an unusable record reported without hiding the rest."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from contivd.http.audit import AuditTrail
from contivd.state import KubeBackend, KubeServicePort, KubeServiceState, NodeRecord, RecordError
from contivd.state.audit import AUDIT, AuditEntry
from contivd.state.ca import CLUSTER_CA, CaRecord, RetiredCa
from contivd.state.families import KUBE_SERVICES, NETPOL_PODS, NODES
from contivd.state.stored import Family
from contivd.state.tokens import TOKENS, Role, TokenRecord
from openflow.inputs import NetpolPod, NetpolRule
from raftstore import MemoryStore

RULE = NetpolRule("ingress", 10, 0xC6120102, (0xC6120100, 24), 6, (80, 81), "allow", "np-1")
SERVICE = KubeServiceState(
    "shop",
    "web",
    "10.96.0.10",
    (KubeServicePort("http", "TCP", 80, 30080, (KubeBackend("198.18.1.2", 8080),)),),
    0,
    "42",
    ("198.18.9.9",),
    True,
    31000,
)

CASES: list[tuple[Family[Any], str, Any, str, str]] = [
    (
        TOKENS,
        "ops",
        TokenRecord("ops", Role.OPERATOR, "ab12", 100.0, 150.0),
        "/contivd/auth/tokens/ops",
        '{"name": "ops", "role": "operator", "digest": "ab12", "created": 100.0, "expires": 150.0, "revoked": null}',
    ),
    (
        TOKENS,
        "adm",
        TokenRecord("adm", Role.ADMIN, "cd34", 100.0, None, 120.5),
        "/contivd/auth/tokens/adm",
        '{"name": "adm", "role": "admin", "digest": "cd34", "created": 100.0, "expires": null, "revoked": 120.5}',
    ),
    (
        AUDIT,
        "00000000001500000-n1-000000000",
        AuditEntry(1.5, "n1", "token:a", "POST", "/api/v1/<collection>/<key>/", "networks/default:n", 201),
        "/contivd/audit/00000000001500000-n1-000000000",
        '{"time": 1.5, "node": "n1", "who": "token:a", "method": "POST", "route": "/api/v1/<collection>/<key>/", "object": "networks/default:n", "status": 201}',
    ),
    (
        NODES,
        "n1",
        NodeRecord("n1", "127.0.0.1:7001", "https://127.0.0.1:9001", "127.0.0.1", "198.18.0.1", False, "1.0", "http://a", True),
        "/contiv.io/nodes/n1",
        '{"name": "n1", "raft_address": "127.0.0.1:7001", "api_url": "https://127.0.0.1:9001", "control_ip": "127.0.0.1", "vtep_ip": "198.18.0.1", '
        '"readonly": false, "version": "1.0", "agent_url": "http://a", "kubernetes": true}',
    ),
    (
        NODES,
        "f1",
        NodeRecord("f1", None, "https://x", "", "", True, "1.0"),
        "/contiv.io/nodes/f1",
        '{"name": "f1", "raft_address": null, "api_url": "https://x", "control_ip": "", "vtep_ip": "", "readonly": true, "version": "1.0", "agent_url": ""}',
    ),
    (
        KUBE_SERVICES,
        "shop/web",
        SERVICE,
        "/contiv.io/k8s/services/shop/web",
        '{"namespace": "shop", "name": "web", "clusterIP": "10.96.0.10", "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080, '
        '"backends": [{"ip": "198.18.1.2", "port": 8080}]}], "affinityTimeoutSeconds": 0, "resourceVersion": "42", "externalIPs": ["198.18.9.9"], '
        '"externalTrafficPolicyLocal": true, "healthCheckNodePort": 31000}',
    ),
    (
        NETPOL_PODS,
        "shop/web-1",
        NetpolPod("shop/web-1", (RULE,)),
        "/contiv.io/k8s/netpol/shop/web-1",
        '{"pod": "shop/web-1", "rules": [["ingress", 10, "198.18.1.2", "198.18.1.0/24", 6, [80, 81], "allow", "np-1"]]}',
    ),
]


@pytest.mark.parametrize(("family", "id", "record", "key", "text"), CASES, ids=[f"{c[0].prefix}{c[1]}" for c in CASES])
async def test_a_record_is_stored_under_its_old_key_as_its_old_json_and_reads_back_equal(
    family: Family[Any], id: str, record: Any, key: str, text: str
) -> None:
    put = family.put(id, record)
    assert (put.key, json.dumps(put.value)) == (key, text)
    store = MemoryStore()
    revision = await family.write(store, id, record)
    assert store.get_nowait(key).value == json.loads(text)  # type: ignore[union-attr]  # the store keeps its own canonical form
    assert family.get_nowait(store, id) == record and family.list_nowait(store) == [record] == await family.list(store)
    held = await family.get(store, id)
    assert held is not None and (held.record, held.mod_revision) == (record, revision)
    assert family.ids_nowait(store) == [id] == await family.ids(store)
    assert (await store.txn([family.unchanged(id, held)], [family.delete(id)])).succeeded and family.get_nowait(store, id) is None
    assert not (await store.txn([family.unchanged(id, held)], [family.put(id, record)])).succeeded, "a record changed meanwhile is not overwritten"


@pytest.mark.parametrize(
    ("record", "text"),
    [
        (
            CaRecord("NEW", "sealed", "n2", (RetiredCa("OLD", 1060.0),)),
            '{"certificate": "NEW", "sealedKey": "sealed", "createdBy": "n2", "retired": [{"certificate": "OLD", "until": 1060.0}]}',
        ),
        (CaRecord("ONLY", "sealed", "n1"), '{"certificate": "ONLY", "sealedKey": "sealed", "createdBy": "n1"}'),
    ],
)
async def test_the_cluster_ca_is_stored_as_before_and_created_once(record: CaRecord, text: str) -> None:
    put = CLUSTER_CA.put(record)
    assert (put.key, json.dumps(put.value)) == ("/contiv.io/tls/ca", text)
    store = MemoryStore()
    assert (await store.txn([CLUSTER_CA.absent()], [put])).succeeded
    assert not (await store.txn([CLUSTER_CA.absent()], [put])).succeeded, "a second creator loses"
    held = await CLUSTER_CA.get(store)
    assert held is not None and held.record == record == CLUSTER_CA.get_nowait(store)
    assert (await store.txn([CLUSTER_CA.unchanged(held)], [CLUSTER_CA.put(record)])).succeeded


async def test_an_unusable_record_is_reported_beside_the_usable_ones() -> None:
    store = MemoryStore()
    await NODES.write(store, "n1", CASES[3][2])
    await store.put(NODES.key("n2"), {"api_url": "no name"})
    for listed in (NODES.each_nowait(store), await NODES.each(store)):
        assert listed[0] == ("n1", CASES[3][2])
        assert listed[1][0] == "n2" and isinstance(listed[1][1], RecordError) and "KeyError: 'name'" in str(listed[1][1])


async def test_the_audit_trail_stores_its_entries_under_time_node_and_sequence() -> None:
    store = MemoryStore()
    trail = AuditTrail(store, "n1")
    trail.record("root", "POST", "/r", "o", 200)
    trail.record("root", "POST", "/r", "p", 200)
    await trail.flush()
    stored_keys = [kv.key for kv in store.list_nowait("/contivd/audit/")]
    assert [re.fullmatch(r"/contivd/audit/\d{17}-n1-(\d{9})", k).group(1) for k in stored_keys] == ["000000000", "000000001"]  # type: ignore[union-attr]

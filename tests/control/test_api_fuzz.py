"""Property-based fuzzing of every route the served `/api/v1/openapi.json` lists, against a real
contivd: whatever the path parameters and the body (JSON of any shape, nested thousands deep,
or not JSON at all), a client asking for typed errors (`Accept: application/json`) gets a 2xx
or a 4xx, never a 5xx, and the node stays up.

hypothesis rather than schemathesis: the document declares bodies only as `object`, so
schemathesis would generate no more than these strategies do, and it would add a pytest plugin
and five packages to every test run. ~25 examples per operation keep the run near a minute.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contivd import __version__
from contivd.api.routes import openapi_document
from contivd.model import COLLECTIONS
from tests.support.contivd_nodes import ContivdProcess

OPERATIONS = sorted((path, method) for path, item in openapi_document(__version__)["paths"].items() for method in item)  # type: ignore[attr-defined]
FIELDS = ["tenantName", "networkName", "groupName", "policyName", "subnet", "gateway", "encap", "key", "TenantName", "NetworkName",
          "EndpointID", "ServiceName", "EndpointGroup", "EndpointGroupKey", "AddrPool", "IPv4Address", "Labels", "hostname",
          "routerip", "as", "neighbor-as", "neighbor", "ipv6Subnet", "pktTag", "nwType", "rules", "ruleId", "direction", "action"]  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["", "default", "198.18.0.0/16", "198.18.0.1", "1-4094", "vxlan", "vlan"])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), inner, max_size=6),
    max_leaves=20,
)


def nested(depth: int, kind: str) -> bytes:
    return (("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)).encode()


BODIES = st.one_of(
    JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, min_size=1).map(lambda value: json.dumps(value).encode()),
    st.builds(nested, st.integers(1, 5000), st.sampled_from(["list", "object"])),
    st.binary(max_size=64),
)
PARAMETERS = st.one_of(
    st.sampled_from(sorted(COLLECTIONS) + ["Bgps", "default", "default:net", "ep", "net", "group"]), st.text(min_size=1, max_size=24)
)


@pytest.fixture(scope="module")
def client(node: ContivdProcess) -> Any:
    with node.socket_client(headers={"Accept": "application/json"}, timeout=30) as client:
        yield client


def test_the_served_document_is_the_one_fuzzed(client: httpx.Client) -> None:
    served = client.get("/api/v1/openapi.json").json()
    assert sorted((path, method) for path, item in served["paths"].items() for method in item) == OPERATIONS


@pytest.mark.parametrize("path, method", OPERATIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_route_answers_a_5xx(client: httpx.Client, node: ContivdProcess, path: str, method: str, data: st.DataObject) -> None:
    url = path
    for name in [part[1:-1] for part in path.split("/") if part.startswith("{")]:
        url = url.replace("{" + name + "}", quote(data.draw(PARAMETERS, label=name), safe=""), 1)
    body = data.draw(BODIES, label="body") if method in ("post", "put") or data.draw(st.booleans()) else b""
    answer = client.request(method.upper(), url, content=body)
    assert answer.status_code < 500, f"{method.upper()} {url} {body[:200]!r}: {answer.status_code} {answer.text[:300]}"
    assert node.alive()

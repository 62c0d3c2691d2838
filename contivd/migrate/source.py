"""Reading a Contiv installation's etcd v2 tree, read-only, into a typed `ContivTree`.

Only HTTP GETs on the v2 keys API (`/v2/keys/contiv.io?recursive=true`) and `/version`: the
source cluster is never written. Every failure is a MigrationError whose message says what is
wrong in the user's terms: etcd unreachable, its v2 API disabled, no Contiv tree there, or a
value that is not what Contiv writes (named by its key).

Not responsible for: what the objects mean (contivd.migrate.plan validates and converts them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded by read_contiv_values: every node's API imports this module (commit.py), httpx costs ~4 MB
    import httpx

ROOT = "/contiv.io"
MODEL_PREFIX = f"{ROOT}/obj/modeldb/"
STATE_PREFIX = f"{ROOT}/state/"
READ_TIMEOUT_SECONDS = 30.0  # one recursive GET of the whole tree: large installations take a while


class MigrationError(Exception):
    """The import cannot go on; the message names the source, object or check that failed."""


Obj = Mapping[str, Any]


@dataclass(frozen=True)
class ContivTree:
    """Contiv's keys that matter for the import, each value parsed from its JSON.

    `objects`: modeldb objects by (type, key); `networks`, `groups`, `endpoints`, `services`:
    state by Contiv's id (`net.tenant`, `group:tenant`, endpoint id, `service:tenant`)."""

    objects: Mapping[tuple[str, str], Obj] = field(default_factory=dict)
    networks: Mapping[str, Obj] = field(default_factory=dict)
    groups: Mapping[str, Obj] = field(default_factory=dict)
    endpoints: Mapping[str, Obj] = field(default_factory=dict)
    services: Mapping[str, Obj] = field(default_factory=dict)

    @classmethod
    def from_values(cls, values: Mapping[str, str]) -> ContivTree:
        """Parse etcd's flat `key → value text`; MigrationError names the first bad key."""
        if not any(key.startswith(MODEL_PREFIX) for key in values):
            raise MigrationError(f"no Contiv objects under {MODEL_PREFIX}: this etcd does not hold a Contiv installation's tree")
        objects: dict[tuple[str, str], Obj] = {}
        states: dict[str, dict[str, Obj]] = {"nets": {}, "endpointGroups": {}, "eps": {}, "serviceLB": {}}
        for key, text in sorted(values.items()):
            if key.startswith(MODEL_PREFIX):
                kind, _, name = key[len(MODEL_PREFIX) :].partition("/")
                if name:
                    objects[(kind, name)] = _parse(key, text)
            elif key.startswith(STATE_PREFIX):
                section, _, name = key[len(STATE_PREFIX) :].partition("/")
                if section in states and name:
                    states[section][name] = _parse(key, text)
        return cls(objects, states["nets"], states["endpointGroups"], states["eps"], states["serviceLB"])

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.objects if k == kind)


def _parse(key: str, text: str) -> Obj:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise MigrationError(f"{key}: not JSON ({exc}); is this Contiv's tree?") from None
    if not isinstance(value, dict):
        raise MigrationError(f"{key}: a JSON {type(value).__name__}, Contiv writes objects there")
    return value


def _flatten(node: Mapping[str, Any], out: dict[str, str]) -> None:
    if node.get("dir"):
        for child in node.get("nodes") or ():
            _flatten(child, out)
    elif "value" in node:
        out[str(node["key"])] = str(node["value"])


def read_contiv_values(etcd: str, transport: httpx.BaseTransport | None = None) -> dict[str, str]:
    """Every key under /contiv.io of the etcd at `etcd` (`http://host:2379`) and its value text,
    through read-only GETs; ContivTree.from_values parses them."""
    import httpx

    base = etcd.rstrip("/")
    try:
        with httpx.Client(base_url=base, timeout=READ_TIMEOUT_SECONDS, transport=transport) as http:
            answer = http.get(f"/v2/keys{ROOT}", params={"recursive": "true", "sorted": "true"})
            if answer.status_code == 404 and not _is_v2_answer(answer):
                raise MigrationError(_v2_disabled(http, base))
    except httpx.HTTPError as exc:
        raise MigrationError(f"cannot reach etcd at {base}: {exc or type(exc).__name__}") from None
    body = _json(answer)
    if answer.status_code == 404 and isinstance(body, dict) and body.get("errorCode") == 100:
        raise MigrationError(f"etcd at {base} has no {ROOT} tree: this is not a Contiv installation's etcd")
    if answer.status_code != 200 or not isinstance(body, dict) or not isinstance(body.get("node"), dict):
        raise MigrationError(f"etcd at {base} answered GET /v2/keys{ROOT} with HTTP {answer.status_code}: {answer.text.strip()[:200]}")
    values: dict[str, str] = {}
    _flatten(body["node"], values)
    return values


def _json(answer: httpx.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        return None


def _is_v2_answer(answer: httpx.Response) -> bool:
    """The v2 keys API answers a missing key with a JSON error; a disabled API with a bare 404 page."""
    body = _json(answer)
    return isinstance(body, dict) and "errorCode" in body


def _v2_disabled(http: httpx.Client, base: str) -> str:
    version = _json(http.get("/version"))
    if isinstance(version, dict) and "etcdserver" in version:
        return (
            f"etcd {version['etcdserver']} at {base} does not serve the v2 keys API (v3 only): Contiv keeps its state "
            "through the v2 API, so the Contiv cluster's etcd runs with --enable-v2; point --etcd at that etcd"
        )
    return f"{base} answers, but neither /v2/keys nor /version like etcd: is this etcd's client URL?"

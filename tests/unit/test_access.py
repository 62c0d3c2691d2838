"""Pure parts of access control: tokens, ctl.toml settings, audit keys (the HTTP behaviour is in tests/control/test_access.py)."""

from __future__ import annotations

import pytest

from contivd.ctl.client import CtlError
from contivd.ctl.config import CtlSettings, effective, parse_settings, render_settings
from contivd.http.audit import AuditEntry, AuditTrail, object_key, stored
from contivd.http.errors import ForbiddenError, UnauthorizedError
from contivd.http.tokens import Principal, Role, check_token, new_token, require, token_name
from contivd.status.snapshot import recent_writes
from raftstore import MemoryStore


def test_a_token_is_stored_only_as_its_digest_and_checks_against_it() -> None:
    token, record = new_token("ops", Role.OPERATOR, now=100.0, ttl=50)
    assert token.startswith("ctd1.ops.") and token not in str(record.to_json()) and record.expires == 150.0
    assert token_name(token) == "ops"
    assert check_token(token, record, now=149.9) == Principal("token:ops", Role.OPERATOR)
    with pytest.raises(UnauthorizedError, match="token 'ops' expired"):
        check_token(token, record, now=150.0)
    with pytest.raises(UnauthorizedError, match="^unknown token$"):
        check_token(token + "x", record, now=100.0)
    with pytest.raises(UnauthorizedError, match="^unknown token$"):
        check_token(token, None, now=100.0)
    revoked = type(record).from_json({**record.to_json(), "revoked": 120.0})
    with pytest.raises(UnauthorizedError, match="has been revoked"):
        check_token(token, revoked, now=130.0)


@pytest.mark.parametrize("text", ["", "ctd1.a", "ctd2.a.b", "ctd1.-a.b", "ctd1.a.b.c", "Bearer"])
def test_malformed_tokens_claim_no_name(text: str) -> None:
    assert token_name(text) is None


def test_roles_order_and_the_node_role_is_never_a_tokens() -> None:
    require(Principal("token:a", Role.ADMIN), Role.OPERATOR)
    with pytest.raises(ForbiddenError, match="token:v has role viewer; this request needs role operator"):
        require(Principal("token:v", Role.VIEWER), Role.OPERATOR)
    assert Role.for_token("Operator") is Role.OPERATOR
    for text in ("node", "root", ""):
        with pytest.raises(ValueError, match="role must be one of viewer, operator, admin"):
            Role.for_token(text)
    with pytest.raises(ValueError, match="token name"):
        new_token("bad name", Role.VIEWER, 0.0, None)


def test_ctl_settings_round_trip_and_precedence() -> None:
    settings = CtlSettings("https://n1:9999", 'to"ken', "/etc/ca.pem")
    assert parse_settings(render_settings(settings), "f") == settings
    assert effective("http://127.0.0.1:9999", False, None, settings) == settings, "the file fills what flags and env left"
    assert effective("https://n1:9999", True, "flag", settings).token == "flag"
    assert effective("https://other:9999", True, None, settings) == CtlSettings("https://other:9999"), "never the file's token elsewhere"
    with pytest.raises(CtlError, match="not valid TOML"):
        parse_settings("server = ", "f")
    with pytest.raises(CtlError, match="token must be strings"):
        parse_settings("token = 3", "f")


def test_audit_object_keys_and_the_pages_recent_writes() -> None:
    assert object_key({"collection": "networks", "key": "default:n"}, b"") == "networks/default:n"
    body = b'{"TenantName": "default", "NetworkName": "n", "EndpointID": "e1", "Labels": {}}'
    assert object_key({}, body) == "TenantName=default NetworkName=n EndpointID=e1"
    assert object_key({}, b"[1") == "" and object_key({}, b"[]") == ""
    entries = [AuditEntry(float(i), "n1", "local", "POST", "/r", str(i), 200) for i in range(30)]
    shown = recent_writes(entries)
    assert len(shown) == 20 and shown[0]["object"] == "29" and shown[-1]["object"] == "10"


async def test_the_trail_stores_batches_and_keeps_the_newest_entries() -> None:
    store = MemoryStore()
    trail = AuditTrail(store, "n1", max_entries=3)
    for index in range(2):
        trail.record("local", "POST", "/r", f"o{index}", 200)
    await trail.flush()
    assert [e.object for e in stored(store)] == ["o0", "o1"]
    for index in range(2, 6):
        trail.record("token:a", "DELETE", "/r", f"o{index}", 403)
    await trail.flush()
    assert [e.object for e in stored(store)] == ["o3", "o4", "o5"], "the oldest stored entries make room"
    assert stored(store)[-1] == AuditEntry(stored(store)[-1].time, "n1", "token:a", "DELETE", "/r", "o5", 403)

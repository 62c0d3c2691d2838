"""Pure parts of access control: tokens, who a caller is (socket, loopback, token), ctl.toml
settings and ctl's server, audit keys (the HTTP behaviour is in tests/control/test_access.py and
tests/control/test_local_trust.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contivd.ctl.client import DEFAULT_SERVER, CtlError, default_server, http_target, unreachable_socket
from contivd.ctl.config import CtlSettings, effective, parse_settings, render_settings
from contivd.http.audit import AuditTrail, object_key, stored
from contivd.http.auth import Authenticator
from contivd.http.errors import ForbiddenError, UnauthorizedError
from contivd.http.local_socket import unix_peer
from contivd.http.tokens import Principal, Role, check_token, new_token, require, token_name
from contivd.state.audit import AuditEntry
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


OPS_TOKEN, OPS_RECORD = new_token("ops", Role.OPERATOR, now=100.0, ttl=None)


def _authenticator(loopback_role: Role | None) -> Authenticator:
    return Authenticator("secret", lambda name: OPS_RECORD if name == "ops" else None, clock=lambda: 100.0, loopback_role=loopback_role)


def test_root_on_the_socket_is_admin_and_loopback_at_most_a_viewer() -> None:
    strict, viewer = _authenticator(None), _authenticator(Role.VIEWER)
    for access in (strict, viewer):
        assert access.identify("POST", "/x", b"", {}, unix_peer(0)) == Principal("root", Role.ADMIN)
        with pytest.raises(UnauthorizedError, match="root on the node's unix socket"):
            access.identify("GET", "/x", b"", {}, unix_peer(65534))  # never reaches here (cut at accept), refused anyway
        with pytest.raises(UnauthorizedError, match="needs credentials"):
            access.identify("GET", "/x", b"", {}, "198.18.0.1")
    with pytest.raises(UnauthorizedError):
        strict.identify("GET", "/x", b"", {}, "127.0.0.1")  # the default: no loopback access at all
    for address in ("127.0.0.1", "::1"):
        loopback = viewer.identify("GET", "/x", b"", {}, address)
        assert loopback.role is Role.VIEWER and loopback.name == "loopback"
        with pytest.raises(ForbiddenError, match="needs role operator: .*contivd ctl` as root on the node"):
            require(loopback, Role.OPERATOR)
    with pytest.raises(UnauthorizedError):
        viewer.identify("GET", "/x", b"", {}, "<local>")  # the old unix-socket peer name means nothing now
    with pytest.raises(ValueError, match="at most viewers"):
        _authenticator(Role.OPERATOR)


def test_a_token_wins_over_the_peer_and_netctls_header_is_one() -> None:
    access = _authenticator(Role.VIEWER)
    token = OPS_TOKEN
    assert access.identify("POST", "/x", b"", {"x-auth-token": token}, "127.0.0.1") == Principal("token:ops", Role.OPERATOR)
    assert access.identify("POST", "/x", b"", {"authorization": f"Bearer {token}"}, unix_peer(0)).name == "token:ops"
    with pytest.raises(UnauthorizedError, match="^unknown token$"):
        access.identify("GET", "/x", b"", {"x-auth-token": "ctd1.ops.wrong"}, unix_peer(0))
    with pytest.raises(UnauthorizedError, match="cluster secret"):
        access.identify("GET", "/x", b"", {"x-auth-token": "secret"}, "127.0.0.1")


def test_ctl_defaults_to_the_socket_as_root_when_it_exists(tmp_path: Path) -> None:
    socket = tmp_path / "api.sock"
    assert default_server(0, socket) == DEFAULT_SERVER, "no socket: loopback TCP"
    socket.touch()
    assert default_server(0, socket) == f"unix:{socket}" and default_server(1000, socket) == DEFAULT_SERVER
    assert http_target(f"unix:{socket}")[0] == "http://contivd" and http_target("https://n:9999/") == ("https://n:9999", None)
    assert unreachable_socket(socket) is None
    assert "no contivd API socket at" in (unreachable_socket(tmp_path / "none.sock") or "")

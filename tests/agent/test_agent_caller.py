"""Who the agent API lets in (`agent_caller_refused`), with the real Authenticator and signatures:
root over the agent socket and the netmaster's signed calls; no token, no loopback caller."""

from __future__ import annotations

import time

import pytest

from contivd.agent_api import agent_caller_refused
from contivd.http import auth
from contivd.http.tokens import Role, new_token

SECRET = "unit-test-cluster-secret"
PATH = "/debug/reclaimEndpoint/c1.default-x"
SOCKET = "/run/contivd/agent.sock"
ADMIN_TOKEN, ADMIN_RECORD = new_token("ops", Role.ADMIN, now=time.time(), ttl=None)


def refused(headers: dict[str, str], remote: str | None, secret: str | None = SECRET) -> str | None:
    access = auth.Authenticator(secret, lambda name: ADMIN_RECORD if name == "ops" else None)
    why = agent_caller_refused(access, "DELETE", PATH, b"", headers, remote, SOCKET)
    return None if why is None else str(why)


def signed(secret: str = SECRET) -> dict[str, str]:
    return {auth.SIGNATURE_HEADER.lower(): auth.sign(secret, "DELETE", PATH, b""), auth.PRINCIPAL_HEADER.lower(): "node:n2"}


@pytest.mark.parametrize("remote", ["198.18.0.2", "127.0.0.1"])
def test_the_netmasters_signed_call_is_answered(remote: str) -> None:
    assert refused(signed(), remote) is None


@pytest.mark.parametrize("secret", [SECRET, None])
def test_root_over_the_agent_socket_is_answered_with_or_without_a_cluster_secret(secret: str | None) -> None:
    assert refused({}, "unix-uid:0", secret) is None


@pytest.mark.parametrize(
    "headers, remote",
    [
        ({}, "127.0.0.1"),  # loopback: any local user, a hostNetwork pod
        ({}, "::1"),
        ({}, "<local>"),
        ({}, "198.18.0.2"),
        ({"authorization": f"Bearer {ADMIN_TOKEN}"}, "127.0.0.1"),  # even an admin token
        ({"authorization": f"Bearer {ADMIN_TOKEN}"}, "198.18.0.2"),
        ({"authorization": f"Bearer {SECRET}"}, "198.18.0.2"),
        ({}, "unix-uid:1000"),  # serve_unix cuts such peers at accept; refused here as well
    ],
)
def test_tokens_and_loopback_callers_are_refused_with_the_alternatives_named(headers: dict[str, str], remote: str) -> None:
    why = refused(headers, remote)
    assert (
        why is not None
        and "signed calls only" in why
        and "contivd ctl trace" in why
        and f"curl -X DELETE --unix-socket {SOCKET} http://agent{PATH}" in why
    ), why


@pytest.mark.parametrize("headers", [signed("another-clusters-secret"), {auth.SIGNATURE_HEADER.lower(): "1700000000.000:" + "0" * 64}])
def test_a_bad_signature_is_refused(headers: dict[str, str]) -> None:
    assert refused(headers, "198.18.0.2") == "invalid node signature"
    assert refused(signed(), "198.18.0.2", secret=None) == "invalid node signature"  # a node without the secret verifies none

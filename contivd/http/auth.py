"""Authentication: node-to-node calls signed with the cluster secret, operators' tokens, root
on the node's unix socket.

A forwarding node signs method, path, a timestamp and the body with HMAC-SHA256 under a key
derived from the cluster secret; the receiver checks the signature and that the timestamp is
within a short window (replays of old requests fail). Operators send a token with a role
(contivd.http.tokens); the secret itself is refused from them. Comparisons are constant-time.

Local administration is root's, on the root-only unix socket (contivd.http.local_socket: the
kernel vouches for the caller's uid). A loopback TCP port is open to every local user, every
hostNetwork pod and any compromised daemon, so a tokenless caller there gets at most the
viewer role (the node's status page), never a write.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import time
from collections.abc import Callable, Mapping

from raftstore import KeyValueStore

from ..state.tokens import TOKENS, TokenRecord
from .errors import UnauthorizedError
from .local_socket import peer_uid
from .tokens import Principal, Role, check_token, require, token_name

SIGNATURE_HEADER = "X-Contivd-Signature"
PRINCIPAL_HEADER = "X-Contivd-Principal"  # on a signed call: who the node acts for (the audit trail's "who")
NETCTL_TOKEN_HEADER = "X-Auth-Token"  # how Contiv's netctl sends the token of ~/.netctl/config.json
ROOT = Principal("root", Role.ADMIN)  # uid 0 on the node's unix socket
MAX_SKEW_SECONDS = 30.0
LOCAL_WRITE_HINT = (
    "loopback callers without a token may only read: run `contivd ctl` as root on the node (it uses the root-only "
    "unix socket, --api-socket), or send a token (Authorization: Bearer <token>, or X-Auth-Token)"
)
NO_CREDENTIALS = (
    "this request needs credentials: an operator token (Authorization: Bearer <token>, or X-Auth-Token), a node "
    "signature, or root on the node's unix socket (`contivd ctl` as root)"
)


def _key(secret: str) -> bytes:
    return hashlib.sha256(b"contivd-api-v1\0" + secret.encode()).digest()


def sign(secret: str, method: str, path: str, body: bytes, now: float | None = None) -> str:
    """The header value for one request: `<unix time>:<hex hmac>`."""
    stamp = f"{(time.time() if now is None else now):.3f}"
    message = b"\n".join([method.upper().encode(), path.encode(), stamp.encode(), hashlib.sha256(body).digest()])
    return f"{stamp}:{hmac.new(_key(secret), message, hashlib.sha256).hexdigest()}"


def verify(secret: str, header: str, method: str, path: str, body: bytes, now: float | None = None) -> bool:
    stamp, _, _ = header.partition(":")
    try:
        when = float(stamp)
    except ValueError:
        return False
    current = time.time() if now is None else now
    if abs(current - when) > MAX_SKEW_SECONDS:
        return False
    expected = sign(secret, method, path, body, now=when)
    return hmac.compare_digest(expected.encode(), header.encode())


def _is_loopback_peer(address: str | None) -> bool:
    """A TCP peer address on loopback (never resolved: a name is not a loopback peer)."""
    try:
        return address is not None and ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _is_secret(secret: str | None, token: str) -> bool:
    return bool(secret) and hmac.compare_digest(token.encode(), (secret or "").encode())


class Authenticator:
    """Who a request comes from, and whether their role allows it.

    A valid node signature is a cluster member (role node), acting for whoever its
    `PRINCIPAL_HEADER` names (the caller of a request it forwards, or itself); a token (bearer,
    or netctl's X-Auth-Token) is checked against its record in this node's replica of the
    store; root on the unix socket is the node's administrator; a loopback TCP caller without
    credentials gets `loopback_role` (None: refused), which the API sets to at most viewer and
    the other listeners leave unset. The cluster secret itself is refused as a token: it keys
    Raft's encryption and must not travel in operators' requests."""

    def __init__(
        self,
        secret: str | None,
        lookup: Callable[[str], TokenRecord | None],
        clock: Callable[[], float] = time.time,
        *,
        loopback_role: Role | None = None,
    ):
        if loopback_role is not None and loopback_role > Role.VIEWER:
            raise ValueError(f"loopback callers without a token are at most viewers, not {loopback_role.label}")
        self.secret = secret
        self.lookup = lookup
        self.clock = clock
        self.loopback = None if loopback_role is None else Principal("loopback", loopback_role, LOCAL_WRITE_HINT)

    def identify(self, method: str, path: str, body: bytes, headers: Mapping[str, str], remote: str | None) -> Principal:
        """The caller, or UnauthorizedError with the reason. `headers` have lower-case names;
        `path` includes the query string."""
        signature = headers.get(SIGNATURE_HEADER.lower())
        if signature is not None:
            if not self.secret or not verify(self.secret, signature, method, path, body):
                raise UnauthorizedError("invalid node signature")
            return Principal(headers.get(PRINCIPAL_HEADER.lower()) or "node", Role.NODE)
        token = _presented_token(headers)
        if token is not None:
            if _is_secret(self.secret, token):
                raise UnauthorizedError(
                    "the cluster secret is accepted from cluster nodes only; use an operator token "
                    "(`contivd auth bootstrap` as root on a node, then `contivd ctl auth token create`)"
                )
            name = token_name(token)
            return check_token(token, self.lookup(name) if name else None, self.clock())
        if peer_uid(remote) == 0:
            return ROOT
        if self.loopback is not None and _is_loopback_peer(remote):
            return self.loopback
        raise UnauthorizedError(NO_CREDENTIALS)

    def check(self, method: str, path: str, body: bytes, headers: Mapping[str, str], remote: str | None, needed: Role) -> Principal:
        """`identify`, then ForbiddenError unless the caller's role is at least `needed`."""
        principal = self.identify(method, path, body, headers, remote)
        require(principal, needed)
        return principal


def _presented_token(headers: Mapping[str, str]) -> str | None:
    """The token a request carries (Authorization: Bearer, else netctl's X-Auth-Token), or None;
    UnauthorizedError for a malformed Authorization header."""
    authorization = headers.get("authorization")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
        return token
    return headers.get(NETCTL_TOKEN_HEADER.lower(), "").strip() or None


def store_lookup(store: KeyValueStore) -> Callable[[str], TokenRecord | None]:
    """Token records from this node's replica (no round trip: a revocation applies here as soon
    as it has replicated)."""

    def lookup(name: str) -> TokenRecord | None:
        return TOKENS.get_nowait(store, name)

    return lookup

"""The one door to the leader: every call a member that does not lead Raft sends to the leader.

Both kinds of caller go through `LeaderForwarder.forward`: the REST dispatcher (a write some
client sent to this member, passed on byte for byte) and the typed `RemoteControlPlane` (the CNI
server's calls on a follower, contivd.http.control). One place therefore decides, for both:

- where the leader is: the API URL the node registry gives for the store's leader;
- that a request has not bounced between members: `HOPS_HEADER` counts forwards, the second
  one is refused (two members that each think the other leads would otherwise ping-pong);
- that the leader trusts the call: signed with the cluster secret (`auth.sign`), naming the
  caller it acts for in `PRINCIPAL_HEADER` (the leader's audit trail records that name);
- which error contract the leader answers with: the original client's (`Accept`,
  `TYPED_ERRORS_HEADER`), passed on unchanged;
- that a forward waits only on the leader it started with (http/leadership.py);
- which answer headers come back: the content type and its sniffing guard, Retry-After, and
  `REVISION_HEADER` (the store revision that holds a write, so the caller can wait for its own
  state to reach it instead of syncing the log).

Failures raise `UnavailableError` (503 + Retry-After to a REST client, the same exception to a
typed caller): `LeaderUnreachableError` when no leader is known, the request made too many hops
or the leader did not answer (nothing reached a leader), plain `UnavailableError` when the
forward was abandoned because the leader changed (it may still apply there).
Not responsible for: deciding whether to forward (callers know whether they lead), decoding
answers (the typed plane does), the transport (`ForwardingClient`'s pooled connections).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import trio

from raftstore import UnavailableError

from ..nodes import leader_api_url
from . import auth
from .errors import TYPED_ERRORS_HEADER
from .forwarder import Answer, ForwardingClient
from .leadership import unless_leader_changes

if TYPE_CHECKING:  # annotations only: a follower of the store never loads PySyncObj
    from ..nodes import NodeStore

log = logging.getLogger("contivd.forward")
HOPS_HEADER = "X-Contivd-Hops"  # how many members have forwarded this request already
REVISION_HEADER = "X-Contivd-Revision"  # the store revision that holds a write's result
# A forwarded write may wait on the leader for the store's request timeout (5 s) before the
# leader answers 503 itself; a little more than that, not a value that outlasts every client.
# A leader that is gone is noticed sooner: connections time out after 1 s, and a forward is
# abandoned as soon as this member follows another leader (http/leadership.py).
FORWARD_TIMEOUT_SECONDS = 6.0  # for the ForwardingClient the composition root gives the forwarder
MAX_HOPS = 2  # a request forwarded twice is refused: the members disagree on the leader
NO_LEADER = "no leader is known yet (election in progress or no quorum)"
# The original client's headers that choose the leader's error contract (lower-case names).
_CONTRACT_HEADERS = ((TYPED_ERRORS_HEADER, TYPED_ERRORS_HEADER.lower()), ("Accept", "accept"))
# The leader's answer headers a forwarded answer keeps (lower-case names).
_KEPT_ANSWER_HEADERS = frozenset({"content-type", "retry-after", "x-content-type-options", REVISION_HEADER.lower()})
TYPED_CALLER: Mapping[str, str] = {"content-type": "application/json", TYPED_ERRORS_HEADER.lower(): "typed"}  # a typed in-process caller's headers


class LeaderUnreachableError(UnavailableError):
    """The request reached no leader: none is known, it bounced between members, or the leader did not answer."""


def hops_of(headers: Mapping[str, str]) -> int:
    """The forwards a request has made already, from its (lower-case) headers."""
    return int(headers.get(HOPS_HEADER.lower(), "0") or 0)


class LeaderForwarder:
    """Sends a request to the Raft leader's REST API on behalf of a caller (see the module doc)."""

    def __init__(self, store: NodeStore, http: ForwardingClient, secret: str | None):
        self.store = store
        self.http = http
        self.secret = secret

    async def forward(self, method: str, target: str, body: bytes, *, principal: str, headers: Mapping[str, str], hops: int = 0) -> Answer:
        """The leader's answer (status, kept headers, body) to `method target`; `target`
        includes the query string (it is signed). `headers` are the original request's, with
        lower-case names: its content type and error contract go to the leader. `hops`: the
        forwards the request made before reaching this member (0 for an in-process caller)."""
        url = leader_api_url(self.store)
        if url is None or hops >= MAX_HOPS:
            raise LeaderUnreachableError(NO_LEADER)
        sent = {"Content-Type": headers.get("content-type", "application/json"), HOPS_HEADER: str(hops + 1)}
        for name, lower in _CONTRACT_HEADERS:
            if lower in headers:
                sent[name] = headers[lower]
        if self.secret:
            sent[auth.SIGNATURE_HEADER] = auth.sign(self.secret, method, target, body)
        sent[auth.PRINCIPAL_HEADER] = principal
        try:
            status, answer_headers, answer = await unless_leader_changes(
                self.store, lambda: self.http.request(method, url, target, sent, body), f"forwarding to the leader at {url}"
            )
        except (OSError, ConnectionError, trio.TooSlowError) as exc:
            log.warning("forwarding %s %s to the leader at %s failed: %s", method, target, url, exc)
            raise LeaderUnreachableError(f"the leader at {url} did not answer: {exc}") from None
        return status, {k: v for k, v in answer_headers.items() if k in _KEPT_ANSWER_HEADERS}, answer

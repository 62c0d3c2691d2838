"""The Kubernetes API as contivd uses it: list, watch, get a pod, post an Event.

Plain HTTP requests on trio (httpx2, through lightkube's kubeconfig loader, which also builds
the TLS context and the token, client-certificate or exec authentication). lightkube was chosen
over the official `kubernetes` client on measurements (benchmarks/k8s_client_bench.py,
docs/kubernetes.md "Which client"): a leader watching five kinds of 1 000 objects holds ~10 MB
instead of ~47 MB more than without, its five lists are in after 0.15 s instead of 0.8 s, and it
installs 3 MB instead of 94 MB. No worker threads: a watch is a trio task, cancelled with the
leader's term.

Objects stay the JSON the server sent: the resolver reads the few fields it needs, and 1 000
Services are not turned into model objects and back. lightkube is imported when a client is
built (`KubeApi(...)`), which only the leader's watch and a CNI ADD in Kubernetes mode do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from .view import ENDPOINT_SLICES, NAMESPACES, NETWORK_POLICIES, PODS, SERVICES

log = logging.getLogger("contivd.k8s")
CONNECT_SECONDS = 5.0
READ_SECONDS = 30.0  # a plain request (list, event)
POD_READ_SECONDS = 10.0  # a CNI ADD waits for it
WATCH_SECONDS = 300  # a watch ends after this and is resumed from the last resourceVersion
WATCH_READ_SECONDS = 120.0  # silence longer than this on a watch (bookmarks come every minute) means a dead server

PATHS = {
    SERVICES: "/api/v1/services",
    ENDPOINT_SLICES: "/apis/discovery.k8s.io/v1/endpointslices",
    NETWORK_POLICIES: "/apis/networking.k8s.io/v1/networkpolicies",
    PODS: "/api/v1/pods",
    NAMESPACES: "/api/v1/namespaces",
}


class KubeUnavailable(Exception):
    """The API server did not answer (refused, reset, timed out); `str` says how."""


class KubeRefused(Exception):
    """The API server answered with an error status (`status`: 401 for a bad token, 410 Gone...)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status} {message}")
        self.status = status


@dataclass(frozen=True)
class Listing:
    items: list[dict[str, Any]]
    resource_version: str


@dataclass(frozen=True)
class Connection:
    """What a kubeconfig says, ready to use: the server's URL, whether TLS verification is off,
    and the client arguments (base URL, TLS context, authentication) lightkube derived."""

    server: str
    insecure: bool
    arguments: dict[str, Any]


def load_kubeconfig(kubeconfig: Path) -> Connection:
    """Read the kubeconfig's current context. Raises ValueError, saying why, when the client is
    missing or the file unusable. Blocking (reads files): call it off the event loop."""
    try:
        import httpx2
        from lightkube.config.client_adapter import ConnectionParams
        from lightkube.config.kubeconfig import KubeConfig
    except ImportError:
        raise ValueError("--kubeconfig is set but the Kubernetes client (lightkube) is not installed: reinstall contivd") from None
    try:
        config = KubeConfig.from_file(kubeconfig).get()
        if config is None:
            raise ValueError("it names no current context")
        params = ConnectionParams(timeout=httpx2.Timeout(READ_SECONDS, connect=CONNECT_SECONDS), trust_env=False)
        arguments = params.httpx_params(config)
    except Exception as exc:  # noqa: BLE001 - YAML, missing keys, unreadable certificate files...
        raise ValueError(f"kubeconfig {kubeconfig} cannot be used: {type(exc).__name__}: {exc}") from None
    return Connection(str(config.cluster.server), bool(config.cluster.insecure), arguments)


class KubeApi:
    """One API client (from the kubeconfig) for the leader's lists, watches and Events."""

    def __init__(self, kubeconfig: Path):
        """Raises ValueError, saying why, when the client is missing or the kubeconfig unusable."""
        import httpx2

        connection = load_kubeconfig(kubeconfig)
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # one INFO line per request otherwise
        if connection.insecure:
            log.warning("kubeconfig %s: TLS verification of the API server %s is off (insecure-skip-tls-verify)", kubeconfig, connection.server)
        self.client = httpx2.AsyncClient(**connection.arguments)
        self._watch_timeout = httpx2.Timeout(WATCH_READ_SECONDS, connect=CONNECT_SECONDS)

    async def list(self, kind: str) -> Listing:
        """Every object of `kind` in all namespaces, with the list's resourceVersion."""
        with _translated_errors():
            response = await self.client.get(PATHS[kind])
            _raise_for_status(response.status_code, response.content)
        body = json.loads(response.content)
        return Listing(body.get("items") or [], str((body.get("metadata") or {}).get("resourceVersion") or ""))

    async def watch(
        self, kind: str, resource_version: str, answered: Callable[[], None], handle: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> None:
        """Watch `kind` from `resource_version` (with bookmarks): `answered()` once the server
        accepted the watch, then `handle` each event until the server ends the watch (returns).
        A refused request, or an ERROR event (410 when the history was compacted), raises
        KubeRefused; a broken or silent connection KubeUnavailable; a line that is not JSON
        ValueError. Cancelling the caller closes the connection."""
        params = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true", "timeoutSeconds": str(WATCH_SECONDS)}
        with _translated_errors():
            async with self.client.stream("GET", PATHS[kind], params=params, timeout=self._watch_timeout) as response:
                if response.status_code >= 400:
                    _raise_for_status(response.status_code, await response.aread())
                answered()
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise KubeRefused(int(status.get("code") or 0), f"{status.get('reason', '')}: {status.get('message', '')}")
                    await handle(event)

    async def post_event(self, kind: str, namespace: str, name: str, reason: str, message: str) -> None:
        """A Warning Event about a core/v1 object, a Service or a Pod (what `kubectl describe` shows)."""
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {"kind": kind, "apiVersion": "v1", "namespace": namespace, "name": name},
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "contivd"},
        }
        with _translated_errors():
            response = await self.client.post(f"/api/v1/namespaces/{namespace}/events", json=body)
            _raise_for_status(response.status_code, response.content)


def post_event_soon(api: KubeApi, kind: str, key: str, reason: str, message: str) -> None:
    """Post a Warning Event about `<namespace>/<name>` in a task of its own: best effort, the
    caller does not wait, and a failure is only logged. A system task, so that callers need no
    nursery; it is cancelled only when the process ends."""

    async def post() -> None:
        namespace, _, name = key.partition("/")
        try:
            await api.post_event(kind, namespace, name, reason, message)
        except (KubeRefused, KubeUnavailable) as exc:
            log.info("could not post the %s Event for %s %s: %s", reason, kind, key, exc)

    trio.lowlevel.spawn_system_task(post, name="k8s-event")


class PodReader:
    """Blocking reads of single pods (the CNI server asks from worker threads): one keep-alive
    client per kubeconfig."""

    def __init__(self, kubeconfig: Path):
        """Raises ValueError, saying why, when the client is missing or the kubeconfig unusable."""
        import httpx2

        self.client = httpx2.Client(**load_kubeconfig(kubeconfig).arguments)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The pod's object; KubeRefused (404: no such pod) or KubeUnavailable."""
        with _translated_errors():
            response = self.client.get(f"/api/v1/namespaces/{namespace}/pods/{name}", timeout=POD_READ_SECONDS)
            _raise_for_status(response.status_code, response.content)
        pod: dict[str, Any] = json.loads(response.content)
        return pod


def _raise_for_status(status: int, body: bytes) -> None:
    """An error answer as KubeRefused, with the `message` of the Status body the server sent."""
    if status < 400:
        return
    try:
        message = str(json.loads(body)["message"])
    except (TypeError, ValueError, KeyError):
        message = body[:200].decode(errors="replace")
    raise KubeRefused(status, message)


@contextmanager
def _translated_errors() -> Iterator[None]:
    """httpx2's transport errors (and lightkube's authentication errors) as KubeUnavailable."""
    import httpx2
    from lightkube.core.exceptions import ConfigError

    try:
        yield
    except (httpx2.TransportError, OSError) as exc:
        raise KubeUnavailable(str(exc) or type(exc).__name__) from None
    except ConfigError as exc:
        raise KubeUnavailable(f"authentication: {exc}") from None

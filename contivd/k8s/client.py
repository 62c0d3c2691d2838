"""The Kubernetes API as the leader uses it: list, watch, post an Event (official `kubernetes`
client, extra `k8s`).

Blocking calls, made from worker threads (see reflector.py). Objects stay the JSON the server
sent (`_preload_content=False`, the watch helper's `deserialize=False`): the resolver reads
the few fields it needs, and 1 000 Services are not turned into model objects and back.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .view import ENDPOINT_SLICES, NAMESPACES, NETWORK_POLICIES, PODS, SERVICES

log = logging.getLogger("contivd.k8s")
CONNECT_SECONDS = 5.0
READ_SECONDS = 30.0  # a plain request (list, event)
WATCH_SECONDS = 300  # a watch ends after this and is resumed from the last resourceVersion
WATCH_READ_SECONDS = 120.0  # silence longer than this on a watch (bookmarks come every minute) means a dead server


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


class KubeApi:
    """One API client (from the kubeconfig) for the leader's lists, watches and Events."""

    def __init__(self, kubeconfig: Path):
        """Raises ValueError, saying why, when the client is missing or the kubeconfig unusable."""
        try:
            from kubernetes import client, config
        except ImportError:
            raise ValueError("--kubeconfig is set but the kubernetes client is not installed (pip install contivd[k8s])") from None

        try:
            api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        except Exception as exc:  # noqa: BLE001 - the client raises several unrelated types for a bad file
            raise ValueError(f"kubeconfig {kubeconfig} cannot be used: {exc}") from None
        self.core = client.CoreV1Api(api_client)
        self.discovery = client.DiscoveryV1Api(api_client)
        self.networking = client.NetworkingV1Api(api_client)
        self._responses: set[Any] = set()  # open watch streams (urllib3 responses)
        self._lock = threading.Lock()

    def _list_function(self, kind: str) -> Any:
        return {
            SERVICES: self.core.list_service_for_all_namespaces,
            ENDPOINT_SLICES: self.discovery.list_endpoint_slice_for_all_namespaces,
            NETWORK_POLICIES: self.networking.list_network_policy_for_all_namespaces,
            PODS: self.core.list_pod_for_all_namespaces,
            NAMESPACES: self.core.list_namespace,
        }[kind]

    def list(self, kind: str) -> Listing:
        """Every object of `kind` in all namespaces, with the list's resourceVersion."""
        with _translated_errors():
            answer = self._list_function(kind)(_preload_content=False, _request_timeout=(CONNECT_SECONDS, READ_SECONDS))
            body = json.loads(answer.data)
        return Listing(body.get("items") or [], str((body.get("metadata") or {}).get("resourceVersion") or ""))

    def watch(self, kind: str, resource_version: str) -> Iterator[dict[str, Any]]:
        """Open a watch from `resource_version` (with bookmarks): the request is made here, so a
        refused or unreachable server raises before this returns; the events then come until the
        server ends the watch, and an ERROR event (410 when the history was compacted) raises
        KubeRefused. The request is the client's own (`watch=True`) and its lines are split by
        the client's `iter_resp_lines`; the JSON is read here because the client's watch helper
        cannot hand on ERROR events undeserialised."""
        with _translated_errors():
            response = self._list_function(kind)(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _preload_content=False,
                _request_timeout=(CONNECT_SECONDS, WATCH_READ_SECONDS),
            )
        with self._lock:
            self._responses.add(response)
        return self._events(response)

    def _events(self, response: Any) -> Iterator[dict[str, Any]]:
        from kubernetes.watch.watch import iter_resp_lines

        try:
            with _translated_errors():
                for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise KubeRefused(int(status.get("code") or 0), f"{status.get('reason', '')}: {status.get('message', '')}")
                    yield event
        finally:
            with self._lock:
                self._responses.discard(response)
            response.release_conn()

    def stop_watches(self) -> None:
        """End every open watch now: their threads see the stream end (or a read error)."""
        with self._lock:
            responses = list(self._responses)
        for response in responses:
            sock = getattr(getattr(response, "connection", None), "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def post_event(self, kind: str, namespace: str, name: str, reason: str, message: str) -> None:
        """A Warning Event about a core/v1 object, a Service or a Pod (what `kubectl describe` shows)."""
        from kubernetes import client

        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{name}."),
            involved_object=client.V1ObjectReference(kind=kind, api_version="v1", namespace=namespace, name=name),
            reason=reason,
            message=message,
            type="Warning",
            source=client.V1EventSource(component="contivd"),
        )
        with _translated_errors():
            self.core.create_namespaced_event(namespace, body, _request_timeout=(CONNECT_SECONDS, READ_SECONDS))


def post_event_soon(api: KubeApi, kind: str, key: str, reason: str, message: str) -> None:
    """Post a Warning Event about `<namespace>/<name>` from a thread of its own: best effort,
    the caller (on the event loop) does not wait, and a failure is only logged."""

    def post() -> None:
        namespace, _, name = key.partition("/")
        try:
            api.post_event(kind, namespace, name, reason, message)
        except (KubeRefused, KubeUnavailable) as exc:
            log.info("could not post the %s Event for %s %s: %s", reason, kind, key, exc)

    threading.Thread(target=post, daemon=True, name="k8s-event").start()


@contextmanager
def _translated_errors() -> Iterator[None]:
    """The client's exceptions (ApiException, urllib3 and socket errors) as KubeRefused / KubeUnavailable."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        yield
    except ApiException as exc:
        raise KubeRefused(int(exc.status or 0), _status_message(exc)) from None
    except (HTTPError, OSError) as exc:
        raise KubeUnavailable(str(exc) or type(exc).__name__) from None


def _status_message(exc: Any) -> str:
    """The `message` of the Status body the server sent, else the HTTP reason."""
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.reason or "")

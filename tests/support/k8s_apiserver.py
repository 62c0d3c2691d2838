"""A test Kubernetes API server: the subset of the real protocol that contivd's production client
code (the official `kubernetes` client) uses, over plain HTTP on loopback.

No API server can be installed on these machines, so the tests drive this one with the same
client code that runs in production. It serves:

- lists (all namespaces and per namespace) of core/v1 Services, Pods, Namespaces and
  discovery.k8s.io/v1 EndpointSlices, with `metadata.resourceVersion` on the list and on every
  object, taken from one cluster-wide counter; a get of one object;
- `?watch=1&resourceVersion=N&allowWatchBookmarks=true&timeoutSeconds=S`: a chunked stream of
  JSON lines (`ADDED` / `MODIFIED` / `DELETED` / `BOOKMARK`); an `ERROR` event carrying a 410
  `Expired` Status when N is older than the retained history (what a real API server sends);
  a list with `resourceVersionMatch=Exact` on a compacted version answers `410 Gone`;
- `401` with a Status body when the bearer token is missing or wrong;
- `POST` of core/v1 Events, recorded in `posted_events` so tests can assert them.

Test-side controls: `apply` / `delete` (emitting watch events), `compact()`, `stop()` /
`start(keep_history=...)` / `restart()` (same port; live watches are cut), `kubeconfig(path)`.
Run it in a thread of the test (`KubeApiServer(...).start()`), or as a process inside a node's
network namespace (`python -m tests.support.k8s_apiserver PORT [OBJECTS.json] [--host
ADDRESS]`, prints `ready`), driven through `/_test/...` with `RemoteKubeApi` (apply, delete,
compact, set_token, restart, posted_events).
"""

from __future__ import annotations

import argparse
import copy
import json
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

TOKEN = "test-token"


@dataclass(frozen=True)
class Resource:
    """One kind the server knows: where it lives in the URL space and how its objects look."""

    plural: str
    kind: str
    api_version: str
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    namespaced: bool = True


RESOURCES = {
    r.plural: r
    for r in (
        Resource("services", "Service", "v1", "/api/v1"),
        Resource("pods", "Pod", "v1", "/api/v1"),
        Resource("namespaces", "Namespace", "v1", "/api/v1", namespaced=False),
        Resource("endpointslices", "EndpointSlice", "discovery.k8s.io/v1", "/apis/discovery.k8s.io/v1"),
        Resource("events", "Event", "v1", "/api/v1"),
        Resource("networkpolicies", "NetworkPolicy", "networking.k8s.io/v1", "/apis/networking.k8s.io/v1"),
    )
}
BY_KIND = {r.kind: r for r in RESOURCES.values()}


@dataclass(frozen=True)
class Route:
    """A parsed request path: the resource, the namespace (None: all or cluster-scoped), the name."""

    resource: Resource
    namespace: str | None
    name: str | None


def parse_path(path: str) -> Route | None:
    """`/api/v1/namespaces/shop/services/web` → Route(services, "shop", "web"); None when unknown."""
    for prefix in ("/api/v1", "/apis/discovery.k8s.io/v1", "/apis/networking.k8s.io/v1"):
        if not path.startswith(prefix + "/"):
            continue
        parts = path[len(prefix) + 1 :].strip("/").split("/")
        namespace = None
        if parts[0] == "namespaces" and len(parts) >= 3:
            namespace, parts = parts[1], parts[2:]
        resource = RESOURCES.get(parts[0])
        if resource is None or resource.prefix != prefix or len(parts) > 2:
            return None
        if not resource.namespaced and namespace is not None:
            return None
        return Route(resource, namespace, parts[1] if len(parts) == 2 else None)
    return None


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}


@dataclass(frozen=True)
class WatchEvent:
    resource_version: int
    plural: str
    namespace: str
    type: str  # ADDED, MODIFIED, DELETED
    object: dict[str, Any]


class KubeApiServer:
    """The server and its state: objects by (plural, namespace, name), the event history since
    the last compaction, the recorded Events. Thread-safe; watch handlers wait on `changed`."""

    def __init__(self, port: int = 0, token: str = TOKEN, bookmark_seconds: float = 1.0, host: str = "127.0.0.1"):
        """`host`: loopback, or an address inside a network namespace the test created (198.18.0.0/15)."""
        self.host, self.port, self.token, self.bookmark_seconds = host, port, token, bookmark_seconds
        self.changed = threading.Condition()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.history: list[WatchEvent] = []
        self.oldest = 1  # the oldest resourceVersion a watch may start from (exclusive)
        self.revision = 1
        self.posted_events: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []  # (method, path with query), for assertions
        self.generation = 0  # bumped by stop(): live watches of an older generation end
        self._server: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()

    # ---- test-side controls ----------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, keep_history: bool = True) -> KubeApiServer:
        """Listen (again) on the same port; without `keep_history` every older resourceVersion
        is gone, as after an API server whose watch cache restarted empty."""
        if not keep_history:
            self.compact()
        handler = _handler_for(self)
        self._server = ThreadingHTTPServer((self.host, self.port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="k8s-apiserver", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection (watches end mid-stream)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self.changed:
            self.generation += 1
            self.changed.notify_all()
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def restart(self, keep_history: bool = True, after: socket.socket | None = None) -> None:
        """stop() then start(): what an API server restart looks like to its clients. `after`:
        a connection to let finish first (the one that asked for the restart)."""
        with self.changed:
            self.changed.wait_for(lambda: after not in self._connections, timeout=5)
        self.stop()
        self.start(keep_history)

    def __enter__(self) -> KubeApiServer:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(self, path: Path, token: str | None = None) -> Path:
        """Write a kubeconfig for this server (with the right token unless `token` says otherwise)."""
        path.write_text(kubeconfig_text(self.url, self.token if token is None else token))
        return path

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object (by kind, namespace, name); emits ADDED or MODIFIED."""
        resource = BY_KIND[obj["kind"]]
        obj = copy.deepcopy(obj)
        obj.setdefault("apiVersion", resource.api_version)
        meta = obj.setdefault("metadata", {})
        namespace = meta.setdefault("namespace", "default") if resource.namespaced else ""
        key = (resource.plural, namespace, meta["name"])
        with self.changed:
            old = self.objects.get(key)
            meta["uid"] = old["metadata"]["uid"] if old else str(uuid.uuid4())
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            self._record(resource.plural, namespace, "MODIFIED" if old else "ADDED", obj)
            self.objects[key] = obj
        return copy.deepcopy(obj)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        resource = BY_KIND[kind]
        key = (resource.plural, namespace if resource.namespaced else "", name)
        with self.changed:
            obj = self.objects.pop(key)
            obj = copy.deepcopy(obj)
            self._record(resource.plural, key[1], "DELETED", obj)

    def compact(self) -> None:
        """Forget the event history: watches from any older resourceVersion get 410."""
        with self.changed:
            self.history.clear()
            self.oldest = self.revision

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        resource = BY_KIND[kind]
        with self.changed:
            obj = self.objects.get((resource.plural, namespace if resource.namespaced else "", name))
            return copy.deepcopy(obj) if obj else None

    def list(self, kind: str) -> list[dict[str, Any]]:
        plural = BY_KIND[kind].plural
        with self.changed:
            return [copy.deepcopy(o) for (p, _, _), o in sorted(self.objects.items()) if p == plural]

    # ---- the server side --------------------------------------------------------------------

    def _record(self, plural: str, namespace: str, type_: str, obj: dict[str, Any]) -> None:
        """Caller holds `changed`: stamp the next resourceVersion, keep the event, wake watches."""
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self.history.append(WatchEvent(self.revision, plural, namespace, type_, copy.deepcopy(obj)))
        self.changed.notify_all()

    def _list(self, route: Route) -> dict[str, Any]:
        with self.changed:  # re-entrant: _watch calls this holding it
            items = [
                copy.deepcopy(o)
                for (plural, namespace, _), o in sorted(self.objects.items())
                if plural == route.resource.plural and route.namespace in (None, namespace)
            ]
            revision = self.revision
        kind = route.resource.kind
        return {"kind": f"{kind}List", "apiVersion": route.resource.api_version, "metadata": {"resourceVersion": str(revision)}, "items": items}

    def _watch(self, route: Route, since: int, bookmarks: bool, timeout: float) -> Iterator[dict[str, Any]]:
        """The events after `since` that match the route, as they happen, until `timeout`,
        a stop(), or (first and only) a 410 when `since` is older than the history."""
        deadline = time.monotonic() + timeout
        expired = {"type": "ERROR", "object": status_body(410, "Expired", f"too old resource version: {since} ({self.oldest})")}
        with self.changed:
            generation = self.generation
            too_old = since < self.oldest
            if since == 0:  # "any": the current state as ADDED events first, as a real server does
                since, initial = self.revision, self._list(route)["items"]
            else:
                initial = []
        if too_old:
            yield expired
            return
        for obj in initial:
            yield {"type": "ADDED", "object": obj}
        next_bookmark = time.monotonic() + self.bookmark_seconds
        while True:
            with self.changed:
                while True:
                    if self.generation != generation:
                        return
                    if since < self.oldest:  # compacted under a live watch
                        break
                    pending = [e for e in self.history if e.resource_version > since]
                    now = time.monotonic()
                    if pending or now >= deadline or (bookmarks and now >= next_bookmark):
                        break
                    self.changed.wait(min(deadline, next_bookmark if bookmarks else deadline) - now)
                revision, too_old = self.revision, since < self.oldest
            if too_old:
                yield expired
                return
            for event in pending:
                since = event.resource_version
                if event.plural == route.resource.plural and route.namespace in (None, event.namespace):
                    yield {"type": event.type, "object": event.object}
            if not pending and bookmarks and time.monotonic() >= next_bookmark:
                since = revision
                meta = {"resourceVersion": str(revision)}
                yield {"type": "BOOKMARK", "object": {"kind": route.resource.kind, "apiVersion": route.resource.api_version, "metadata": meta}}
                next_bookmark = time.monotonic() + self.bookmark_seconds
            if time.monotonic() >= deadline:
                return


def kubeconfig_text(url: str, token: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": url}}],
            "users": [{"name": "contivd", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "contivd"}}],
            "current-context": "test",
        }
    )


def _handler_for(api: KubeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive and chunked watch streams, as the client expects
        # TCP_NODELAY, as the real API server has it (Go sets it on every connection): with Nagle
        # a response's body, written after its headers, waited for the client's delayed ACK (40 ms)
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            with api.changed:
                api._connections.add(self.connection)

        def finish(self) -> None:
            with api.changed:
                api._connections.discard(self.connection)
                api.changed.notify_all()
            try:
                super().finish()
            except OSError:
                pass

        def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            body = self._body()
            with api.changed:
                api.requests.append((method, self.path))
            if url.path.startswith("/_test/"):
                return self._control(method, url.path, body)
            if self.headers.get("Authorization") != f"Bearer {api.token}":
                return self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
            route = parse_path(url.path)
            if route is None:
                return self._send(404, status_body(404, "NotFound", f"the server could not find the requested resource ({url.path})"))
            if method == "POST":
                return self._post(route, body)
            if route.name is not None:
                obj = api.get(route.resource.kind, route.namespace or "", route.name)
                if obj is None:
                    return self._send(404, status_body(404, "NotFound", f'{route.resource.plural} "{route.name}" not found'))
                return self._send(200, obj)
            if query.get("watch") in ("1", "true"):
                return self._stream(route, query)
            if query.get("resourceVersionMatch") == "Exact" and int(query.get("resourceVersion") or 0) < api.oldest:
                return self._send(410, status_body(410, "Gone", "the resourceVersion is too old (compacted)"))
            return self._send(200, api._list(route))

        def _post(self, route: Route, body: Any) -> None:
            if route.resource.plural != "events" or route.namespace is None or route.name is not None or not isinstance(body, dict):
                return self._send(405, status_body(405, "MethodNotAllowed", "only Events can be created here"))
            body.setdefault("metadata", {}).setdefault("namespace", route.namespace)
            if not body["metadata"].get("name"):
                body["metadata"]["name"] = f"{body['metadata'].get('generateName', 'event.')}{uuid.uuid4().hex[:8]}"
            with api.changed:
                api.posted_events.append(copy.deepcopy(body))
            return self._send(201, body)

        def _stream(self, route: Route, query: dict[str, str]) -> None:
            since = int(query.get("resourceVersion") or 0)
            bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
            timeout = float(query.get("timeoutSeconds") or 1800)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in api._watch(route, since, bookmarks, timeout):
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

        def _control(self, method: str, path: str, body: Any) -> None:
            """The test-side controls for a server running in another process."""
            if path == "/_test/apply" and method == "POST":
                return self._send(200, api.apply(body))
            if path == "/_test/delete" and method == "POST":
                api.delete(body["kind"], body.get("namespace", ""), body["name"])
                return self._send(200, {})
            if path == "/_test/compact" and method == "POST":
                api.compact()
                return self._send(200, {})
            if path == "/_test/token" and method == "POST":
                api.token = str(body["token"])
                return self._send(200, {})
            if path == "/_test/restart" and method == "POST":  # answered and closed first, then the listener restarts
                self.close_connection = True
                self._send(200, {})
                threading.Thread(target=api.restart, args=(bool(body.get("keepHistory", True)), self.connection), daemon=True).start()
                return None
            if path == "/_test/events" and method == "GET":
                with api.changed:
                    return self._send(200, copy.deepcopy(api.posted_events))
            return self._send(404, status_body(404, "NotFound", path))

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length)) if length else None

        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class RemoteKubeApi:
    """The test-side controls of a server running as a process (in a node's namespace, say)
    reached through a URL the test can use."""

    def __init__(self, url: str):
        self.url = url

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        answer = httpx.post(f"{self.url}/_test/apply", json=obj, timeout=10)
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def delete(self, kind: str, namespace: str, name: str) -> None:
        httpx.post(f"{self.url}/_test/delete", json={"kind": kind, "namespace": namespace, "name": name}, timeout=10).raise_for_status()

    def compact(self) -> None:
        httpx.post(f"{self.url}/_test/compact", timeout=10).raise_for_status()

    def set_token(self, token: str) -> None:
        """The token the server accepts from now on (a rotated or revoked one)."""
        httpx.post(f"{self.url}/_test/token", json={"token": token}, timeout=10).raise_for_status()

    def restart(self, keep_history: bool = True) -> None:
        """Cut every connection and listen again (after the answer: poll for it to be back)."""
        httpx.post(f"{self.url}/_test/restart", json={"keepHistory": keep_history}, timeout=10).raise_for_status()

    def posted_events(self) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/_test/events", timeout=10)
        answer.raise_for_status()
        result: list[dict[str, Any]] = answer.json()
        return result


def pod(namespace: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"namespace": namespace, "name": name, "labels": labels or {}}, "spec": {"containers": []}}


def main(argv: list[str]) -> None:
    """`PORT [OBJECTS.json] [--host ADDRESS]`: serve on ADDRESS:PORT (default loopback; token
    TOKEN) with the objects of the file (a JSON list) applied; print `ready` once listening;
    run until killed."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.k8s_apiserver")
    parser.add_argument("port", type=int)
    parser.add_argument("objects", type=Path, nargs="?")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    server = KubeApiServer(args.port, host=args.host)
    for obj in json.loads(args.objects.read_text()) if args.objects else []:
        server.apply(obj)
    server.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])

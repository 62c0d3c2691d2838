"""A tiny stand-in for the Kubernetes API server: `GET /api/v1/namespaces/<ns>/pods/<name>`.

Serves the pods in a JSON file (`{"<ns>/<name>": {"labels": {...}}}`, re-read per request)
over plain HTTP on loopback; prints `ready` once listening. Run it as
`python -m tests.cni.fake_kube <port> <pods.json>` (inside the node's namespace).
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def serve(port: int, pods_file: Path) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
            parts = self.path.split("?")[0].strip("/").split("/")
            pods = json.loads(pods_file.read_text())
            if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" and f"{parts[3]}/{parts[5]}" in pods:
                pod = pods[f"{parts[3]}/{parts[5]}"]
                body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": parts[5], "namespace": parts[3], "labels": pod.get("labels", {})}}
                self._send(200, body)
            else:
                self._send(
                    404, {"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}
                )

        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("ready", flush=True)
    server.serve_forever()


def kubeconfig(port: int) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "users": [{"name": "cni", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "cni"}}],
            "current-context": "fake",
        }
    )


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]))

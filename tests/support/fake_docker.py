"""The few Docker Engine API calls the original netmaster makes in `--mode docker`, on a unix socket.

Contiv's netmaster creates a Docker network for each network it creates (netmaster/docknet):
NetworkInspect (404: a new name), NetworkCreate, and NetworkRemove when it is deleted. The
benchmark runs the original beside contivd without Docker, so this answers those three over
HTTP/1.1 at the socket it is given (/run/docker.sock inside a private mount namespace, see
tests/support/contiv_netmaster.py), and 404 to anything else.

    python3 tests/support/fake_docker.py /run/docker.sock
"""

from __future__ import annotations

import json
import os
import re
import socketserver
import sys
import uuid
from http.server import BaseHTTPRequestHandler

NETWORK = re.compile(r"^(?:/v[0-9.]+)?/networks/(?P<name>[^/?]+)$")
CREATE = re.compile(r"^(?:/v[0-9.]+)?/networks/create$")


class Networks:
    """The networks created so far: name → what NetworkInspect answers."""

    def __init__(self) -> None:
        self.by_name: dict[str, dict[str, object]] = {}

    def create(self, request: dict[str, object]) -> dict[str, object]:
        name = str(request["Name"])
        network = {"Name": name, "Id": uuid.uuid4().hex * 2, "Driver": request.get("Driver", ""), "Scope": "local", "IPAM": request.get("IPAM")}
        self.by_name[name] = network
        return network


class DockerApi(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    networks = Networks()

    def do_GET(self) -> None:
        found = NETWORK.match(self.path.split("?", 1)[0])
        network = self.networks.by_name.get(found["name"]) if found else None
        if network is None:
            self.answer(404, {"message": f"network {found['name'] if found else self.path} not found"})
        else:
            self.answer(200, network)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not CREATE.match(self.path.split("?", 1)[0]):
            self.answer(404, {"message": f"page not found: {self.path}"})
            return
        network = self.networks.create(json.loads(body))
        self.answer(201, {"Id": network["Id"], "Warning": ""})

    def do_DELETE(self) -> None:
        found = NETWORK.match(self.path.split("?", 1)[0])
        if found is None or self.networks.by_name.pop(found["name"], None) is None:
            self.answer(404, {"message": f"network {found['name'] if found else self.path} not found"})
        else:
            self.answer(204, None)

    def answer(self, status: int, body: object) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def address_string(self) -> str:
        return "docker.sock"  # a unix socket's peer has no (host, port)


class UnixHttpServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main() -> None:
    path = sys.argv[1]
    if os.path.exists(path):
        os.unlink(path)
    with UnixHttpServer(path, DockerApi) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()

"""A TCP relay for benchmarks: `python -m tests.support.tcp_relay HOST PORT TARGET_PORT` forwards
HOST:PORT to 127.0.0.1:TARGET_PORT. benchmarks/k8s_bench.py points the leader's kubeconfig at
it and moves it from an empty test API server to a full one: a cold start without restarting
anything.

A line with another port number on stdin moves the relay to it: connections open then are cut
(a client sees its API server go away) and new ones go to the new target. Prints `ready` once
listening, `moved` after each move.
"""

from __future__ import annotations

import socket
import sys
import threading


class Relay:
    def __init__(self, host: str, port: int, target: int):
        self.listener = socket.create_server((host, port))
        self.target = target
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()

    def serve(self) -> None:
        while True:
            near = self.listener.accept()[0]
            try:
                far = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                near.close()
                continue
            for s in (near, far):  # relay each write at once: Nagle would hold small ones for the peer's delayed ACK
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.open |= {near, far}
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            _shut(s)

    def move(self, target: int) -> None:
        """New connections go to `target`; the open ones are cut."""
        self.target = target
        with self.lock:
            cut, self.open = self.open, set()
        for s in cut:
            _shut(s)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def main(argv: list[str]) -> None:
    relay = Relay(argv[0], int(argv[1]), int(argv[2]))
    threading.Thread(target=relay.serve, daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        relay.move(int(line))
        print("moved", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

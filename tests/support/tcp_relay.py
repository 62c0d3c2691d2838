"""A TCP relay for tests and benchmarks: `python -m tests.support.tcp_relay HOST PORT TARGET_PORT
[NETNS ...]` forwards HOST:PORT to 127.0.0.1:TARGET_PORT of the relay's own network namespace.
benchmarks/k8s_bench.py points the leader's kubeconfig at it and moves it from an empty test API
server to a full one: a cold start without restarting anything.

With NETNS names (`ip netns` namespaces), it listens on HOST:PORT inside each of them instead:
the real kube-apiserver (tests/support/kube_real.py) listens on the root namespace's loopback,
which the contivd nodes in their own namespaces cannot reach; so each node finds it on its own
127.0.0.1, and one kubeconfig serves the tests and every node.

In-process, `Relay` also forwards to a unix socket (a path as its target): the original netctl
can send a token only over https, and only from the invoking user's passwd home
(~/.netctl/config.json), so tests/ctl/test_netctl_compat.py lets it reach a node's root-only API
socket through a loopback port the test owns.

A line with another port number on stdin moves the relay to it: connections open then are cut
(a client sees its API server go away) and new ones go to the new target (a port nothing
listens on: the API server looks down). Prints `ready` once listening, `moved` after each move.
"""

from __future__ import annotations

import ctypes
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


class Relay:
    """Forwards connections to 127.0.0.1:`target`, or to the unix socket at `target` (a path)."""

    def __init__(self, listeners: list[socket.socket], target: int | str):
        self.listeners = listeners
        self.target = target
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()

    def serve(self, listener: socket.socket) -> None:
        while True:
            try:
                near = listener.accept()[0]
            except OSError:  # the listener was closed: the relay's owner is done with it
                return
            try:
                far = _connect(self.target)
            except OSError:
                near.close()
                continue
            for s in (near, far):  # relay each write at once: Nagle would hold small ones for the peer's delayed ACK
                if s.family != socket.AF_UNIX:
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
        with self.lock:
            self.open -= {a, b}

    def move(self, target: int) -> None:
        """New connections go to `target`; the open ones are cut."""
        self.target = target
        with self.lock:
            cut, self.open = self.open, set()
        for s in cut:
            _shut(s)


def _connect(target: int | str) -> socket.socket:
    if isinstance(target, int):
        return socket.create_connection(("127.0.0.1", target))
    far = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        far.connect(target)
    except OSError:
        far.close()
        raise
    return far


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _setns(libc: ctypes.CDLL, fd: int) -> None:
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def listen_in(namespace: str, host: str, port: int) -> socket.socket:
    """A listening socket made inside `namespace` (a socket stays in the namespace it was made
    in); the calling thread goes back to its own namespace, where the relay's connections go."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/thread-self/ns/net") as home, open(f"/var/run/netns/{namespace}") as there:
        _setns(libc, there.fileno())
        try:
            return socket.create_server((host, port))
        finally:
            _setns(libc, home.fileno())


def main(argv: list[str]) -> None:
    host, port, target, namespaces = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    listeners = [listen_in(ns, host, port) for ns in namespaces] if namespaces else [socket.create_server((host, port))]
    relay = Relay(listeners, target)
    for listener in listeners:
        threading.Thread(target=relay.serve, args=(listener,), daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        relay.move(int(line))
        print("moved", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

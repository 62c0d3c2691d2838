"""Service backends and clients as tiny Python programs in pod namespaces, for the tests that
send real traffic to a service VIP: each backend answers with its name, so a client sees
which backend a connection or datagram reached. Processes are killed by PID at the end."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

SERVE = (  # a backend: its name on every TCP accept and message, and in answer to every UDP datagram
    # argv[2] / argv[3]: the TCP / UDP ports, comma-separated
    "import socket,sys,threading\n"
    "name = sys.argv[1].encode()\n"
    "def accept(tcp):\n"
    "    while True: threading.Thread(target=talk, args=(tcp.accept()[0],), daemon=True).start()\n"
    "def talk(c):\n"
    "    c.sendall(name)\n"
    "    while c.recv(64): c.sendall(name)\n"
    "def answer(udp):\n"
    "    while True: data, peer = udp.recvfrom(64); udp.sendto(name, peer)\n"
    "def udp_socket(port):\n"
    "    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(('0.0.0.0', port)); return udp\n"
    "for port in sys.argv[2].split(','):\n"
    "    threading.Thread(target=accept, args=(socket.create_server(('0.0.0.0', int(port)), backlog=64),), daemon=True).start()\n"
    "for port in sys.argv[3].split(','):\n"
    "    threading.Thread(target=answer, args=(udp_socket(int(port)),), daemon=True).start()\n"
    "print('ready', flush=True); threading.Event().wait()\n"
)
FETCH = (  # N new connections (TCP) or datagrams from new ports (UDP): who answered each, '-' for nobody
    "import socket,sys\n"
    "host, port, count, udp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == 'udp'\n"
    "for _ in range(count):\n"
    "    try:\n"
    "        if udp:\n"
    "            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); s.sendto(b'?', (host, port))\n"
    "        else:\n"
    "            s = socket.create_connection((host, port), timeout=1)\n"
    "        print(s.recv(64).decode() or '-', flush=True)\n"
    "        s.close()\n"
    "    except OSError:\n"
    "        print('-', flush=True)\n"
)
HOLD = (  # one TCP connection kept open: the greeting, then the answer to each line read
    "import socket,sys\n"
    "c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)\n"
    "print(c.recv(64).decode(), flush=True)\n"
    "for line in sys.stdin:\n"
    "    c.sendall(b'?'); print(c.recv(64).decode() or '-', flush=True)\n"
)


SERVE_NAME = (  # a one-line answer per TCP connection (argv[2]), then close: for tests that only ask "who answered?"
    "import socket,sys\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen()\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    c=s.accept()[0]; c.sendall(sys.argv[2].encode()); c.close()\n"
)
FETCH_ONE = "import socket,sys; c=socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2); print(c.recv(64).decode())"


def in_namespace(namespace: str, *command: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, *command]


def fetch(pod: str, host: str, port: int, count: int, protocol: str = "tcp") -> list[str]:
    """Who answered each of `count` new connections (or datagrams) from `pod` to host:port."""
    done = subprocess.run(
        in_namespace(pod, sys.executable, "-c", FETCH, host, str(port), str(count), protocol), capture_output=True, text=True, timeout=60
    )
    return done.stdout.split()


def first_answer(namespace: str, address: str, port: int) -> str:
    """What one TCP connection from `namespace` to address:port reads first ('' when it fails)."""
    out = subprocess.run(in_namespace(namespace, sys.executable, "-c", FETCH_ONE, address, str(port)), capture_output=True, text=True, timeout=60)
    return out.stdout.strip() if out.returncode == 0 else ""


def start_answering(namespace: str, port: int, text: str, script: str = SERVE_NAME) -> subprocess.Popen[str]:
    """`script` (SERVE_NAME: answers `text` on each connection) listening on `port`; the caller kills it."""
    server = subprocess.Popen(in_namespace(namespace, sys.executable, "-c", script, str(port), text), stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    return server


class Processes:
    """Processes a test starts in namespaces, killed by PID at the end."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def start(self, namespace: str, *command: str, ready: bool = True) -> subprocess.Popen[str]:
        """Start `command` in `namespace`; with `ready`, wait for the line `ready` it prints."""
        proc = subprocess.Popen(in_namespace(namespace, *command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.started.append(proc)
        if ready:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", f"{command[:3]} did not start"
        return proc

    def serve(self, pod: str, name: str, tcp_port: int | Iterable[int], udp_port: int | Iterable[int]) -> None:
        """A backend answering with `name` on a TCP port and a UDP port (or on each of several)."""
        self.start(pod, sys.executable, "-c", SERVE, name, _port_list(tcp_port), _port_list(udp_port))

    def hold(self, pod: str, host: str, port: int, backend: str, attempts: int = 20) -> HeldConnection:
        """A TCP connection from `pod` to host:port that landed on `backend` (new ones until one does)."""
        for _ in range(attempts):
            proc = self.start(pod, sys.executable, "-c", HOLD, host, str(port), ready=False)
            assert proc.stdout is not None
            if proc.stdout.readline().strip() == backend:
                return HeldConnection(proc)
            stop(proc)
        raise AssertionError(f"none of {attempts} connections to {host}:{port} landed on {backend}")

    def stop_all(self) -> None:
        for proc in self.started:
            stop(proc)


def _port_list(ports: int | Iterable[int]) -> str:
    return str(ports) if isinstance(ports, int) else ",".join(map(str, ports))


class HeldConnection:
    def __init__(self, proc: subprocess.Popen[str]):
        self.proc = proc

    def ask(self) -> str:
        """Who answers on this connection now ('' when it broke)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write("?\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return ""
        return self.proc.stdout.readline().strip()


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@contextmanager
def processes() -> Iterator[Processes]:
    running = Processes()
    try:
        yield running
    finally:
        running.stop_all()

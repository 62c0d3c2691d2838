"""ExaBGP's API process: a byte pipe between ExaBGP's stdin/stdout and contivd's unix socket.

ExaBGP talks to the programs it starts itself; contivd wants the conversation in its own event
loop. This program is what ExaBGP starts: it connects to the socket the node's speaker listens
on and copies lines both ways until either side closes. Standard library only, and nothing
else: it starts with every ExaBGP process.
"""

from __future__ import annotations

import socket
import sys
import threading


def _to_socket(conn: socket.socket) -> None:
    for line in sys.stdin.buffer:
        conn.sendall(line)
    conn.shutdown(socket.SHUT_WR)


def main(path: str) -> None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    threading.Thread(target=_to_socket, args=(conn,), daemon=True).start()
    out = sys.stdout.buffer
    while chunk := conn.recv(65536):
        out.write(chunk)
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1])

"""The HTTP server's floor: CPU per request of hypercorn (contivd's HTTP server, with contivd's idle
timer and without it) and of h11 on trio alone (the parser hypercorn itself uses), side by side in
one run, each answering the same small JSON body to one keep-alive client.

This is the part of every API request that contivd's own code does not spend: issue 28 measured
createEndpoint against the original netmaster, and what is left of its CPU is mostly here. The
h11 server is a measuring stick only (no limits, no timeouts, no TLS): contivd serves with
hypercorn.

Each server runs in its own process; the client is this process (stdlib http.client, one
connection); server CPU comes from /proc. Rounds alternate between the servers.

Usage: python3 benchmarks/http_floor.py [--quick]
--quick: 2 rounds of 1 000 requests (default 4 rounds of 3 000). The last line printed is one
JSON object with every figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BODY = b'{"status": "ok"}\n'

SERVERS = {
    "hypercorn": "hypercorn",
    "hypercorn_contivd_timer": "hypercorn+timer",
    "h11_trio": "h11",
}

# The child: serves on the port in argv[2] with the kind in argv[1] until killed.
CHILD = r"""
import sys, trio
kind, port = sys.argv[1], int(sys.argv[2])
BODY = b'{"status": "ok"}\n'

async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            if (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})

async def h11_connection(stream):
    import h11
    conn = h11.Connection(h11.SERVER)
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data:
                return
            conn.receive_data(data)
        elif isinstance(event, h11.EndOfMessage):
            out = conn.send(h11.Response(status_code=200, headers=[("content-type", "application/json"), ("content-length", str(len(BODY)))]))
            out += conn.send(h11.Data(data=BODY)) + conn.send(h11.EndOfMessage())
            await stream.send_all(out)
            conn.start_next_cycle()
        elif isinstance(event, h11.ConnectionClosed):
            return

if kind == "h11":
    trio.run(lambda: trio.serve_tcp(h11_connection, port, host="127.0.0.1"))
else:
    from hypercorn.config import Config
    from hypercorn.trio import serve
    if kind == "hypercorn+timer":
        from contivd.http import idle_timer
        assert idle_timer.install()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.include_server_header = False
    trio.run(serve, asgi, config)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _connect(port: int) -> http.client.HTTPConnection:
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/x")
            conn.getresponse().read()
            return conn
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _round(conn: http.client.HTTPConnection, pid: int, requests: int) -> tuple[float, float]:
    """(requests per second, server CPU ms per request)."""
    cpu, started = _cpu_seconds(pid), time.perf_counter()
    for _ in range(requests):
        conn.request("GET", "/x")
        answer = conn.getresponse()
        assert answer.read() == BODY, answer.status
    elapsed = time.perf_counter() - started
    return requests / elapsed, 1000 * (_cpu_seconds(pid) - cpu) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of 1 000 requests per server")
    args = parser.parse_args()
    rounds, requests = (2, 1000) if args.quick else (4, 3000)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    connections: dict[str, http.client.HTTPConnection] = {}
    try:
        for name, kind in SERVERS.items():
            port = _free_port()
            processes[name] = subprocess.Popen([sys.executable, "-c", CHILD, kind, str(port)], env=env, stderr=subprocess.DEVNULL)
            connections[name] = _connect(port)
        rates: dict[str, list[float]] = {name: [] for name in SERVERS}
        cpus: dict[str, list[float]] = {name: [] for name in SERVERS}
        for _ in range(rounds):
            for name in SERVERS:
                rate, cpu = _round(connections[name], processes[name].pid, requests)
                rates[name].append(rate)
                cpus[name].append(cpu)
    finally:
        for process in processes.values():
            process.kill()
            process.wait()
    figures: dict[str, object] = {"quick": args.quick}
    for name in SERVERS:
        figures[f"{name}_per_s"] = round(statistics.median(rates[name]), 1)
        figures[f"{name}_cpu_ms_per_request"] = round(statistics.median(cpus[name]), 3)
        print(f"{name:24} {figures[f'{name}_per_s']:8}/s  server CPU {figures[f'{name}_cpu_ms_per_request']:.3f} ms/request")
    floor = statistics.median(cpus["h11_trio"])
    figures["hypercorn_over_h11_cpu_ms"] = round(statistics.median(cpus["hypercorn_contivd_timer"]) - floor, 3)
    figures["cpu_ratio_hypercorn_vs_h11"] = round(statistics.median(cpus["hypercorn_contivd_timer"]) / floor, 2)
    print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
    main()

"""The node's BGP speaker: ExaBGP run and supervised by contivd, fed from the store.

Every node runs one `BgpSpeaker`. It idles until the store holds a `Bgp` object named after the
node; then it starts ExaBGP with that peering (peering.py renders the configuration) and keeps
the advertised /32s equal to the addresses of the endpoints homed here. A changed object
restarts the session with the new peering, a deleted one stops it (the neighbor withdraws the
routes), a crashed ExaBGP is restarted with backoff. A `Bgp` object that cannot be used is
reported (log, `/inspect/bgp` `Error`) and changes nothing else.

ExaBGP talks only to processes it starts: it starts `relay.py`, which connects back to a unix
socket this speaker listens on (mode 0600 in a root-only directory), so the conversation runs
in this event loop.
"""

from __future__ import annotations

import ctypes
import ipaddress
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..state import StateCache, StateSnapshot
from . import relay
from .peering import (
    BgpConfigError,
    Peering,
    RoutesLearned,
    SessionChange,
    exabgp_config,
    inspect_answer,
    local_prefixes,
    parse_message,
    peering_from_object,
    route_commands,
)

log = logging.getLogger("contivd.bgp")

RELAY_CONNECT_SECONDS = 20.0  # ExaBGP starts its API process once its configuration is loaded
RESTART_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0)


@dataclass
class SpeakerState:
    """What `/inspect/bgp` and the status page show; replaced as a whole by the speaker."""

    peering: Peering | None = None
    session: str = "idle"
    learned: dict[str, str] = field(default_factory=dict)  # prefix → next hop
    advertised: frozenset[str] = frozenset()
    error: str = ""


def desired(snapshot: StateSnapshot, node: str) -> tuple[Peering | None, str, frozenset[str]]:
    """The peering the store asks of this node (or None), why an object is unusable, and the
    prefixes to advertise."""
    obj = snapshot.object("Bgp", node)
    prefixes = local_prefixes(((ep.homing_host, ep.ip_address) for ep in snapshot.endpoints.values()), node)
    if obj is None:
        return None, "", prefixes
    try:
        return peering_from_object(obj), "", prefixes
    except BgpConfigError as exc:
        return None, str(exc), prefixes


RoutesListener = Callable[[ipaddress.IPv4Interface | None, Mapping[str, str]], None]
"""Told the router address of the running peering (None: none) and the learned routes
(prefix → next hop) whenever either changes: routing mode's datapath installs them."""


class BgpSpeaker:
    def __init__(self, cache: StateCache, node: str, run_dir: Path, hold_time: int = 9, on_routes: RoutesListener | None = None):
        self.cache = cache
        self.on_routes = on_routes
        self._published: tuple[ipaddress.IPv4Interface | None, dict[str, str]] = (None, {})
        self.node = node
        self.run_dir = run_dir
        self.hold_time = hold_time
        self.state = SpeakerState()
        self._wanted: frozenset[str] = frozenset()
        self._wanted_changed = trio.Event()

    def inspect(self) -> dict[str, object]:
        return inspect_answer(self.state.peering, self.state.session, self.state.learned, self.state.error)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        running: Peering | None = None
        reported = ""
        async with trio.open_nursery() as nursery:
            session_scope: trio.CancelScope | None = None
            while True:
                peering, error, prefixes = desired(self.cache.catch_up(), self.node)
                if error != reported:
                    if error:
                        log.error("BGP: %s; the session (if any) is left as it was", error)
                    reported = error
                self.state.error = error
                if error:
                    peering = running  # an unusable object changes nothing
                self._set_wanted(prefixes)
                if peering != running:
                    if session_scope is not None:
                        session_scope.cancel()
                        session_scope = None
                    running = peering
                    self.state = SpeakerState(peering=peering, error=error)
                    self._publish()
                    if peering is not None:
                        session_scope = await nursery.start(self._supervise, peering)
                await self.cache.wait_changed()

    def _set_wanted(self, prefixes: frozenset[str]) -> None:
        if prefixes != self._wanted:
            self._wanted = prefixes
            self._wanted_changed.set()

    async def _supervise(self, peering: Peering, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        """Run ExaBGP for `peering` until cancelled, restarting it when it stops."""
        with trio.CancelScope() as scope:
            task_status.started(scope)
            failures = 0
            while True:
                log.info("BGP: peering with %s (AS %d) from %s (AS %d)", peering.neighbor, peering.neighbor_as, peering.router_ip, peering.local_as)
                try:
                    await self._session(peering)
                    failures = 0
                except (OSError, trio.TooSlowError) as exc:
                    log.error("BGP: ExaBGP session failed: %s", exc)
                delay = RESTART_BACKOFF_SECONDS[min(failures, len(RESTART_BACKOFF_SECONDS) - 1)]
                failures += 1
                self.state.session, self.state.learned, self.state.advertised = "idle", {}, frozenset()
                self._publish()
                log.warning("BGP: ExaBGP stopped; restarting in %.0f s", delay)
                await trio.sleep(delay)

    async def _session(self, peering: Peering) -> None:
        self.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o700)
        socket_path = self.run_dir / "bgp-api.sock"
        socket_path.unlink(missing_ok=True)
        listener = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        with listener:
            await listener.bind(str(socket_path))
            os.chmod(socket_path, 0o600)
            listener.listen(1)
            config = self.run_dir / "exabgp.conf"
            config.write_text(exabgp_config(peering, (sys.executable, relay.__file__, str(socket_path)), self.hold_time))
            async with trio.open_nursery() as nursery:
                await nursery.start(_run_exabgp, config)
                with trio.fail_after(RELAY_CONNECT_SECONDS):
                    conn, _ = await listener.accept()
                stream = trio.SocketStream(conn)
                async with stream:
                    nursery.start_soon(self._send_routes, stream)
                    await self._read_messages(stream, peering)
                nursery.cancel_scope.cancel()  # ExaBGP's stream ended: it stopped, or is stopping

    async def _send_routes(self, stream: trio.SocketStream) -> None:
        while True:
            wanted = self._wanted
            commands = route_commands(self.state.advertised, wanted)
            if commands:
                await stream.send_all("".join(f"{c}\n" for c in commands).encode())
                self.state.advertised = wanted
                log.debug("BGP: %d announcements and withdrawals sent to ExaBGP", len(commands))
            if self._wanted is wanted:
                self._wanted_changed = trio.Event()
                await self._wanted_changed.wait()

    async def _read_messages(self, stream: trio.SocketStream, peering: Peering) -> None:
        buffered = b""
        async for chunk in stream:
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                message = parse_message(line.decode(errors="replace"), peering.local_as)
                if isinstance(message, SessionChange):
                    if message.state != self.state.session:
                        log.info("BGP: session with %s %s", message.neighbor, message.state)
                    self.state.session = message.state
                    if message.state == "down":
                        self.state.learned = {}
                        self._publish()
                elif isinstance(message, RoutesLearned):
                    learned = {p: hop for p, hop in self.state.learned.items() if p not in message.withdrawn}
                    self.state.learned = {**learned, **message.announced}
                    self._publish()

    def _publish(self) -> None:
        """Tell the listener the router address and learned routes, when they changed."""
        peering = self.state.peering
        current = (None if peering is None else peering.router_ip, dict(self.state.learned))
        if self.on_routes is not None and current != self._published:
            self._published = current
            self.on_routes(*current)


async def _run_exabgp(config: Path, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """ExaBGP on `config` as root (contivd runs as root; ExaBGP gains nothing by switching user)
    with its log on stderr, which goes to contivd's log; its built-in CLI pipes are off.
    Cancelling this task terminates ExaBGP (SIGTERM, SIGKILL after 5 s)."""
    import exabgp

    env = {
        **os.environ,
        "PYTHONPATH": str(Path(exabgp.__file__).parent.parent),
        "exabgp.daemon.user": "root",
        "exabgp.daemon.drop": "false",
        "exabgp.api.cli": "false",
        "exabgp.log.destination": "stderr",
        "exabgp.log.level": "WARNING",
    }
    popen = await spawn_tied([sys.executable, "-m", "exabgp", str(config)], env)
    try:
        assert popen.stderr is not None
        stderr = trio.lowlevel.FdStream(os.dup(popen.stderr.fileno()))
        popen.stderr.close()
        task_status.started()
        async with stderr:
            await _log_lines(stderr)
        await _exited(popen)
    finally:
        with trio.CancelScope(shield=True):
            await _stop(popen)


_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="contivd-spawner")
"""The thread that forks ExaBGP. PR_SET_PDEATHSIG fires when the *thread* that forked the child
ends, not the process: trio forks in its worker threads, which end after 10 s idle, and ExaBGP
then got SIGTERM ~10 s into a session (the router withdrew the node's routes until the restart).
This executor's one thread lives as long as contivd."""


async def spawn_tied(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `argv` (stdin and stdout to /dev/null, stderr piped) so that it dies with contivd,
    even by SIGKILL (_die_with_parent), forked from the long-lived spawner thread."""
    return await trio.to_thread.run_sync(lambda: _SPAWNER.submit(_spawn, argv, env).result())


def _spawn(argv: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_parent)


async def _exited(popen: subprocess.Popen[bytes]) -> None:
    """Wait (without blocking the event loop: a pidfd) until `popen` has exited, and reap it."""
    if popen.returncode is None:
        pidfd = os.pidfd_open(popen.pid)  # a zombie is not reaped before popen.wait(): the pid is still ours
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
    popen.wait()


async def _stop(popen: subprocess.Popen[bytes]) -> None:
    if popen.returncode is not None:
        return
    popen.terminate()
    with trio.move_on_after(5):
        await _exited(popen)
    if popen.returncode is None:
        popen.kill()
        await _exited(popen)


def _die_with_parent() -> None:
    """In the child before exec: a contivd that dies (even by SIGKILL) takes ExaBGP with it, so
    a dead node stops advertising its routes at once instead of at the neighbor's hold timer."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


async def _log_lines(stderr: trio.abc.ReceiveStream) -> None:
    buffered = b""
    async for chunk in stderr:
        buffered += chunk
        *lines, buffered = buffered.split(b"\n")
        for line in lines:
            if line.strip():
                log.warning("exabgp: %s", line.decode(errors="replace").rstrip())

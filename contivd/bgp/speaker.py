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
import logging
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from functools import partial
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


class BgpSpeaker:
    def __init__(self, cache: StateCache, node: str, run_dir: Path, hold_time: int = 9):
        self.cache = cache
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
                elif isinstance(message, RoutesLearned):
                    learned = {p: hop for p, hop in self.state.learned.items() if p not in message.withdrawn}
                    self.state.learned = {**learned, **message.announced}


async def _run_exabgp(config: Path, *, task_status: trio.TaskStatus[trio.Process]) -> None:
    """ExaBGP on `config` as root (contivd runs as root; ExaBGP gains nothing by switching user)
    with its log on stderr, which goes to contivd's log; its built-in CLI pipes are off.
    Cancelling this task terminates ExaBGP (trio.run_process)."""
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
    argv = [sys.executable, "-m", "exabgp", str(config)]
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            partial(
                trio.run_process,
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                check=False,
                preexec_fn=_die_with_parent,
            )  # fmt: skip
        )
        task_status.started(process)
        await _log_lines(process)


def _die_with_parent() -> None:
    """In the child before exec: a contivd that dies (even by SIGKILL) takes ExaBGP with it, so
    a dead node stops advertising its routes at once instead of at the neighbor's hold timer."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


async def _log_lines(process: trio.Process) -> None:
    assert process.stderr is not None
    buffered = b""
    async for chunk in process.stderr:
        buffered += chunk
        *lines, buffered = buffered.split(b"\n")
        for line in lines:
            if line.strip():
                log.warning("exabgp: %s", line.decode(errors="replace").rstrip())

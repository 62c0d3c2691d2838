"""What the Kubernetes watch is doing, for readiness, /info, the status page, the systemd
STATUS line and /metrics. Written by the reflectors and the syncer, read by the API: plain
attributes under a lock, no trio (the CNI server's threads read nothing here, but the API may
answer from anywhere).

Each watched kind goes through a small state machine (`KindState`, pure functions below):
`listing` (no list yet, or a 410 threw the history away) → `watching` (the watch request was
answered) → `resuming` (the server ended the watch; it is being opened again from the last
resourceVersion) → `watching`, and `backing_off` after any failure. Readiness is the truth:
every kind must be `watching` (a `resuming` kind gets RESUME_GRACE_SECONDS, the time a routine
renewal takes, before it counts as not watching).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

log = logging.getLogger("contivd.k8s")
Phase = Literal["listing", "watching", "resuming", "backing_off"]
PHASES: tuple[Phase, ...] = ("listing", "watching", "resuming", "backing_off")
RESUME_GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class KindState:
    """One kind's list/watch, as readiness, the status page and /metrics show it. Times are unix
    seconds."""

    phase: Phase = "listing"
    since: float = 0.0  # when the phase began
    resource_version: str = ""  # the newest one seen (list, event or bookmark); "" before the first list
    version_seen: float = 0.0  # when resource_version last moved: a watch that hears nothing for long is suspect
    last_error: str = ""  # the latest failure, kept after recovery (with its time) for the operator
    error_since: float | None = None  # when that failure began (repeats of the same error do not move it)
    relists: int = 0  # lists after the first (410: history gone; or something unreadable)
    failures: int = 0  # failed lists or watches, retries included

    def ready_problem(self, now: float) -> str | None:
        """Why this kind keeps the node from being ready, or None."""
        if self.phase == "watching" or (self.phase == "resuming" and now - self.since < RESUME_GRACE_SECONDS):
            return None
        if self.phase == "backing_off":
            return self.last_error
        return f"{self.phase} since {now - self.since:.1f} s"


def _entered(state: KindState, phase: Phase, now: float) -> KindState:
    return state if state.phase == phase else replace(state, phase=phase, since=now)


def listing(state: KindState, now: float) -> KindState:
    """A list is about to be made (the first, or a relist)."""
    return _entered(state, "listing", now)


def listed(state: KindState, resource_version: str, now: float) -> KindState:
    """The list is in; a watch from its resourceVersion follows."""
    relists = state.relists + (1 if state.version_seen else 0)
    return replace(state, resource_version=resource_version, version_seen=now, relists=relists)


def watching(state: KindState, now: float) -> KindState:
    """The server answered the watch request: changes flow from here on."""
    return _entered(state, "watching", now)


def advanced(state: KindState, resource_version: str, now: float) -> KindState:
    """An event or a bookmark moved the resourceVersion."""
    return replace(state, resource_version=resource_version, version_seen=now)


def resuming(state: KindState, now: float) -> KindState:
    """The server ended the watch; it is opened again from the last resourceVersion."""
    return _entered(state, "resuming", now)


def expired(state: KindState, now: float) -> KindState:
    """410: the history since our resourceVersion is gone; a relist follows."""
    return replace(_entered(state, "listing", now), resource_version="")


def failed(state: KindState, error: str, now: float) -> KindState:
    """A list or watch failed (unreachable, refused, unreadable): back off, then try again."""
    error_since = state.error_since if (state.phase == "backing_off" and state.last_error == error) else now
    return replace(_entered(state, "backing_off", now), last_error=error, error_since=error_since, failures=state.failures + 1)


def change_line(kind: str, before: KindState, after: KindState) -> str | None:
    """The log line for a state change of a kind, or None when there is nothing to say: the
    routine renewal of a watch (watching → resuming → watching) and a repeated failure are not
    news; a new failure, a recovery and a relist are."""
    if before.phase == after.phase:
        if after.phase == "backing_off" and after.last_error != before.last_error:
            return f"Kubernetes {kind}: {after.last_error}"
        return None
    if {before.phase, after.phase} == {"watching", "resuming"}:
        return None
    if after.phase == "backing_off":
        return f"Kubernetes {kind}: {after.last_error}"
    if after.phase == "watching":
        was = f" after {before.phase.replace('_', ' ')}" if before.phase != "listing" else ""
        return f"Kubernetes {kind}: watching from resourceVersion {after.resource_version}{was}"
    if after.phase == "listing" and before.phase != "backing_off":
        return f"Kubernetes {kind}: listing" + (" (its history is gone: relist)" if before.resource_version else "")
    return None


@dataclass(frozen=True)
class KubeStatusView:
    watching: bool  # this node is the leader and runs the watch
    problems: dict[str, str]  # by kind: why its list/watch fails now ("kubeconfig": why the client cannot start)
    services: int  # records written (programmable Services)
    skipped: dict[str, str] = field(default_factory=dict)  # service key -> reason, now
    kinds: dict[str, KindState] = field(default_factory=dict)  # each watched kind's list/watch state

    def not_ready(self, now: float) -> dict[str, str]:
        """By kind (or "kubeconfig"): why the node is not ready in Kubernetes mode; empty when
        every kind has listed and is watching."""
        problems = {k: why for k, why in self.problems.items() if k not in self.kinds}
        if self.watching and not self.kinds and not problems:
            problems["watch"] = "starting"
        for kind, state in self.kinds.items():
            if (why := state.ready_problem(now)) is not None:
                problems[kind] = why
        return problems


class KubeHealth:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.watching = False
        self._problems: dict[str, str] = {}  # why the client could not start ("kubeconfig")
        self._kinds: dict[str, KindState] = {}
        self._relists: Counter[str] = Counter()  # by kind, over every term (the /metrics counters)
        self._failures: Counter[str] = Counter()
        self.services = 0
        self.skipped_now: dict[str, str] = {}
        self.skips: Counter[tuple[str, str]] = Counter()  # (service key, reason) -> times found unprogrammable
        self.labels_not_applied: Counter[tuple[str, str]] = Counter()  # (pod key, reason) -> label changes left unapplied
        self.relabelled = 0  # endpoints moved or relabelled after their pod's labels changed

    def failed(self, what: str, why: str) -> None:
        """Something other than a kind's list/watch fails (the kubeconfig)."""
        with self._lock:
            self._problems[what] = why

    def expect(self, kinds: list[str], now: float) -> None:
        """The term watches these kinds: each is `listing` until it has listed and watches."""
        with self._lock:
            self._kinds = {kind: KindState(since=now) for kind in kinds}

    def update(self, kind: str, change: Callable[[KindState], KindState]) -> KindState:
        """Apply a transition (one of the pure functions above) to a kind; log what changed."""
        with self._lock:
            before = self._kinds.get(kind, KindState())
            after = self._kinds[kind] = change(before)
            if after.relists > before.relists:
                self._relists[kind] += after.relists - before.relists
            if after.failures > before.failures:
                self._failures[kind] += after.failures - before.failures
        if (line := change_line(kind, before, after)) is not None:
            (log.warning if after.phase == "backing_off" else log.info)("%s", line)
        return after

    def start(self) -> None:
        with self._lock:
            self.watching, self._problems, self._kinds = True, {}, {}

    def stop(self) -> None:
        """The term ended: the kinds' states go with it (a kubeconfig problem stays)."""
        with self._lock:
            self.watching, self._kinds = False, {}
            self._problems = {k: v for k, v in self._problems.items() if k == "kubeconfig"}

    def view(self) -> KubeStatusView:
        with self._lock:
            problems = dict(self._problems)
            problems.update({kind: state.last_error for kind, state in self._kinds.items() if state.phase == "backing_off"})
            return KubeStatusView(self.watching, problems, self.services, dict(self.skipped_now), dict(self._kinds))

    def watch_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(relists, failed lists or watches), by kind, since the process started."""
        with self._lock:
            return dict(self._relists), dict(self._failures)

    def skip_counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self.skips)

    def record_skip(self, service: str, reason: str) -> None:
        with self._lock:
            self.skips[(service, reason)] += 1
            self.skipped_now[service] = reason

    def clear_skip(self, service: str) -> None:
        with self._lock:
            self.skipped_now.pop(service, None)

    def record_label_change(self, pod: str, reason: str | None) -> None:
        """A pod's label change applied (`reason` None) or left unapplied for `reason`."""
        with self._lock:
            if reason is None:
                self.relabelled += 1
            else:
                self.labels_not_applied[(pod, reason)] += 1

    def label_counts(self) -> tuple[int, dict[tuple[str, str], int]]:
        """(endpoints relabelled, unapplied label changes by (pod, reason))."""
        with self._lock:
            return self.relabelled, dict(self.labels_not_applied)

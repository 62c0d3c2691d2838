"""What the Kubernetes watch is doing, for readiness, /info, the systemd STATUS line and
/metrics. Written by the reflector threads and the syncer, read by the API: plain attributes
under a lock, no trio."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KubeStatusView:
    watching: bool  # this node is the leader and runs the watch
    problems: dict[str, str]  # by kind: why its list/watch fails; empty when both work
    services: int  # records written (programmable Services)
    skipped: dict[str, str] = field(default_factory=dict)  # service key -> reason, now


class KubeHealth:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.watching = False
        self._problems: dict[str, str] = {}
        self.services = 0
        self.skipped_now: dict[str, str] = {}
        self.skips: Counter[tuple[str, str]] = Counter()  # (service key, reason) -> times found unprogrammable
        self.labels_not_applied: Counter[tuple[str, str]] = Counter()  # (pod key, reason) -> label changes left unapplied
        self.relabelled = 0  # endpoints moved or relabelled after their pod's labels changed

    def ok(self, kind: str) -> None:
        with self._lock:
            self._problems.pop(kind, None)

    def failed(self, kind: str, why: str) -> None:
        with self._lock:
            self._problems[kind] = why

    def start(self) -> None:
        with self._lock:
            self.watching, self._problems = True, {}

    def stop(self) -> None:
        """The term ended: the reflectors' problems go with it (a kubeconfig problem stays)."""
        with self._lock:
            self.watching = False
            self._problems = {k: v for k, v in self._problems.items() if k == "kubeconfig"}

    def view(self) -> KubeStatusView:
        with self._lock:
            return KubeStatusView(self.watching, dict(self._problems), self.services, dict(self.skipped_now))

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

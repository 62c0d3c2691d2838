"""A watched kind's state machine (contivd.k8s.status): what readiness, the status page and
/metrics read, and the one log line per change."""

from __future__ import annotations

from contivd.k8s.status import (
    RESUME_GRACE_SECONDS,
    KindState,
    KubeStatusView,
    advanced,
    change_line,
    expired,
    failed,
    listed,
    listing,
    resuming,
    watching,
)


def test_a_kind_is_ready_only_once_listed_and_watching() -> None:
    state = listing(KindState(since=10), now=10)  # a term starts every kind listing (KubeHealth.expect)
    assert state.ready_problem(10.5) == "listing since 0.5 s"
    state = listed(state, "42", now=11)
    assert state.ready_problem(11) is not None  # listed, but its watch is not answered yet
    state = watching(state, now=11.2)
    assert state.phase == "watching" and state.resource_version == "42" and state.ready_problem(100) is None
    assert state.relists == 0


def test_a_watch_renewal_is_ready_for_a_grace_then_not() -> None:
    state = resuming(watching(listed(KindState(), "5", now=1), now=1), now=50)
    assert state.ready_problem(50 + RESUME_GRACE_SECONDS / 2) is None
    assert state.ready_problem(50 + RESUME_GRACE_SECONDS + 0.1) == f"resuming since {RESUME_GRACE_SECONDS + 0.1:.1f} s"


def test_failures_keep_their_first_time_and_count_every_retry() -> None:
    state = watching(listed(KindState(), "5", now=1), now=1)
    state = failed(state, "the API server is unreachable: refused", now=20)
    state = failed(state, "the API server is unreachable: refused", now=21)
    assert (state.phase, state.error_since, state.failures, state.since) == ("backing_off", 20, 2, 20)
    assert state.ready_problem(22) == "the API server is unreachable: refused"
    state = failed(state, "the API server refused the services list/watch: 401", now=23)
    assert state.error_since == 23
    state = watching(state, now=30)
    assert state.ready_problem(30) is None and state.last_error.endswith("401")  # kept for the operator, with its time


def test_a_410_relists_and_counts_it() -> None:
    state = advanced(watching(listed(KindState(), "5", now=1), now=1), "9", now=2)
    assert (state.resource_version, state.version_seen) == ("9", 2)
    state = expired(state, now=3)
    assert (state.phase, state.resource_version) == ("listing", "")
    state = watching(listed(state, "12", now=4), now=4)
    assert state.relists == 1 and state.resource_version == "12"


def test_one_log_line_per_change_not_per_renewal_or_retry() -> None:
    first = KindState()
    up = watching(listed(listing(first, now=0), "5", now=0), now=0)
    assert change_line("services", first, up) == "Kubernetes services: watching from resourceVersion 5"
    renewing = resuming(up, now=300)
    assert change_line("services", up, renewing) is None
    assert change_line("services", renewing, watching(renewing, now=300)) is None
    down = failed(renewing, "the API server is unreachable: refused", now=301)
    assert change_line("services", renewing, down) == "Kubernetes services: the API server is unreachable: refused"
    again = failed(down, "the API server is unreachable: refused", now=302)
    assert change_line("services", down, again) is None
    back = watching(again, now=305)
    assert change_line("services", again, back) == "Kubernetes services: watching from resourceVersion 5 after backing off"
    gone = expired(back, now=306)
    assert change_line("services", back, gone) == "Kubernetes services: listing (its history is gone: relist)"


def test_the_view_is_ready_when_every_kind_watches_and_the_kubeconfig_works() -> None:
    ok = watching(listed(KindState(), "5", now=0), now=0)
    view = KubeStatusView(True, {}, 0, kinds={"services": ok, "pods": listing(KindState(), now=0)})
    assert view.not_ready(1) == {"pods": "listing since 1.0 s"}
    assert KubeStatusView(True, {}, 0, kinds={"services": ok}).not_ready(1) == {}
    assert KubeStatusView(True, {"kubeconfig": "cannot be used"}, 0).not_ready(1) == {"kubeconfig": "cannot be used"}

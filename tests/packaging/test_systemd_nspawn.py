"""The .deb under a real systemd (issue 16 item 6): a fresh bookworm container installs it with
`apt-get install ./contivd_*.deb`, Open vSwitch included; the unit starts on the first try,
READY with its STATUS= line and a log free of tracebacks; `systemctl restart` keeps the
bridge's flows (hitless: none is missing at any time); a stopped main loop is caught by the watchdog
and restarted; `apt-get purge` leaves nothing behind.

Slow (~5 minutes; the cached root file system takes ~3 more the first time). Skipped, with
the reason, where systemd-nspawn cannot boot a container (not root, no overlayfs, …)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .nspawn import CannotBoot, Container, booted, ensure_rootfs, in_chroot

pytestmark = [
    pytest.mark.systemd,
    pytest.mark.packaging,
    pytest.mark.skipif(os.geteuid() != 0, reason="booting a container needs root"),
    pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb to build the .deb"),
]

BRIDGE = "contivVxlanBridge"
INSTALL = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends"
# What a flow is, for traffic: its match and actions, not its counters or its cookie (the agent
# re-adds every flow under a new cookie round after a restart; OVS replaces each atomically).
VOLATILE = re.compile(r"\b(cookie|duration|n_packets|n_bytes|idle_age|hard_age)=[^,\s]*,?\s*")


def unit(container: Container, *names: str) -> dict[str, str]:
    out = container.sh("systemctl show contivd " + " ".join(f"-p {n}" for n in names)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def flows(container: Container) -> set[str]:
    """The bridge's flows, each as its table, priority, match and actions."""
    target = f"/var/lib/contivd/ovs/{BRIDGE}.mgmt"
    out = container.sh(f"t={BRIDGE}; [ -S {target} ] && t={target}; ovs-ofctl -O OpenFlow13 --no-names dump-flows $t").stdout
    return {VOLATILE.sub("", line).strip() for line in out.splitlines() if "actions=" in line}


def wait_active(container: Container, timeout: float = 180) -> None:
    container.wait("systemctl is-active contivd", "active", timeout, "contivd.service to be active")


def test_the_deb_installs_starts_restarts_hitlessly_survives_the_watchdog_and_purges(built: tuple[Path, Path]) -> None:
    _, deb = built
    try:
        base = ensure_rootfs()
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot build the bookworm root file system (debootstrap or apt failed): {exc.stderr[-500:]}")

    def fetch_dependencies(root: Path) -> None:
        """The container has no network: everything the install needs is fetched beforehand."""
        shutil.copy(deb, root / "root" / deb.name)
        in_chroot(root, f"apt-get update -qq && {INSTALL} --download-only /root/{deb.name}")  # lists as fresh as the mirror

    try:
        with booted(base, fetch_dependencies) as container:
            _check_install(container, deb.name)
            _check_hitless_restart(container)
            _check_watchdog(container)
            _check_purge(container)
    except CannotBoot as exc:
        pytest.skip(f"systemd-nspawn cannot boot a container here: {exc}")


def _check_install(container: Container, deb: str) -> None:
    container.sh(f"{INSTALL} /root/{deb}", timeout=900)
    wait_active(container)  # postinst started it: active means READY=1 arrived (Type=notify)
    state = unit(container, "Type", "ActiveState", "SubState", "StatusText", "NRestarts")
    assert state["Type"] == "notify" and state["SubState"] == "running", state
    assert state["StatusText"].startswith("leader (term"), state
    assert state["NRestarts"] == "0", "the first start succeeded: OVS was configured before contivd's postinst"
    assert container.sh("stat -c '%a %U %G' /etc/contivd/contivd.toml").stdout.split() == ["640", "root", "root"]
    assert container.sh("readlink /opt/cni/bin/contiv").stdout.strip() == "/usr/lib/cni/contiv"
    log = container.sh("journalctl -b -u contivd --no-pager -o cat").stdout
    for bad in ("Traceback", " ERROR ", "Open vSwitch is not installed", "Post-commit checks failed", "ConfigurationDirectory"):
        assert bad not in log, f"{bad!r} in the start log:\n{log[-3000:]}"


def _check_hitless_restart(container: Container) -> None:
    """While contivd stops and starts again, every flow stays in the bridge (fail_mode secure,
    OVS outlives contivd), and the restarted agent ends with the same flows."""
    container.wait("systemctl show -p SubState contivd", "SubState=running", 60, "contivd running")
    before = flows(container)
    assert len(before) >= 5, before
    pid = unit(container, "MainPID")["MainPID"]
    container.sh("systemctl restart --no-block contivd")
    samples = 0
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        missing = before - flows(container)
        assert not missing, f"flows gone during the restart (sample {samples}): {sorted(missing)}"
        samples += 1
        now = unit(container, "MainPID", "ActiveState")
        if now["ActiveState"] == "active" and now["MainPID"] not in ("0", pid):
            break
    else:
        raise AssertionError(f"contivd did not come back within 180 s: {now}")
    assert samples >= 2, "sampled the flows while contivd was restarting"
    container.wait("systemctl show -p StatusText contivd | grep -c 'last reconcile'", "1", 120, "the restarted agent's first reconcile")
    assert flows(container) == before


def _check_watchdog(container: Container) -> None:
    state = unit(container, "MainPID", "NRestarts", "WatchdogUSec")
    assert state["WatchdogUSec"] == "30s", state
    container.sh(f"kill -STOP {state['MainPID']}")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        now = unit(container, "MainPID", "NRestarts", "ActiveState")
        if now["NRestarts"] != state["NRestarts"] and now["ActiveState"] == "active" and now["MainPID"] not in ("0", state["MainPID"]):
            break
        time.sleep(2)
    else:
        raise AssertionError(f"the watchdog did not restart a stopped contivd within 180 s: {now}")
    assert "Watchdog timeout" in container.sh("journalctl -b -u contivd --no-pager -o cat").stdout


def _check_purge(container: Container) -> None:
    main = unit(container, "MainPID")["MainPID"]
    container.sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q contivd", timeout=300)
    assert container.sh("systemctl is-active contivd", check=False).stdout.strip() in ("inactive", "unknown")
    assert container.sh(f"test -e /proc/{main}", check=False).returncode != 0, "the node process is gone"
    for path in ("/var/lib/contivd", "/etc/contivd", "/opt/cni/bin/contiv", "/lib/systemd/system/contivd.service", "/usr/bin/contivd"):
        assert container.sh(f"test -e {path} || test -L {path}", check=False).returncode != 0, f"{path} is left after purge"

"""packaging/build-binary and packaging/build-deb for real: the executable runs `contivd run`,
`contivd ctl …` and `--version` with the compiled fastpath inside; the .deb has the expected
files, conffiles, relations and maintainer scripts, and lintian reports no error and no warning."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
from pathlib import Path

import pytest

from contivd import __version__
from tests.support.waiting import free_ports, wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.packaging,
    pytest.mark.skipif(shutil.which("dpkg-deb") is None or not Path("/usr/bin/python3").exists(), reason="needs dpkg-deb and Debian's python3"),
]


def binary_env(tmp_path: Path) -> dict[str, str]:
    """Unpack into the test's directory, not /var/cache/contivd; no CONTIVD_* from the caller."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("CONTIVD_")}, "SHIV_ROOT": str(tmp_path / "shiv")}


def test_binary_runs_version_run_and_ctl(built: tuple[Path, Path], tmp_path: Path) -> None:
    binary, _ = built
    env = binary_env(tmp_path)
    version = subprocess.run([str(binary), "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and __version__ in version.stdout, version.stderr
    assert list((tmp_path / "shiv").glob("*/site-packages/fastpath/_native.abi3.so")), "the compiled fastpath is inside"
    native = subprocess.run([str(binary), "check-config", "--data-dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and str(tmp_path) in native.stdout
    api, raft = free_ports(2)
    args = [
        str(binary),
        "run",
        "--data-dir",
        str(tmp_path / "data"),
        "--api-listen",
        f"127.0.0.1:{api}",
        "--raft-listen",
        f"127.0.0.1:{raft}",
        "--datapath",
        "none",
        "--api-socket",
        str(tmp_path / "run" / "api.sock"),
    ]  # the executable, not the datapath, is under test (tests/agent runs that)
    log = open(tmp_path / "run.log", "wb")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        ctl = [str(binary), "ctl", "--server", f"unix:{tmp_path / 'run' / 'api.sock'}"]  # root on the node: admin without a token

        def net_ls() -> str | None:
            out = subprocess.run([*ctl, "net", "ls"], env=env, capture_output=True, text=True, timeout=30)
            return out.stdout if out.returncode == 0 else None

        wait_for(net_ls, 60, "contivd run (from dist/contivd) to answer contivd ctl")
        created = subprocess.run(
            [*ctl, "net", "create", "-s", "198.18.6.0/24", "-g", "198.18.6.254", "pkgnet"], env=env, capture_output=True, text=True, timeout=30
        )
        assert created.returncode == 0, created.stderr
        assert "pkgnet" in (net_ls() or "")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def deb_field(deb: Path, field: str) -> str:
    return subprocess.run(["dpkg-deb", "--field", str(deb), field], capture_output=True, text=True, check=True).stdout.strip()


def test_deb_contents_and_relations(built: tuple[Path, Path]) -> None:
    _, deb = built
    listing = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True).stdout
    packaged = ("./usr/bin/contivd", "./etc/contivd/contivd.toml", "./lib/systemd/system/contivd.service", "./usr/share/doc/contivd/copyright",
                "./usr/lib/cni/contiv", "./etc/cni/net.d/10-contiv.conflist")  # fmt: skip
    for path in packaged:
        assert path in listing, path
    assert "-rw-r----- root/root" in next(line for line in listing.splitlines() if line.endswith("./etc/contivd/contivd.toml"))
    assert "./opt/" not in listing, "no package may ship files in /opt (lintian dir-or-file-in-opt): postinst links the plugin"
    # A Depends, so that dpkg configures OVS before contivd's postinst starts the unit (issue 16 item 6).
    assert "openvswitch-switch" in deb_field(deb, "Depends") and "iproute2" in deb_field(deb, "Depends")
    control = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb)], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(control)) as tar:
        files = {m.name.lstrip("./"): tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert files["conffiles"].split() == ["/etc/contivd/contivd.toml", "/etc/cni/net.d/10-contiv.conflist"]
    assert "deb-systemd-helper enable 'contivd.service'" in files["postinst"]
    assert "ln -sfn /usr/lib/cni/contiv /opt/cni/bin/contiv" in files["postinst"]
    assert "rm -f /opt/cni/bin/contiv" in files["postrm"]
    assert "deb-systemd-invoke stop 'contivd.service'" in files["prerm"]
    before_purge, purge = files["postrm"].split('if [ "$1" = "purge" ]')
    assert "rm -rf /var/lib/contivd" in purge and "rm -rf /var/lib/contivd" not in before_purge  # remove keeps the state


def test_deb_cni_plugin_is_a_script_answering_version(built: tuple[Path, Path], tmp_path: Path) -> None:
    """/usr/lib/cni/contiv runs `python3 -IS` and imports its code from /usr/lib/contivd/cni-plugin."""
    _, deb = built
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    script = (tmp_path / "usr" / "lib" / "cni" / "contiv").read_text()
    assert script.startswith("#!/usr/bin/python3 -IS\n") and '"/usr/lib/contivd/cni-plugin"' in script
    libdir = tmp_path / "usr" / "lib" / "contivd" / "cni-plugin"
    assert sorted(p.name for p in (libdir / "cni").iterdir()) == ["__init__.py", "plugin.py", "protocol.py"]
    extracted = script.replace("/usr/lib/contivd/cni-plugin", str(libdir))
    done = subprocess.run(
        ["/usr/bin/python3", "-I", "-S", "-c", extracted], env={"CNI_COMMAND": "VERSION"}, input=b'{"cniVersion": "1.0.0"}', capture_output=True
    )
    assert done.returncode == 0 and json.loads(done.stdout) == {"cniVersion": "1.0.0", "supportedVersions": ["1.0.0", "1.1.0"]}, done.stderr


@pytest.mark.skipif(shutil.which("lintian") is None, reason="needs lintian (packaging/deps.sh installs it)")
def test_lintian_reports_no_error_and_no_warning(built: tuple[Path, Path]) -> None:
    """Overrides only where policy allows them, each with its reason (packaging/debian/lintian-overrides)."""
    _, deb = built
    done = subprocess.run(["lintian", "--fail-on", "error,warning", str(deb)], capture_output=True, text=True, timeout=600)
    tags = [line for line in done.stdout.splitlines() if line[:2] in ("E:", "W:")]
    assert done.returncode == 0 and not tags, done.stdout + done.stderr

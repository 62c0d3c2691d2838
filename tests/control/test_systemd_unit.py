"""The unit file: `systemd-analyze verify` accepts it and `systemd-analyze security` scores it
5.0 or better (lower is better: the exposure level)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "contivd.service"
pytestmark = [pytest.mark.systemd, pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")]


def installed_copy(tmp_path: Path) -> Path:
    """The unit as the pip fallback installs it: verify checks that ExecStart's program exists,
    and /usr/bin/contivd exists only where the .deb is installed."""
    text = UNIT.read_text()
    assert "ExecStart=/usr/bin/contivd run --config /etc/contivd/contivd.toml\n" in text
    unit = tmp_path / "contivd.service"
    unit.write_text(text.replace("ExecStart=/usr/bin/contivd run", f"ExecStart={sys.executable} -m contivd run"))
    return unit


def test_systemd_analyze_verify_passes(tmp_path: Path) -> None:
    result = subprocess.run(["systemd-analyze", "verify", str(installed_copy(tmp_path))], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "contivd.service" not in result.stderr, result.stderr  # warnings about our unit


def exposure(output: str) -> float:
    found = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", output)
    assert found, output[-2000:]
    return float(found.group(1))


def test_exposure_parser() -> None:
    assert exposure("✓ UMask= ...\n→ Overall exposure level for contivd.service: 3.8 OK 🙂\n") == 3.8


def test_systemd_analyze_security_scores_5_or_better() -> None:
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", str(UNIT)], capture_output=True, text=True, timeout=60)
    score = exposure(result.stdout)
    assert score <= 5.0, result.stdout[-3000:]


def test_unit_declares_the_operational_contract() -> None:
    text = UNIT.read_text()
    for line in ("Type=notify", "Restart=on-failure", "RuntimeDirectory=contiv contivd", "RuntimeDirectoryMode=0700", "StateDirectory=contivd",
                 "ConfigurationDirectory=contivd", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes"):  # fmt: skip
        assert f"\n{line}\n" in text, line
    assert re.search(r"\nWatchdogSec=\d+", text) and re.search(r"\nLimitNOFILE=\d+", text)
    assert "After=network-online.target openvswitch-switch.service" in text

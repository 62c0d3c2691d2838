"""raftstore's PySyncObj patches: one module, one pinned release, a loud failure when an internal moves."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from pysyncobj import FAIL_REASON, SyncObj
from pysyncobj import version as pysyncobj_version
from pysyncobj.journal import ResizableFile

from raftstore import _pysyncobj_compat as compat

ROOT = Path(__file__).resolve().parents[2]
PRIVATE_NAMES = re.compile(
    r"_SyncObj__|_FileJournal__|_ResizableFile__|_isLeader|_getLeader|_checkCommandsToApply|_deserialize|_connections|tcp_connection|win_inet_pton"
)


def test_the_installed_pysyncobj_is_the_pinned_one() -> None:
    compat.check()
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d.split(";")[0].strip() for d in dependencies if d.startswith("pysyncobj")]
    assert pins == [f"pysyncobj=={compat.PINNED_VERSION}"]
    assert version("pysyncobj") == compat.PINNED_VERSION


def test_another_release_is_refused_naming_both_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pysyncobj_version, "VERSION", "0.3.18")
    with pytest.raises(compat.IncompatiblePySyncObjError, match=r"installed pysyncobj is 0\.3\.18, not 0\.3\.17.*pysyncobj==0\.3\.17"):
        compat.check()


@pytest.mark.parametrize("owner, name", [(owner, name) for owner, names in compat.PATCHED_METHODS.items() for name in names])
def test_a_missing_patched_method_is_named(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> None:
    monkeypatch.delattr(owner, name)
    with pytest.raises(compat.IncompatiblePySyncObjError, match=rf"{owner.__name__}\.{re.escape(name)} is missing.*pysyncobj==0\.3\.17"):
        compat.check()


def test_an_instance_attribute_no_longer_set_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real_init = ResizableFile.__init__

    def renamed_init(self: ResizableFile, *args: object, **kwargs: object) -> None:  # sets __f and __mm under other names
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(ResizableFile, "__init__", renamed_init)
    with pytest.raises(compat.IncompatiblePySyncObjError, match=r"ResizableFile\.__init__ no longer sets _ResizableFile__f.*pysyncobj==0\.3\.17"):
        compat.check()


def test_a_changed_outcome_code_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store reads PySyncObj's callback codes as the Consensus codes (_consensus.py)."""
    monkeypatch.setattr(FAIL_REASON, "REQUEST_DENIED", 8)
    with pytest.raises(compat.IncompatiblePySyncObjError, match=r"FAIL_REASON codes differ.*pysyncobj==0\.3\.17"):
        compat.check()


def test_a_private_read_at_run_time_names_what_is_missing() -> None:
    class NotASyncObj:
        pass

    with pytest.raises(compat.IncompatiblePySyncObjError, match=r"NotASyncObj has no _SyncObj__raftLog"):
        compat.journal(NotASyncObj())
    assert "_SyncObj__raftLog" in compat.INSTANCE_ATTRIBUTES[SyncObj]


def test_only_the_compat_module_names_pysyncobj_internals() -> None:
    offenders = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted((ROOT / "raftstore").glob("*.py"))
        if path.name not in ("_pysyncobj_compat.py", "_inet_shim.py")  # the shim names PySyncObj's module, before any PySyncObj loads
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE_NAMES.search(line)
    ]
    assert offenders == []


def test_socket_inet_ntop_stays_the_c_implementation() -> None:
    """Importing raftstore (and so PySyncObj's TCP code) leaves the process's socket module alone,
    also when PySyncObj was imported first."""
    probe = (
        "import _socket, socket, sys\n"
        "{first}\n"
        "import raftstore\n"
        "from pysyncobj import SyncObj\n"
        "assert socket.inet_ntop is _socket.inet_ntop, socket.inet_ntop\n"
        "print(socket.inet_ntop(socket.AF_INET, bytes([198, 18, 0, 1])))\n"
    )
    for first in ("", "import pysyncobj"):
        result = subprocess.run([sys.executable, "-c", probe.format(first=first)], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "198.18.0.1"

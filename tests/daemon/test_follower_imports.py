"""A follower of the store with `--datapath none` imports nothing only a voter, the leader or the
OVS datapath needs (tests/support/footprint.py's lists; benchmarks/rss_imports.py measures what
each costs). Each check runs in a fresh interpreter: this one has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.footprint import FOLLOWER_MODULES, FOLLOWER_MUST_NOT_LOAD, loaded

ROOT = Path(__file__).resolve().parents[2]


def modules_after(code: str) -> set[str]:
    """sys.modules of a fresh interpreter (this tree first on its path) after running `code`."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_follower_composition_loads_no_voter_leader_or_datapath_module() -> None:
    imports = "\n".join(f"import {name}" for name in FOLLOWER_MODULES)
    modules = modules_after(f"{imports}\nfrom raftstore import FollowerConfig, FollowerStore, open_follower")
    assert set(FOLLOWER_MODULES) <= modules
    assert loaded(modules) == [], "a follower must not load these (import them where they are used, or under TYPE_CHECKING)"


def test_the_check_sees_a_heavy_module_when_one_is_loaded() -> None:
    """The other test's empty answer means something: the same check names what the voter's
    and the OVS datapath's parts of the composition root pull in."""
    found = loaded(modules_after("import contivd.voter, contivd.datapath"))
    assert {"pysyncobj.syncobj", "os_ken", "ovsdbapp", "pyroute2", "contivd.agent", "contivd.k8s.syncer"} <= set(found)
    assert set(found) <= set(FOLLOWER_MUST_NOT_LOAD)


def test_names_loaded_on_first_use_resolve_to_their_modules() -> None:
    """openflow, contivd.k8s and contivd.bgp defer what needs os-ken, the watch and the speaker
    (PEP 562 __getattr__): `from package import Name` still gives the real object, once
    loaded it is a plain attribute, and an unknown name is an AttributeError."""
    code = (
        "import openflow, contivd.k8s, contivd.bgp\n"
        "assert 'os_ken' not in sys.modules and 'contivd.k8s.syncer' not in sys.modules and 'contivd.bgp.speaker' not in sys.modules\n"
        "from openflow import SwitchConnection, encode_flows, flow_records\n"
        "from openflow.switch import SwitchConnection as direct\n"
        "assert SwitchConnection is direct and 'SwitchConnection' in vars(openflow)\n"
        "from contivd.k8s import KubernetesWatch, KubeApi\n"
        "from contivd.k8s.syncer import KubernetesWatch as watch\n"
        "assert KubernetesWatch is watch\n"
        "from contivd.bgp import BgpSpeaker\n"
        "from contivd.bgp.speaker import BgpSpeaker as speaker\n"
        "assert BgpSpeaker is speaker\n"
        "for package in (openflow, contivd.k8s, contivd.bgp):\n"
        "    try:\n"
        "        package.NoSuchName\n"
        "    except AttributeError as exc:\n"
        "        assert 'NoSuchName' in str(exc)\n"
        "    else:\n"
        "        raise AssertionError(package)\n"
    )
    assert {"os_ken", "contivd.k8s.syncer", "contivd.bgp.speaker"} <= modules_after(code)

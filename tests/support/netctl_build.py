"""The original Go netctl, built from Contiv's public source in the test set-up.

The comparison test needs the real client, not a re-creation: it is built here with Debian's
Go in GOPATH mode from contiv/netplugin's own vendor tree, exactly as Contiv built it. The
source comes from, in order: CONTIVD_NETCTL (a ready binary), CONTIVD_NETCTL_SRC (a checkout
or a bare git directory of contiv/netplugin), or a shallow clone from GitHub. Whatever step is
impossible on a machine (no Go, no source) becomes the reason the test is skipped, so CI on a
closed network stays green and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

UPSTREAM = "https://github.com/contiv/netplugin"
IMPORT_PATH = "github.com/contiv/netplugin"


class NetctlUnavailable(Exception):
    """Why no netctl can be had on this machine (the skip reason)."""


def netctl_binary(work: Path) -> Path:
    """A netctl binary: the one CONTIVD_NETCTL names, or one built under `work` from source."""
    given = os.environ.get("CONTIVD_NETCTL")
    if given:
        if not os.access(given, os.X_OK):
            raise NetctlUnavailable(f"CONTIVD_NETCTL={given} is not an executable file")
        return Path(given)
    go = shutil.which("go")
    if go is None:
        raise NetctlUnavailable("Go is not installed (apt install golang-go) to build netctl from contiv/netplugin's source")
    tree = work / "gopath" / "src" / IMPORT_PATH
    if not (tree / "netctl").is_dir():
        _obtain_source(tree)
    binary = work / "netctl"
    env = {**os.environ, "GOPATH": str(work / "gopath"), "GO111MODULE": "off", "GOCACHE": str(work / "gocache"), "CGO_ENABLED": "0"}
    built = subprocess.run([go, "build", "-o", str(binary), "./netctl/netctl"], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        raise NetctlUnavailable(f"go build ./netctl/netctl failed in {tree}: {built.stderr[-1500:]}")
    return binary


def _obtain_source(tree: Path) -> None:
    """contiv/netplugin's source into `tree`: from CONTIVD_NETCTL_SRC, else a shallow clone."""
    tree.parent.mkdir(parents=True, exist_ok=True)
    source = os.environ.get("CONTIVD_NETCTL_SRC")
    if source:
        origin = Path(source)
        if (origin / "netctl").is_dir():
            shutil.copytree(origin, tree, symlinks=True)
            return
        if (origin / "HEAD").is_file() and (origin / "objects").is_dir():
            tree.mkdir()
            archive = subprocess.run(
                ["git", "--git-dir", str(origin), "archive", "HEAD", "--", ".", *(f":(exclude){p}" for p in _absent_files(origin))],
                capture_output=True, timeout=300,
            )  # fmt: skip
            if archive.returncode != 0:
                raise NetctlUnavailable(f"git archive of CONTIVD_NETCTL_SRC={source} failed: {archive.stderr.decode()[-500:]}")
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=300)
            return
        raise NetctlUnavailable(f"CONTIVD_NETCTL_SRC={source} is neither a contiv/netplugin checkout nor its git directory")
    try:
        cloned = subprocess.run(
            ["git", "clone", "-q", "--depth", "1", UPSTREAM, str(tree)],
            capture_output=True, text=True, timeout=120, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        shutil.rmtree(tree, ignore_errors=True)
        raise NetctlUnavailable(f"cloning {UPSTREAM} timed out (set CONTIVD_NETCTL_SRC to a local copy)") from None
    if cloned.returncode != 0:
        shutil.rmtree(tree, ignore_errors=True)
        raise NetctlUnavailable(
            f"contiv/netplugin's source cannot be obtained here ({cloned.stderr.strip()[-300:]}); set CONTIVD_NETCTL_SRC to a local copy"
        )


def _absent_files(git_dir: Path) -> list[str]:
    """Files of HEAD whose contents a partial snapshot left out (large binaries such as
    scripts/gobgp): the build needs none of them, and git archive refuses a tree with any."""
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", "HEAD"], capture_output=True, check=True, timeout=120)
    entries = [line.split(b"\t", 1) for line in listing.stdout.split(b"\0") if line]
    blobs = [(meta.split()[2], path.decode()) for meta, path in entries if meta.split()[1] == b"blob"]
    checked = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-check"],
        input=b"".join(sha + b"\n" for sha, _ in blobs), capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    return [path for (_, path), answer in zip(blobs, checked.stdout.splitlines(), strict=True) if answer.endswith(b" missing")]

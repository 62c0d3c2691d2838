"""The original Go netctl and netmaster, built from Contiv's public source.

The comparison test needs the real client, not a re-creation, and benchmarks/api_bench.py the
real server beside contivd: both are built here with Debian's Go in GOPATH mode from
contiv/netplugin's own vendor tree, exactly as Contiv built them. The source comes from, in
order: CONTIVD_NETCTL (a ready netctl binary), CONTIVD_NETCTL_SRC (a checkout or a bare git
directory of contiv/netplugin), or a shallow clone from GitHub. Whatever step is impossible on
a machine (no Go, no source) becomes the reason the test is skipped, so CI on a closed network
stays green and says why.

netmaster's ofnet master serves its RPC on every interface at a port fixed at compile time
(ofnet's `OFNET_MASTER_PORT = 9001`, `net.Listen("tcp", ":9001")`). The build rewrites both in its
copy of the vendor tree (OFNET_EDITS): the port becomes OFNET_MASTER_PORT below, under the
kernel's ephemeral range so that no loopback port another test or benchmark takes from the
kernel collides with it, and the listener binds loopback only. Nothing is patched in the
source itself, only in the copy that is built; netctl uses neither.

    python3 -m tests.support.netctl_build netmaster OUT   # writes the binary OUT
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

UPSTREAM = "https://github.com/contiv/netplugin"
IMPORT_PATH = "github.com/contiv/netplugin"
PACKAGES = {"netctl": "./netctl/netctl", "netmaster": "./netmaster"}  # what `go build` builds for each binary
OFNET_MASTER_PORT = 29001  # ofnet's RPC port in the netmaster built here (Contiv's 9001)
OFNET_EDITS = (  # (file, Contiv's line, the built copy's line)
    ("vendor/github.com/contiv/ofnet/ofnet.go", "const OFNET_MASTER_PORT = 9001\n", f"const OFNET_MASTER_PORT = {OFNET_MASTER_PORT}\n"),
    (
        "vendor/github.com/contiv/ofnet/rpcHub/rpcHub.go",
        'net.Listen("tcp", fmt.Sprintf(":%d", portNo))',
        'net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", portNo))',
    ),
)


class ContivBuildUnavailable(Exception):
    """Why a Contiv binary cannot be had on this machine (the skip reason)."""


def netctl_binary(work: Path) -> Path:
    """A netctl binary: the one CONTIVD_NETCTL names, or one built under `work` from source."""
    given = os.environ.get("CONTIVD_NETCTL")
    if given:
        if not os.access(given, os.X_OK):
            raise ContivBuildUnavailable(f"CONTIVD_NETCTL={given} is not an executable file")
        return Path(given)
    return contiv_binary("netctl", work)


def contiv_binary(name: str, work: Path) -> Path:
    """`name` (a key of PACKAGES) built under `work` from contiv/netplugin's source: `work/name`."""
    go = shutil.which("go")
    if go is None:
        raise ContivBuildUnavailable(f"Go is not installed (apt install golang-go) to build {name} from contiv/netplugin's source")
    tree = work / "gopath" / "src" / IMPORT_PATH
    if not (tree / "netctl").is_dir():
        _obtain_source(tree)
    _confine_ofnet_rpc(tree)
    binary = work / name
    env = {**os.environ, "GOPATH": str(work / "gopath"), "GO111MODULE": "off", "GOCACHE": str(work / "gocache"), "CGO_ENABLED": "0"}
    built = subprocess.run([go, "build", "-o", str(binary), PACKAGES[name]], cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    if built.returncode != 0:
        raise ContivBuildUnavailable(f"go build {PACKAGES[name]} failed in {tree}: {built.stderr[-1500:]}")
    return binary


def _confine_ofnet_rpc(tree: Path) -> None:
    """Apply OFNET_EDITS to the copy `tree` (again: a no-op)."""
    for name, contiv, built in OFNET_EDITS:
        path = tree / name
        text = path.read_text().replace(contiv, built)
        if built not in text:
            raise ContivBuildUnavailable(f"{path} has no `{contiv.strip()}`: another ofnet than Contiv's last release")
        path.write_text(text)


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
                raise ContivBuildUnavailable(f"git archive of CONTIVD_NETCTL_SRC={source} failed: {archive.stderr.decode()[-500:]}")
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=300)
            return
        raise ContivBuildUnavailable(f"CONTIVD_NETCTL_SRC={source} is neither a contiv/netplugin checkout nor its git directory")
    try:
        cloned = subprocess.run(
            ["git", "clone", "-q", "--depth", "1", UPSTREAM, str(tree)],
            capture_output=True, text=True, timeout=120, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        shutil.rmtree(tree, ignore_errors=True)
        raise ContivBuildUnavailable(f"cloning {UPSTREAM} timed out (set CONTIVD_NETCTL_SRC to a local copy)") from None
    if cloned.returncode != 0:
        shutil.rmtree(tree, ignore_errors=True)
        raise ContivBuildUnavailable(
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


def main() -> None:
    """`python3 -m tests.support.netctl_build NAME OUT`: build NAME (netctl or netmaster) to OUT."""
    if len(sys.argv) != 3 or sys.argv[1] not in PACKAGES:
        sys.exit(f"usage: python3 -m tests.support.netctl_build {{{','.join(PACKAGES)}}} OUT")
    out = Path(sys.argv[2]).resolve()
    with tempfile.TemporaryDirectory(prefix="contiv-build-") as work:
        try:
            built = contiv_binary(sys.argv[1], Path(work))
        except ContivBuildUnavailable as why:
            sys.exit(str(why))
        shutil.move(built, out)
    print(out)


if __name__ == "__main__":
    main()

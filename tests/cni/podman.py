"""Debian's podman, with its CNI backend, as a test node's container runtime.

Each node gets a podman of its own: private storage (--root/--runroot, vfs), its own
containers.conf (CONTAINERS_CONF) naming the CNI backend, a network config directory holding a
conflist whose one plugin is `contiv` (the packaged plugin, cni_harness.plugin_executable) talking
to that node's CNI socket, and that plugin's directory. Containers run from a busybox-static
root filesystem built once per test process (`--rootfs`): no image, no registry.

What podman needs on these machines, and why:
* it runs in the node's network namespace (`nsenter --net`, not `ip netns exec`: that one
  makes every mount a slave, and the network namespace podman bind-mounts under /run/netns
  would then be invisible to contivd, which opens it by path);
* in a mount namespace of its own (`unshare -m`, propagation unchanged: /run/netns stays shared)
  where the cgroup v2 hierarchy of a hybrid host is unmounted: crun refuses to start a container
  on a hybrid host whose v2 hierarchy has controllers ("cgroups in hybrid mode not supported");
* `cgroups = "disabled"` (no cgroup is made for the container) and ulimits within the
  host's hard limits (podman's default RLIMIT_NOFILE/NPROC exceed them: crun's setrlimit fails);
* `events_logger = "file"` (no journald here).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.cni_harness import netconf, plugin_executable
from tests.support.nodes import Node

NETWORK = "contiv"  # the conflist's name: what `podman run --network` names
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "sleep", "ping", "ip", "cat")
# Run inside the private mount namespace before podman: hide a hybrid host's cgroup v2 tree from crun.
HIDE_CGROUP2 = (
    'if mountpoint -q /sys/fs/cgroup/unified && [ -n "$(cat /sys/fs/cgroup/unified/cgroup.controllers)" ]; then umount /sys/fs/cgroup/unified; fi; '
    'exec podman "$@"'
)


def available() -> bool:
    return shutil.which("podman") is not None and BUSYBOX.is_file() and shutil.which("nsenter") is not None


@functools.cache
def rootfs() -> Path:
    """A busybox-static root filesystem, built once per process, removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="contiv-rootfs-"))
    atexit.register(shutil.rmtree, root, True)
    for directory in ("bin", "etc", "proc", "sys", "dev", "tmp", "run"):
        (root / directory).mkdir()
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    return root


class Podman:
    """The podman of one node; `network` is the Contiv network its conflist attaches containers to."""

    def __init__(self, node: Node, network: str):
        self.node = node
        self.home = node.data / "podman"
        self.runroot = Path(tempfile.mkdtemp(prefix="cvpm-"))  # podman refuses a runroot path over 50 characters
        config_dir, self.conf = self.home / "net.d", self.home / "containers.conf"
        for directory in ("root", "tmp", "static", "volumes", "net.d"):
            (self.home / directory).mkdir(parents=True, exist_ok=True)
        plugin = netconf(node, network=network)
        plugin.pop("cniVersion"), plugin.pop("name")
        conflist = {"cniVersion": "1.0.0", "name": NETWORK, "plugins": [plugin]}
        (config_dir / f"{NETWORK}.conflist").write_text(json.dumps(conflist, indent=2))
        self.conf.write_text(
            "[containers]\n"
            'cgroups = "disabled"\n'
            'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
            "[engine]\n"
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
            f'events_logfile_path = "{self.home / "events.log"}"\n'
            f'tmp_dir = "{self.home / "tmp"}"\n'
            f'static_dir = "{self.home / "static"}"\n'
            f'volume_path = "{self.home / "volumes"}"\n'
            "[network]\n"
            'network_backend = "cni"\n'
            f'network_config_dir = "{config_dir}"\n'
            f'cni_plugin_dirs = ["{plugin_executable().parent}"]\n'
        )

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`podman ARGS` as this node's runtime (no check: callers look at the outcome)."""
        storage = ("--root", str(self.home / "root"), "--runroot", str(self.runroot), "--storage-driver", "vfs")
        command = ["nsenter", f"--net=/var/run/netns/{self.node.ns}", "unshare", "-m", "--propagation", "unchanged"]
        command += ["sh", "-c", HIDE_CGROUP2, "podman", *storage, *args]
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "CONTAINERS_CONF": str(self.conf), "HOME": str(self.home)}
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)

    def start(self, name: str) -> subprocess.CompletedProcess[str]:
        """A container that sleeps, attached to the Contiv network. podman does not retry a CNI
        "try again later" (code 11: the cluster is electing a leader); a runtime that honours it
        would, so this does: up to 5 times, 1 s apart, removing the half-made container first."""
        for _ in range(5):
            started = self("run", "-d", "--name", name, "--network", NETWORK, "--rootfs", str(rootfs()), "/bin/sleep", "3600")
            if started.returncode == 0 or "cannot take the request now" not in started.stderr:
                return started
            self("rm", "--force", "--time", "0", name)
            time.sleep(1)  # the backoff CNI's code 11 asks for, not a synchronisation
        return started

    def address(self, name: str) -> str:
        """The container's IPv4 address on eth0, as its own `ip` shows it."""
        shown = self("exec", name, "ip", "-4", "-o", "addr", "show", "eth0")
        assert shown.returncode == 0, shown.stderr
        return shown.stdout.split()[3].split("/")[0]

    def pings(self, name: str, address: str) -> bool:
        return self("exec", name, "ping", "-c", "1", "-W", "1", address).returncode == 0

    def container_id(self, name: str) -> str:
        shown = self("inspect", "--format", "{{.Id}}", name)
        assert shown.returncode == 0, shown.stderr
        return shown.stdout.strip()

    def close(self) -> None:
        """Clean-up: every container of this podman killed and removed (their namespaces with
        them), then its run directory."""
        self("rm", "--all", "--force", "--time", "0")
        shutil.rmtree(self.runroot, ignore_errors=True)

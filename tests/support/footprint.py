"""What a node of each role imports, and what a follower must not: one list for the import
test (tests/daemon/test_follower_imports.py) and the RSS benchmark (benchmarks/rss_imports.py).

A follower of the store with `--datapath none` runs the API (status page, /readyz, /metrics,
writes forwarded to the leader), the typed state cache and node registration over
`raftstore.open_follower`. It never leads, never programs OVS and never watches Kubernetes, so
nothing those need may load with it: each costs megabytes per node (docs/performance.md,
"Memory per node").
"""

from __future__ import annotations

# Everything `contivd run` needs at import time for a `--datapath none` follower, in the order
# the benchmark imports them (each line's RSS growth is attributed to the first that pulls it).
FOLLOWER_MODULES: tuple[str, ...] = (
    "trio",
    "hypercorn.trio",
    "quart_trio",
    "cryptography.hazmat.primitives.ciphers.aead",
    "prometheus_client",
    "raftstore",  # + raftstore.open_follower: the follower path
    "contivd.state",
    "contivd.nodes",
    "contivd.http.auth",
    "contivd.http.control",
    "contivd.http.forwarder",
    "contivd.http.hardening",
    "contivd.http.local_socket",
    "contivd.http.tokens",
    "contivd.tls.material",
    "contivd.tls.serving",
    "contivd.metrics",
    "contivd.api.app",
    "contivd.status.routes",
    "contivd.sdnotify",
    "contivd.config",
    "contivd.logs",
    "contivd.cli",  # the `contivd` executable; `run` then imports these and contivd.main
    "contivd.main",  # the composition root: the voter's and the datapath's parts load in contivd.voter / contivd.datapath
    "contivd.roles",
    "contivd.ovs.errors",
    "contivd.tls.pki",
)

# What only a voter, the leader or the OVS datapath needs (PySyncObj, the Kubernetes watch, the
# node agent and its OpenFlow/OVSDB/netlink libraries, the CNI server, BGP): none of it, nor any submodule, may be in sys.modules of a follower.
FOLLOWER_MUST_NOT_LOAD: tuple[str, ...] = (
    "pysyncobj.syncobj",  # the engine; raftstore._inet_shim registers an empty stand-in for pysyncobj.win_inet_pton
    "os_ken",
    "ovsdbapp",
    "ovs",
    "eventlet",
    "pyroute2",
    "lightkube",
    "kubernetes",
    "exabgp",
    "openflow._ofp",
    "openflow.switch",
    "openflow.encode",
    "raftstore._store",
    "raftstore._node",
    "contivd.agent",
    "contivd.bgp.speaker",
    "contivd.cni_server",
    "contivd.ovs.bridge",
    "contivd.k8s.client",
    "contivd.k8s.syncer",
    "contivd.k8s.reflector",
    "contivd.migrate.client",
    "contivd.migrate.verify",
    "httpx",  # contivd's clients (ctl, import-contiv) only; it loads rich and pygments (~4 MB)
)

# What a voter with the OVS datapath adds on top (the benchmark's second half, in order).
VOTER_MODULES: tuple[str, ...] = (
    "pysyncobj",
    "raftstore._store",
    "openflow.switch",
    "ovsdbapp.backend.ovs_idl",
    "pyroute2",
    "contivd.netmaster.service",
    "contivd.k8s",
    "contivd.agent.service",
    "contivd.cni_server",
    "contivd.bgp.speaker",
    "contivd.migrate",
    "contivd.backup.route",
    "contivd.main",
)


def loaded(modules: set[str] | frozenset[str], banned: tuple[str, ...] = FOLLOWER_MUST_NOT_LOAD) -> list[str]:
    """The entries of `banned` that `modules` (sys.modules' names) holds, or holds a submodule of."""
    return [b for b in banned if any(m == b or m.startswith(b + ".") for m in modules)]

"""The test suite, laid out like the code: a test lives in the folder of the package it tests.

- contivd/<area>/ → tests/<area>/ (agent, api, backup, bgp, ctl, http, k8s, migrate, model, netmaster, ovs, state,
  status, tls); contivd's top-level modules (config, cli, main, memory, node_secret, configdoc…) → tests/daemon.
- raftstore/, openflow/, fastpath/ → tests/raftstore, tests/openflow, tests/fastpath; cni/ and contivd/cni_server/
  (the plugin and the node's server, one protocol) → tests/cni.
- Pure-function tests sit beside the real-component ones of their area; on a name clash the pure one ends in `_unit`.
- Suites that cross areas keep their own folder: control (the multi-node control plane through the API), faults
  (partitions under load), k8s_real (the real kube-apiserver), packaging (the binary, the .deb, nspawn).
- Harnesses used by more than one folder or by benchmarks/ live in tests/support; a folder's own helpers stay in it.
"""

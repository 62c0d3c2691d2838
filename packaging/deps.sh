#!/usr/bin/env bash
# Debian packages contivd, its tests and benchmarks need (containernetworking-plugins: the
# reference bridge + host-local CNI plugins that benchmarks/cni_bench.py compares contiv with;
# podman and busybox-static: tests/cni/test_podman.py runs containers from a busybox rootfs through
# podman's CNI backend; golang-go and git: tests/ctl/test_netctl_compat.py builds the original netctl
# from contiv/netplugin's source; frr: tests/bgp runs its bgpd as the nodes' top-of-rack router;
# debootstrap and systemd-container: tests/packaging/test_systemd_nspawn.py boots the .deb under a
# real systemd in a container; etcd-server, openssl and xz-utils: ../shared/kube-apiserver's k8s-up, which
# tests/k8s_real and benchmarks/k8s_bench.py --real run, needs them).
# Idempotent; skips apt when all are present.
set -euo pipefail
packages=(openvswitch-switch iproute2 iputils-ping iptables ethtool etcd-server gcc libc6-dev python3-dev chromium systemd lintian containernetworking-plugins podman busybox-static golang-go git frr debootstrap systemd-container openssl xz-utils)
if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

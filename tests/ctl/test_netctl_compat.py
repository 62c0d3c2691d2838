"""The original Go netctl against a contivd node, and `contivd ctl` with the same arguments.

Every netctl command and flag (netctl/commands.go in contiv/netplugin) is run by both
clients against one real node (`--datapath none`), and their stdout and exit status must
agree line for line, JSON too: its members in netctl's order, the Go structs' declaration
order (docs/operations.md "netctl compatibility"). The steps of
a chapter run first with netctl, then with `contivd ctl`: each chapter removes what it
created, so both start from the same store (checked).

The netctl binary is built in the set-up from contiv/netplugin's source with Debian's Go
(tests/support/netctl_build.py: CONTIVD_NETCTL names a ready binary, CONTIVD_NETCTL_SRC a
local copy of the source, else it is cloned); where Go or the source cannot be had, the module
is skipped with that reason.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from click.testing import CliRunner

from contivd.cli import cli
from tests.support.contivd_nodes import ContivdProcess
from tests.support.ctl_runner import NO_CTL_ENV
from tests.support.netctl_build import ContivBuildUnavailable, netctl_binary
from tests.support.tcp_relay import Relay

pytestmark = pytest.mark.netctl

INTENDED = {
    "announce": "netctl prints 'Deleting …' before sending; contivd ctl prints only once the server accepted the change",
    "client-version": "`version`: the client block is contivd's own version (netctl's is whatever it was built with)",
    "bgp-quiet": "netctl's `bgp ls -q` tests a misspelt flag ('quite') and prints the table; contivd ctl prints the names",
}
"""The documented differences (docs/operations.md, "netctl compatibility"): a step naming one
compares the exit status only."""


@dataclass(frozen=True)
class Step:
    args: tuple[str, ...]
    output: Literal["text", "json"] = "text"
    differs: str | None = None  # a key of INTENDED


def text(*args: str, differs: str | None = None) -> Step:
    return Step(args, "text", differs)


def js(*args: str) -> Step:
    return Step(args, "json")


def usage(*args: str) -> Step:
    """A command netctl refuses before sending anything (exit 1): its help on stdout, if any,
    must be the same (contivd/ctl/netctl_usage.py)."""
    return Step(args, "text")


CHAPTERS: dict[str, tuple[Step, ...]] = {
    "tenant": (
        text("tenant", "ls"), text("tenant", "ls", "-q"), js("tenant", "ls", "--json"),
        text("tenant", "create", "cmp-t1"), text("tenant", "create", "cmp-t1"), text("tenant", "list"), text("tenant", "ls", "--quiet"), js("tenant", "ls", "-j"),
        js("tenant", "inspect", "cmp-t1"), text("tenant", "inspect", "cmp-nosuch"),
        usage("tenant", "create"), usage("tenant", "create", "a", "b"), usage("tenant", "ls", "extra"), usage("tenant", "inspect"),
        text("tenant", "create", "bad_name"), text("tenant", "rm", "cmp-nosuch", differs="announce"),
        text("tenant", "rm", "cmp-t1"), text("tenant", "create", "cmp-t2"), text("tenant", "delete", "cmp-t2"),
    ),
    "network": (
        text("tenant", "create", "cmp-nt"),
        text("network", "create", "-s", "198.18.91.0/24", "-g", "198.18.91.1", "cmp-n1"),
        text("net", "create", "--subnet", "198.18.92.0/24", "--gateway", "198.18.92.254", "--encap", "vlan", "--pkt-tag", "291",
             "--nw-type", "data", "--nw-tag", "blue", "-t", "cmp-nt", "cmp-n2"),
        text("network", "create", "-t", "cmp-nt", "-e", "vxlan", "-p", "9001", "-n", "data", "-s", "198.18.93.0/24",
             "--subnetv6", "2001:db8:93::/64", "--gatewayv6", "2001:db8:93::1", "--tag", "green", "cmp-n3"),
        text("network", "create", "-t", "cmp-nt", "-s", "198.18.94.10-198.18.94.20/24", "--s6", "2001:db8:94::/100", "--g6",
             "2001:db8:94::1", "cmp-n4"),
        text("network", "ls"), text("network", "ls", "-t", "cmp-nt"), text("net", "list", "-a"),
        text("network", "ls", "-q", "-t", "cmp-nt"), text("network", "ls", "--all", "--quiet"),
        js("network", "ls", "-j", "-t", "cmp-nt"), js("network", "ls", "--json", "--all"),
        text("network", "ls", "-t", "cmp-nosuch"),
        js("network", "inspect", "cmp-n1"), js("net", "inspect", "-t", "cmp-nt", "cmp-n3"), js("network", "inspect", "--tenant", "cmp-nt", "cmp-n4"),
        text("network", "inspect", "cmp-nosuch"),
        usage("network", "create", "cmp-x"), usage("network", "create", "-s", "198.18.95.0/24", "-g", "bogus", "cmp-x"),
        usage("network", "create", "-s", "198.18.95.0/24", "--g6", "bogus", "cmp-x"), usage("network", "create", "-s", "198.18.95.0/24"),
        usage("network", "ls", "extra"), usage("network", "inspect"), usage("network", "rm"),
        text("network", "create", "-s", "198.18.91.0/25", "cmp-overlap"),
        text("network", "create", "-s", "not-a-subnet", "cmp-bad"),
        text("network", "create", "-e", "vlan", "-p", "291", "-s", "198.18.96.0/24", "-t", "cmp-nt", "cmp-dup-tag"),
        text("tenant", "rm", "cmp-nt", differs="announce"),
        text("network", "rm", "cmp-nosuch", differs="announce"),
        text("network", "rm", "cmp-n1"), text("net", "delete", "-t", "cmp-nt", "cmp-n2"), text("network", "rm", "--tenant", "cmp-nt", "cmp-n3"),
        text("network", "rm", "-t", "cmp-nt", "cmp-n4"), text("tenant", "rm", "cmp-nt"),
    ),
    "policy": (
        text("tenant", "create", "cmp-pt"),
        text("network", "create", "-t", "cmp-pt", "-s", "198.18.97.0/24", "cmp-pn"),
        text("policy", "create", "cmp-p1"), text("policy", "create", "-t", "cmp-pt", "cmp-p2"),
        text("group", "create", "-t", "cmp-pt", "cmp-pn", "cmp-src"),
        text("policy", "ls"), text("policy", "list", "-t", "cmp-pt"), text("policy", "ls", "-a"), text("policy", "ls", "-q"),
        js("policy", "ls", "-j", "--all"), text("policy", "ls", "-t", "cmp-nosuch"),
        js("policy", "inspect", "cmp-p1"), text("policy", "inspect", "cmp-nosuch"),
        text("policy", "rule-add", "cmp-p1", "1"),
        text("policy", "rule-add", "-p", "10", "-d", "in", "-l", "tcp", "-P", "80", "-j", "deny", "-i", "198.19.16.0/20", "cmp-p1", "2"),
        text("policy", "rule-add", "--priority", "5", "--direction", "out", "--protocol", "udp", "--port", "53",
             "--to-ip-address", "198.19.32.0/20", "--action", "allow", "cmp-p1", "3"),
        text("policy", "rule-add", "-t", "cmp-pt", "-d", "in", "-g", "cmp-src", "-l", "tcp", "-P", "443", "cmp-p2", "1"),
        text("policy", "rule-add", "-t", "cmp-pt", "-d", "in", "-n", "cmp-pn", "-l", "icmp", "cmp-p2", "2"),
        text("policy", "rule-add", "-t", "cmp-pt", "-d", "out", "-e", "cmp-src", "-l", "tcp", "-P", "22", "cmp-p2", "3"),
        text("policy", "rule-add", "-t", "cmp-pt", "-d", "out", "-o", "cmp-pn", "-p", "3", "cmp-p2", "4"),
        text("policy", "rule-add", "-t", "cmp-pt", "-d", "out", "-s", "198.19.64.0/24", "-p", "7", "cmp-p2", "5"),
        text("policy", "rule-add", "--tenant", "cmp-pt", "--from-group", "cmp-src", "--from-ip-address", "198.19.48.0/20", "cmp-p2", "6"),
        text("policy", "rule-add", "--tenant", "cmp-pt", "--from-network", "cmp-pn", "-p", "2", "cmp-p2", "7"),
        text("policy", "rule-add", "--tenant", "cmp-pt", "-d", "out", "--to-group", "cmp-src", "-p", "2", "cmp-p2", "8"),
        text("policy", "rule-add", "--tenant", "cmp-pt", "-d", "out", "--to-network", "cmp-pn", "-p", "9", "cmp-p2", "9"),
        text("policy", "rule-ls", "cmp-p1"), text("policy", "rule-ls", "-t", "cmp-pt", "cmp-p2"),
        text("policy", "rule-ls", "-q", "cmp-p1"), js("policy", "rule-ls", "-j", "cmp-p1"), js("policy", "rule-ls", "--json", "-t", "cmp-pt", "cmp-p2"),
        text("policy", "rule-ls", "cmp-nosuch"), text("policy", "rule-ls", "-t", "cmp-nosuch", "cmp-p1"),
        js("policy", "inspect", "-t", "cmp-pt", "cmp-p2"),
        usage("policy", "rule-add", "cmp-p1"), usage("policy", "rule-add", "-d", "in", "-e", "cmp-src", "cmp-p1", "9"),
        usage("policy", "rule-add", "-d", "in", "-o", "cmp-pn", "cmp-p1", "9"),
        usage("policy", "rule-add", "-d", "in", "-g", "cmp-src", "-n", "cmp-pn", "cmp-p1", "9"),
        usage("policy", "rule-add", "-d", "out", "-g", "cmp-src", "cmp-p1", "9"), usage("policy", "rule-add", "-d", "out", "-n", "cmp-pn", "cmp-p1", "9"),
        usage("policy", "rule-add", "-d", "out", "-i", "198.19.0.0/16", "cmp-p1", "9"),
        usage("policy", "rule-add", "-d", "out", "-e", "cmp-src", "-o", "cmp-pn", "cmp-p1", "9"),
        usage("policy", "rule-add", "-d", "sideways", "cmp-p1", "9"), usage("policy", "rule-rm", "cmp-p1"), usage("policy", "rule-ls"),
        usage("policy", "create"), usage("policy", "ls", "extra"),
        text("policy", "rule-add", "-g", "cmp-nosuch", "cmp-p1", "9"), text("policy", "rule-add", "cmp-nosuch", "9"),
        text("policy", "rule-add", "-p", "1000", "cmp-p1", "9"), text("policy", "rule-add", "-j", "reject", "cmp-p1", "9"),
        text("policy", "rule-rm", "cmp-p1", "99"),
        text("policy", "rule-rm", "cmp-p1", "1"), text("policy", "rule-rm", "cmp-p1", "2"), text("policy", "rule-rm", "cmp-p1", "3"),
        text("policy", "rule-ls", "cmp-p1"),
        text("policy", "rm", "cmp-p1"), text("policy", "rm", "cmp-nosuch", differs="announce"),
        *(text("policy", "rule-rm", "-t", "cmp-pt", "cmp-p2", rule) for rule in "123456789"),
        text("group", "rm", "-t", "cmp-pt", "cmp-src"), text("policy", "delete", "-t", "cmp-pt", "cmp-p2"),
        text("network", "rm", "-t", "cmp-pt", "cmp-pn"), text("tenant", "rm", "cmp-pt"),
    ),
    "group": (
        text("network", "create", "-s", "198.18.98.0/24", "-g", "198.18.98.1", "cmp-gn"),
        text("policy", "create", "cmp-gp1"), text("policy", "create", "cmp-gp2"),
        text("netprofile", "create", "-b", "10mbps", "cmp-gprof"),
        text("group", "create", "cmp-gn", "cmp-g1"),
        text("group", "create", "-p", "cmp-gp1", "-p", "cmp-gp2", "-n", "cmp-gprof", "-r", "198.18.98.10-198.18.98.20", "--tag", "gtag",
             "cmp-gn", "cmp-g2"),
        text("group", "create", "--policy", "cmp-gp1", "--networkprofile", "cmp-gprof", "--ip-pool", "198.18.98.30-198.18.98.40",
             "--epg-tag", "gtag3", "--tenant", "default", "cmp-gn", "cmp-g3"),
        text("group", "ls"), text("group", "list", "-a"), text("group", "ls", "-q"), js("group", "ls", "-j"), js("group", "ls", "--json", "--all"),
        text("group", "ls", "-t", "cmp-nosuch"),
        js("group", "inspect", "cmp-g2"), js("group", "inspect", "-t", "default", "cmp-g3"), text("group", "inspect", "cmp-nosuch"),
        text("group", "create", "-p", "cmp-nosuch", "cmp-gn", "cmp-g4"), text("group", "create", "cmp-nosuch", "cmp-g4"),
        text("group", "create", "-n", "cmp-nosuch", "cmp-gn", "cmp-g4"), text("group", "create", "-r", "198.18.99.1-198.18.99.5", "cmp-gn", "cmp-g4"),
        text("group", "create", "-e", "cmp-nosuch", "cmp-gn", "cmp-g4"),
        usage("group", "create", "cmp-gn"), usage("group", "rm"), usage("group", "inspect"), usage("group", "ls", "extra"),
        text("policy", "rm", "cmp-gp1", differs="announce"), text("network", "rm", "cmp-gn", differs="announce"),
        text("group", "rm", "cmp-nosuch"),
        text("group", "rm", "cmp-g1"), text("group", "delete", "cmp-g2"), text("group", "rm", "-t", "default", "cmp-g3"),
        text("netprofile", "rm", "cmp-gprof"), text("policy", "rm", "cmp-gp1"), text("policy", "rm", "cmp-gp2"),
        text("network", "rm", "cmp-gn"),
    ),
    "netprofile": (
        text("tenant", "create", "cmp-npt"),
        text("netprofile", "create", "-b", "10mbps", "-d", "10", "-s", "64", "cmp-np1"),
        text("netprofile", "create", "--bandwidth", "2 Gbps", "--dscp", "46", "--burst", "128", "-t", "cmp-npt", "cmp-np2"),
        text("netprofile", "create", "--tenant", "cmp-npt", "-b", "500kbps", "cmp-np3"),
        text("netprofile", "create", "-d", "8", "cmp-np4"),
        text("netprofile", "ls"), text("netprofile", "list", "-t", "cmp-npt"), text("netprofile", "ls", "-a"),
        text("netprofile", "ls", "-q", "-a"), js("netprofile", "ls", "-j"), js("netprofile", "ls", "--json", "--all"),
        text("netprofile", "ls", "-t", "cmp-nosuch"),
        js("netprofile", "inspect", "cmp-np1"), js("netprofile", "inspect", "-t", "cmp-npt", "cmp-np2"), text("netprofile", "inspect", "cmp-nosuch"),
        text("netprofile", "create", "-d", "99", "cmp-np5"), text("netprofile", "create", "-b", "fast", "cmp-np5"),
        usage("netprofile", "create"), usage("netprofile", "rm"), usage("netprofile", "inspect"), usage("netprofile", "ls", "x"),
        text("netprofile", "rm", "cmp-nosuch"),
        text("netprofile", "rm", "cmp-np1"), text("netprofile", "delete", "-t", "cmp-npt", "cmp-np2"),
        text("netprofile", "rm", "--tenant", "cmp-npt", "cmp-np3"), text("netprofile", "rm", "cmp-np4"), text("tenant", "rm", "cmp-npt"),
    ),
    "service": (
        text("network", "create", "-s", "198.18.99.0/24", "cmp-sn"),
        text("service", "create", "-s", "cmp-sn", "-l", "app=web", "-l", "tier=fe", "-p", "80:8080:TCP", "cmp-s1"),
        text("service", "create", "--network", "cmp-sn", "--selector", "app=db", "--port", "5432:5432:TCP", "--port", "53:53:UDP",
             "--preferred-ip", "198.18.99.200", "--tenant", "default", "cmp-s2"),
        text("service", "ls"), text("service", "list", "-a"), text("service", "ls", "-q"), js("service", "ls", "-j"),
        js("service", "ls", "--json", "--all"), text("service", "ls", "-t", "cmp-nosuch"),
        js("service", "inspect", "cmp-s1"), js("service", "inspect", "-t", "default", "cmp-s2"), text("service", "inspect", "cmp-nosuch"),
        text("service", "create", "-s", "cmp-nosuch", "-l", "a=b", "-p", "80:80:TCP", "cmp-s3"),
        text("service", "create", "-s", "cmp-sn", "-l", "a=b", "-p", "80:80:TCP", "--ip", "198.18.100.1", "cmp-s3"),
        usage("service", "create"), usage("service", "rm"), usage("service", "inspect"),
        text("service", "rm", "cmp-nosuch", differs="announce"),
        text("service", "rm", "cmp-s1"), text("service", "delete", "-t", "default", "cmp-s2"), text("network", "rm", "cmp-sn"),
    ),
    "bgp": (
        text("bgp", "create", "--router-ip", "198.19.1.10/24", "--as", "65001", "--neighbor-as", "65002", "--neighbor", "198.19.1.1", "cmp-h1"),
        text("bgp", "create", "--router-ip", "198.19.2.10/24", "--as", "65010", "--neighbor-as", "65020", "--neighbor", "198.19.2.1", "cmp-h2"),
        text("bgp", "ls"), text("bgp", "list"), text("bgp", "ls", "-q", differs="bgp-quiet"), js("bgp", "ls", "-j"), js("bgp", "ls", "--json"),
        js("bgp", "inspect", "cmp-h1"), text("bgp", "inspect", "cmp-nosuch"),
        usage("bgp", "create", "--router-ip", "198.19.1.10", "--as", "1", "--neighbor-as", "2", "--neighbor", "198.19.1.1", "cmp-h3"),
        usage("bgp", "create", "--router-ip", "198.19.1.10/24", "--as", "1", "--neighbor-as", "2", "--neighbor", "bogus", "cmp-h3"),
        usage("bgp", "create", "--router-ip", "198.19.1.10/24", "--neighbor-as", "2", "--neighbor", "198.19.1.1", "cmp-h3"),
        usage("bgp", "create"), usage("bgp", "rm"), usage("bgp", "inspect"), usage("bgp", "ls", "x"),
        text("bgp", "rm", "cmp-nosuch", differs="announce"),
        text("bgp", "rm", "cmp-h1"), text("bgp", "delete", "cmp-h2"),
    ),
    "global": (
        text("global", "info"), js("global", "info", "-j"), js("global", "info", "--json", "-t", "default", "-a"), js("global", "inspect"),
        text("global", "set", "--vlan-range", "100-2000"), text("global", "info"),
        # The private subnet stays the production default (Contiv's 172.19.0.0/16, not a test address): netctl
        # re-sends its flag's default on every `global set`, contivd ctl does not (commands.py), so any other
        # value would leave the two clients' stores apart.
        text("global", "set", "-v", "1-4094", "-x", "1-10000", "-b", "bridge", "-a", "proxy", "-f", "default", "-s", "172.19.0.0/16"),
        text("global", "set", "--vxlan-range", "1-20000", "--fwd-mode", "bridge", "--arp-mode", "flood", "--fabric-mode", "default",
             "--private-subnet", "172.19.0.0/16"),
        text("global", "info"), text("global", "set", "--fwd-mode", "sideways"), text("global", "set", "--vlan-range", "0-99999"),
        text("global", "set", "-a", "proxy", "-x", "1-10000"), text("global", "info"),
        usage("global", "info", "x"), usage("global", "inspect", "x"),
    ),
    "aci-gw": (
        text("aci-gw", "info"), js("aci-gw", "info", "-j"),
        text("aci-gw", "set", "-p", "topology/pod-1/paths-101/pathep-[eth1/14]", "-n", "topology/pod-1/node-101", "-d", "containerDom"),
        text("aci-gw", "info"), js("aci-gw", "info", "--json"), js("aci-gw", "inspect"),
        text("aci-gw", "set", "--path-bindings", "", "--node-bindings", "", "--phys-dom", "dom2", "--enforce-policies", "no",
             "--include-common-tenant", "yes"),
        text("aci-gw", "info"), text("aci-gw", "set", "-e", "maybe"), text("aci-gw", "set", "-e", "yes", "-i", "no", "-d", "", "-p", "", "-n", ""),
        usage("aci-gw", "info", "x"), usage("aci-gw", "inspect", "x"),
    ),
    "app-profile": (
        text("network", "create", "-s", "198.18.100.0/24", "cmp-an"),
        text("group", "create", "cmp-an", "cmp-ag1"), text("group", "create", "cmp-an", "cmp-ag2"),
        text("app-profile", "create", "-g", "cmp-ag1,cmp-ag2", "cmp-a1"), text("app-profile", "create", "cmp-a2"),
        text("app-profile", "ls"), text("app-profile", "list", "-a"), text("app-profile", "ls", "-q"), js("app-profile", "ls", "-j"),
        text("app-profile", "group-ls", "cmp-a1"), text("app-profile", "group-list", "-t", "default", "cmp-a1"),
        js("app-profile", "group-ls", "-j", "cmp-a1"), text("app-profile", "group-ls", "cmp-nosuch"),
        text("app-profile", "group-ls", "-a", "-q", "cmp-a2"), js("app-profile", "ls", "--json", "--all"), text("app-profile", "ls", "--quiet"),
        text("app-profile", "ls", "-t", "cmp-nosuch"),
        text("app-profile", "update", "--group", "cmp-ag2", "cmp-a1"), text("app-profile", "group-ls", "cmp-a1"),
        text("app-profile", "update", "-g", "cmp-nosuch", "cmp-a1"), text("app-profile", "create", "-g", "cmp-nosuch", "cmp-a3"),
        usage("app-profile", "create"), usage("app-profile", "update"), usage("app-profile", "rm"), usage("app-profile", "group-ls"),
        text("app-profile", "rm", "cmp-nosuch"),
        text("app-profile", "rm", "cmp-a1"), text("app-profile", "delete", "-t", "default", "cmp-a2"),
        text("group", "rm", "cmp-ag1"), text("group", "rm", "cmp-ag2"), text("network", "rm", "cmp-an"),
    ),
    "external-contracts": (
        text("external-contracts", "create", "-c", "-a", "uni/tn-common/brc-default", "cmp-e1"),
        text("external-contracts", "create", "--provided", "--contract", "uni/tn-x/brc-a", "--contract", "uni/tn-x/brc-b", "-t", "default", "cmp-e2"),
        text("external-contracts", "create", "--consumed", "--contract", "uni/tn-y/brc-c", "--tenant", "default", "cmp-e3"),
        text("external-contracts", "ls"), text("external-contracts", "list", "-a"), text("external-contracts", "ls", "-q"),
        text("external-contracts", "ls", "--quiet", "--all"), js("external-contracts", "ls", "--json", "--all"),
        js("external-contracts", "ls", "-j"), text("external-contracts", "ls", "-t", "cmp-nosuch"),
        usage("external-contracts", "create", "-c", "-p", "-a", "x", "cmp-e3"), usage("external-contracts", "create", "-a", "x", "cmp-e3"),
        usage("external-contracts", "create", "-c", "cmp-e3"), usage("external-contracts", "create"), usage("external-contracts", "rm"),
        text("external-contracts", "rm", "cmp-nosuch", differs="announce"),
        text("external-contracts", "rm", "cmp-e1"), text("external-contracts", "delete", "-t", "default", "cmp-e2"),
        text("external-contracts", "rm", "--tenant", "default", "cmp-e3"),
    ),
    "endpoint-version": (
        text("endpoint", "inspect", "cmp-nosuch"), text("ep", "inspect", "0123456789abcdef"), usage("endpoint", "inspect"),
        text("version", differs="client-version"), usage("version", "x"),
    ),
    # The order cases: objects whose answers nest every struct netctl prints (links, link maps,
    # Oper members, endpoints), made over REST by `order_objects` since netctl cannot make endpoints.
    "order": (
        js("tenant", "inspect", "cmp-ot"), js("network", "inspect", "-t", "cmp-ot", "cmp-on"), js("network", "ls", "-j", "-t", "cmp-ot"),
        js("group", "inspect", "-t", "cmp-ot", "cmp-og"), js("group", "ls", "-j", "-t", "cmp-ot"),
        js("policy", "inspect", "-t", "cmp-ot", "cmp-op1"), js("policy", "rule-ls", "-j", "-t", "cmp-ot", "cmp-op1"),
        js("netprofile", "inspect", "-t", "cmp-ot", "cmp-oprof"), js("netprofile", "ls", "-j", "-t", "cmp-ot"),
        js("endpoint", "inspect", "cmp-oe1"), js("endpoint", "inspect", "cmp-oe2"),
        js("service", "inspect", "-t", "cmp-ot", "cmp-os"), js("app-profile", "group-ls", "-j", "-t", "cmp-ot", "cmp-oa"),
        js("global", "inspect"), js("global", "info", "-j"),
    ),
}  # fmt: skip

ORDER_OBJECTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("tenants/cmp-ot", {}),
    ("networks/cmp-ot:cmp-on", {"networkName": "cmp-on", "subnet": "198.18.101.0/24", "gateway": "198.18.101.1", "encap": "vxlan"}),
    ("policys/cmp-ot:cmp-op1", {"policyName": "cmp-op1"}),
    ("policys/cmp-ot:cmp-op2", {"policyName": "cmp-op2"}),
    ("rules/cmp-ot:cmp-op1:1", {"policyName": "cmp-op1", "ruleId": "1", "priority": 3, "direction": "in", "protocol": "tcp", "port": 80, "action": "allow"}),
    ("netprofiles/cmp-ot:cmp-oprof", {"profileName": "cmp-oprof", "bandwidth": "10mbps", "DSCP": 10}),
    ("endpointGroups/cmp-ot:cmp-og", {"groupName": "cmp-og", "networkName": "cmp-on", "policies": ["cmp-op2", "cmp-op1"], "netProfile": "cmp-oprof"}),
    ("appProfiles/cmp-ot:cmp-oa", {"appProfileName": "cmp-oa", "endpointGroups": ["cmp-og"]}),
    ("serviceLBs/cmp-ot:cmp-os", {"serviceName": "cmp-os", "networkName": "cmp-on", "selectors": ["app=web"], "ports": ["80:8080:TCP"]}),
)  # fmt: skip
"""The order chapter's objects (path under /api/v1/, body without tenantName), in creation order."""


@contextlib.contextmanager
def order_objects(node: ContivdProcess) -> Iterator[None]:
    """ORDER_OBJECTS and two endpoints in group cmp-og, one started (labels, a container id) so
    it provides service cmp-os; all removed afterwards, even on failure."""
    made: list[str] = []
    endpoints: list[str] = []
    try:
        for path, body in ORDER_OBJECTS:
            assert node.post(f"/api/v1/{path}/", {"tenantName": "cmp-ot", **body}).status_code == 200, path
            made.append(path)
        for ep in ("cmp-oe1", "cmp-oe2"):
            config = {"Container": ep, "Host": node.name, "ServiceName": "cmp-og"}
            created = node.post("/plugin/createEndpoint", {"TenantName": "cmp-ot", "NetworkName": "cmp-on", "EndpointID": ep, "ConfigEP": config})
            assert created.status_code == 200, created.text
            endpoints.append(ep)
        started = {
            "Tenant": "cmp-ot",
            "Network": "cmp-on",
            "EndpointID": "cmp-oe2",
            "ContainerID": "0123cafe",
            "Labels": {"app": "web"},
            "Event": "start",
        }
        assert node.post("/plugin/updateEndpoint", started).status_code == 200
        yield
    finally:
        for ep in endpoints:
            node.post("/plugin/deleteEndpoint", {"TenantName": "cmp-ot", "NetworkName": "cmp-on", "ServiceName": "cmp-og", "EndpointID": ep})
        for path in reversed(made):
            node.delete(f"/api/v1/{path}/")


PREPARED: dict[str, Callable[[ContivdProcess], contextlib.AbstractContextManager[None]]] = {"order": order_objects}
"""Chapters whose objects are made over REST around both clients' runs."""


@dataclass(frozen=True)
class Outcome:
    stdout: str
    stderr: str
    code: int


PROGRAM = "contivd ctl"
"""How a command's help names the program: netctl writes its argv[0] (the binary's path here)."""


def run_netctl(netctl: Path, url: str, args: tuple[str, ...], home: Path) -> Outcome:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    done = subprocess.run([str(netctl), "--netmaster", url, *args], capture_output=True, text=True, env=env, timeout=60)
    return Outcome(done.stdout.replace(str(netctl), PROGRAM), done.stderr, done.returncode)


def run_ctl(url: str, args: tuple[str, ...]) -> Outcome:
    result = CliRunner().invoke(cli, ["ctl", "--netmaster", url, *args], env=dict(NO_CTL_ENV), prog_name="contivd")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return Outcome(result.stdout, result.stderr, result.exit_code)


def store_state(node: ContivdProcess) -> dict[str, object]:
    """Every object collection a chapter touches, to check each run starts from the same store."""
    collections = ("tenants", "networks", "endpointGroups", "policys", "rules", "netprofiles", "serviceLBs", "Bgps",
                   "appProfiles", "extContractsGroups", "globals", "aciGws")  # fmt: skip
    return {name: sorted(node.get(f"/api/v1/{name}/").json() or [], key=json.dumps) for name in collections}


def run_chapter(node: ContivdProcess, steps: tuple[Step, ...], client: Callable[[Step], Outcome]) -> list[Outcome]:
    """Run the steps in order; then undo what no netctl command can (the aciGw object, which
    `aci-gw set` creates and nothing removes), and check the store is as it was."""
    before = store_state(node)
    outcomes = [client(step) for step in steps]
    if not before["aciGws"]:
        node.delete("/api/v1/aciGws/aciGw/")
    assert store_state(node) == before, f"the steps left the store changed: {steps}"
    return outcomes


def comparable(step: Step, outcome: Outcome) -> list[str]:
    """The stdout lines to compare, as printed: JSON too, whose members must come in netctl's
    order (its Go structs' declaration order, contivd/ctl/fieldorder.py)."""
    return outcome.stdout.splitlines()


def difference(step: Step, netctl: Outcome, ctl: Outcome) -> str | None:
    """Why the two outcomes disagree (a diff from netctl's stdout to contivd ctl's), or None;
    a step with an intended difference compares the exit status only."""
    if netctl.code != ctl.code:
        return f"exit status: netctl {netctl.code}, contivd ctl {ctl.code}\nnetctl stdout+stderr:\n{netctl.stdout}{netctl.stderr}contivd ctl stdout+stderr:\n{ctl.stdout}{ctl.stderr}"
    if step.differs is not None:
        return None
    theirs, ours = comparable(step, netctl), comparable(step, ctl)
    if theirs == ours:
        return None
    return "stdout (- netctl, + contivd ctl):\n" + "\n".join(difflib.unified_diff(theirs, ours, lineterm="", n=1))


@pytest.fixture(scope="module")
def netctl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return netctl_binary(tmp_path_factory.mktemp("netctl-build"))
    except ContivBuildUnavailable as why:
        pytest.skip(str(why))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("netctl-home")


@pytest.fixture(scope="module")
def server(node: ContivdProcess) -> Iterator[str]:
    """The URL both clients call: a loopback port relayed to the node's root-only API socket.
    Loopback TCP without a token only reads, and netctl sends a token only over https from
    root's own ~/.netctl/config.json, which a test must not write; through the relay both
    clients write as root on the node does (the comparison is about what they print)."""
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=Relay([listener], str(node.socket)).serve, args=(listener,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_netctl_and_ctl_agree(chapter: str, netctl: Path, node: ContivdProcess, server: str, home: Path) -> None:
    steps = CHAPTERS[chapter]
    with PREPARED.get(chapter, lambda node: contextlib.nullcontext())(node):
        theirs = run_chapter(node, steps, lambda step: run_netctl(netctl, server, step.args, home))
        ctl = run_chapter(node, steps, lambda step: run_ctl(server, step.args))
    problems = [
        f"--- {' '.join(step.args)}\n{why}"
        for step, netctl_outcome, ours in zip(steps, theirs, ctl, strict=True)
        if (why := difference(step, netctl_outcome, ours)) is not None
    ]
    assert not problems, f"{len(problems)} of {len(steps)} commands differ:\n" + "\n".join(problems)
